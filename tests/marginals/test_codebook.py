import json

import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError
from marg.marginals.synthetic import demo_codebook


def test_round_trip_and_fingerprint_stability(tmp_path):
    cb = demo_codebook()
    p = tmp_path / "cb.json"
    cb.save(p)
    cb2 = Codebook.load(p)
    assert cb2 == cb
    assert cb2.fingerprint == cb.fingerprint
    # Key order and whitespace in the file do not change the fingerprint.
    d = json.loads(p.read_text())
    shuffled = json.dumps(dict(reversed(list(d.items()))), indent=7)
    assert Codebook.from_json(shuffled).fingerprint == cb.fingerprint
    # The draft flag is not part of the schema's identity.
    d["draft"] = True
    assert Codebook.from_dict(d).fingerprint == cb.fingerprint
    # A known value: the fingerprint is a function of the canonical JSON only.
    assert len(cb.fingerprint) == 64


def test_fingerprint_changes_with_schema():
    cb = demo_codebook()
    d = cb.to_dict()
    d["features"][0]["levels"] = d["features"][0]["levels"][::-1]
    assert Codebook.from_dict(d).fingerprint != cb.fingerprint
    d = cb.to_dict()
    d["label"]["classes"] = ["yes", "no"]
    assert Codebook.from_dict(d).fingerprint != cb.fingerprint


def test_numeric_features_round_trip():
    cb = Codebook(
        features=(NumericFeature("age", edges=(40, 60), missing=True), NumericFeature("bp", lo=80, hi=200)),
        label=Label("y", ("a", "b")),
    )
    cb2 = Codebook.from_json(cb.to_json())
    assert cb2 == cb
    assert cb2.features[0].n_levels == 4  # 3 bins + missing
    assert cb2.features[0].level_names == ("<=40", "(40,60]", ">60", "missing")
    assert not cb2.features[1].is_discrete


@pytest.mark.parametrize(
    "bad, needle",
    [
        ({"features": [{"name": "a", "type": "categorical", "levels": ["x", "x"]}],
          "label": {"name": "y", "classes": ["0", "1"]}}, "duplicate level"),
        ({"features": [{"name": "a", "type": "numeric", "edges": [2, 1]}],
          "label": {"name": "y", "classes": ["0", "1"]}}, "strictly increasing"),
        ({"features": [{"name": "a", "type": "numeric"}], "label": {"name": "y", "classes": ["0", "1"]}},
         "bin edges or a public range"),
        ({"features": [{"name": "a", "type": "weird"}], "label": {"name": "y", "classes": ["0", "1"]}}, "unknown type"),
        ({"features": [{"name": "y", "type": "categorical", "levels": ["1"]}],
          "label": {"name": "y", "classes": ["0", "1"]}}, "duplicate column"),
        ({"features": [{"name": "a", "type": "categorical", "levels": ["1"]}],
          "label": {"name": "y", "classes": ["0"]}}, "at least 2 classes"),
        ({"features": [{"name": "a", "type": "categorical", "levels": ["1"], "missing": "NA"}],
          "label": {"name": "y", "classes": ["0", "1"]}}, "missing level"),
        ({"features": [{"name": "a", "type": "numeric", "lo": 1, "hi": 1}],
          "label": {"name": "y", "classes": ["0", "1"]}}, "lo < hi"),
    ],
)
def test_invalid_codebooks_are_refused(bad, needle):
    with pytest.raises(InputError, match=needle):
        Codebook.from_dict(bad)


def test_malformed_json_and_missing_file(tmp_path):
    p = tmp_path / "cb.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        Codebook.load(p)
    with pytest.raises(InputError, match="not found"):
        Codebook.load(tmp_path / "nope.json")


def test_categorical_levels_are_strings():
    f = CategoricalFeature("a", (1, 2, 3))
    assert f.levels == ("1", "2", "3")
