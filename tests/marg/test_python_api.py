"""The notebook path (issue 26): ``import marg`` entry points, verified loading, predict/score on rows as a site holds
them.

Oracles: the CLI's own evaluation of the same file (``marg.api.evaluate_file``), the rows'
label column, the bundle's exact row count, and the CLI's wording of the same error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

import marg
from marg.errors import InputError, RefusedError

ENTRY_POINTS = {"load_summary", "learn", "load_model", "save_model", "model_card", "MRC", "DCC", "RenyiClassifier",
                "NaiveBayes", "BoostVote", "Summary", "Model"}


def _paths(demo):
    w = demo["workdir"]
    return {"bundles": [str(b) for b in demo["bundles"]], "trust": w / "learner" / "trust",
            "key": w / "learner" / "learner.seal.key", "sign_key": w / "learner" / "learner.sign.key",
            "holdout": demo["files"]["north"]["test"], "codebook": w / "codebook.json"}


def _model_trust(demo, tmp_path) -> Path:
    d = tmp_path / "learner-keys"
    d.mkdir(exist_ok=True)
    shutil.copy(demo["workdir"] / "learner" / "learner.sign.pub", d / "learner.sign.pub")
    return d


def test_import_marg_lists_the_entry_points_and_loads_none_of_them():
    assert ENTRY_POINTS <= set(dir(marg)) and ENTRY_POINTS <= set(marg.__all__)
    code = ("import sys, marg; heavy = [m for m in ('numpy', 'marg.learners', 'marg.protocols', 'marg.marginals', "
            "'pyarrow') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out
    assert marg.MRC.__name__ == "MRC" and callable(marg.load_summary)
    with pytest.raises(AttributeError):
        marg.no_such_thing


def test_load_summary_names_the_keyword_not_the_flag(demo):
    p = _paths(demo)
    with pytest.raises(RefusedError) as exc:
        marg.load_summary(p["bundles"], trust=p["trust"])  # sealed bundles, no key
    assert "key=…" in str(exc.value) and "--" not in str(exc.value)
    assert "--key" in exc.value.cli_message()  # the command line names its flag
    s = marg.load_summary(p["bundles"], trust=p["trust"], key=p["key"])
    assert isinstance(s, marg.Summary) and s.n_exact is None and isinstance(s.n, float)
    assert repr(s).startswith("<marg Summary: 3 sites (north, south, city); n ≈ ") and "noisy" in repr(s)


def test_an_exact_summary_has_an_integer_count(tmp_path):
    from marg.protocols.export import export_site
    from marg.marginals.synthetic import demo_codebook, generate, write_csv

    cb = demo_codebook()
    data = tmp_path / "rows.csv"
    write_csv(data, generate(257, "north", seed=1))
    export_site(data, cb, "north", tmp_path / "n.bundle", min_cell=1)
    s = marg.load_summary(tmp_path / "n.bundle", allow_unsigned=True)
    assert s.n_exact == 257 and isinstance(s.n_exact, int) and s.n == 257.0
    assert "n = 257 (exact)" in repr(s)


def test_load_model_verifies_the_signature(demo, tmp_path):
    src = demo["workdir"] / "learner" / "mrc.model.json"
    trust = _model_trust(demo, tmp_path)
    m = marg.load_model(src, trust=trust)
    assert "signed by learner" in repr(m) and "certificate W(h) ≤ " in repr(m)
    with pytest.raises(RefusedError, match="no trust store"):
        marg.load_model(src)
    d = json.loads(src.read_text())
    d["worst_case_error"] = 0.01  # a better-looking certificate
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    with pytest.raises(RefusedError, match="bad signature"):
        marg.load_model(bad, trust=trust)
    d = json.loads(src.read_text())
    d.pop("signature")
    bad.write_text(json.dumps(d))
    with pytest.raises(RefusedError) as exc:
        marg.load_model(bad, trust=trust)
    assert "allow_unsigned=True" in str(exc.value) and "--allow-unsigned" in exc.value.cli_message()
    assert "unsigned" in repr(marg.load_model(bad, allow_unsigned=True))


def test_predict_and_score_take_rows_as_the_site_holds_them(demo, tmp_path):
    from marg.api import evaluate_file
    from marg.marginals.data.encoding import encode_file

    p = _paths(demo)
    model = marg.load_model(demo["workdir"] / "learner" / "auto.model.json", trust=_model_trust(demo, tmp_path))
    ev = evaluate_file(model, p["holdout"])  # what `marg evaluate` reports on the file
    enc = encode_file(p["holdout"], model.codebook)
    table = pcsv.read_csv(p["holdout"], convert_options=pcsv.ConvertOptions(strings_can_be_null=True))
    from_codes = model.predict(enc.X)
    for rows in (str(p["holdout"]), p["holdout"], table, table.combine_chunks().to_batches()[0]):
        assert np.array_equal(model.predict(rows), from_codes)
        assert model.score(rows) == pytest.approx(ev["accuracy"])
    assert np.allclose(model.predict_proba(table), model.predict_proba(enc.X))
    labels = table.column(model.codebook.label.name)
    assert model.score(table, labels) == pytest.approx(ev["accuracy"])  # y as class names
    assert model.score(enc.X, enc.y) == pytest.approx(ev["accuracy"])  # y as codes
    assert model.estimator.score(enc.X, enc.y) == pytest.approx(ev["accuracy"])
    assert model.predict_labels(table)[:3] == [model.classes[int(k)] for k in from_codes[:3]]
    with pytest.raises(InputError, match="score needs labels"):
        model.score(enc.X)


def test_predict_on_a_pandas_dataframe(demo, tmp_path):
    pd = pytest.importorskip("pandas")
    from marg.api import evaluate_file

    p = _paths(demo)
    model = marg.load_model(demo["workdir"] / "learner" / "mrc.model.json", trust=_model_trust(demo, tmp_path))
    df = pd.read_csv(p["holdout"])
    assert model.score(df) == pytest.approx(evaluate_file(model, p["holdout"])["accuracy"])
    assert model.score(df, df[model.codebook.label.name]) == model.score(df)
    assert np.array_equal(model.predict(df), model.predict(p["holdout"]))
    df.loc[4, "age_band"] = "90-109"
    with pytest.raises(InputError) as exc:
        model.predict(df)
    assert str(exc.value).startswith("column 'age_band': unknown level at row 5 (not shown")
    with pytest.raises(InputError, match="column 'sex' is absent"):
        model.predict(df.drop(columns=["sex"]))


def test_bad_rows_are_one_line_errors(demo, tmp_path):
    model = marg.load_model(demo["workdir"] / "learner" / "mrc.model.json", trust=_model_trust(demo, tmp_path))
    with pytest.raises(InputError, match="codes must be numbers"):
        model.predict(np.array([["a"] * model.codebook.n_features]))
    with pytest.raises(InputError, match=r"shape \(n, 8\)"):
        model.predict(np.zeros((2, 3), dtype=int))
    with pytest.raises(InputError, match="the label at row 2 is not a class") as exc:
        model.score(np.zeros((2, 8), dtype=int), ["no", "maybe"])
    assert "maybe" not in str(exc.value)  # a patient's value is never echoed (issue 35)
    t = pa.table({f.name: [f.level_names[0]] for f in model.codebook.features})
    assert model.predict(t).shape == (1,)


def test_learn_returns_a_certified_model_that_saves_signed(demo, tmp_path):
    p = _paths(demo)
    s = marg.load_summary(p["bundles"], trust=p["trust"], key=p["key"])
    est = marg.DCC(greedy=True)
    assert repr(est) == "DCC(greedy=True)  # not fitted"
    m = marg.learn(s, est)
    # a clone is fitted (scikit-learn's convention): the estimator given stays unfitted, with its parameters
    assert m.estimator is not est and repr(est) == "DCC(greedy=True)  # not fitted"
    assert "fitted on 8 features: certificate W(h) ≤ " in repr(m.estimator)
    assert m.info["n"] == s.n and m.info["level_counts"]["features"]["sex"]["halfwidth"] > 0
    with pytest.raises(InputError) as exc:
        marg.learn(s, "mrc", greedy=True)
    assert str(exc.value).startswith("greedy=… does not apply to learner 'mrc'")
    m2 = marg.learn(s, "mrc", coverage=0.9)
    assert m2.estimator.certificate_.coverage == 0.9
    out = tmp_path / "m.json"
    assert marg.save_model(m2, out, sign_key=p["sign_key"]) is not None
    back = marg.load_model(out, trust=_model_trust(demo, tmp_path))
    assert back.worst_case_error == m2.worst_case_error and "signed by learner" in repr(back)
