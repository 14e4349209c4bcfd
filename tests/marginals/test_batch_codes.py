"""The whole-chunk encoder (:mod:`marg.marginals.data.batch_codes`) gives the codes and the errors of the
column-at-a-time rules (``encode_part`` on each feature in codebook order, then ``encode_label``),
on random typed data with missing values, over chunks whose dictionaries change; and the same
rows from CSV, Parquet, DuckDB and a pandas frame count and code the same (issue 48)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from marg.errors import InputError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.data.encoding import Encoded, encode_batch, encode_file, encode_label, encode_part

CB = Codebook(
    features=(
        CategoricalFeature("color", ("red", "green", "blue")),
        CategoricalFeature("smoke", ("no", "yes", "unknown"), missing="unknown"),
        CategoricalFeature("grade", ("1", "2", "3", "missing"), missing="missing"),  # integer / float columns
        CategoricalFeature("dose", ("0.5", "1.0", "2"), missing=None),
        NumericFeature("age", edges=(30.0, 50.0, 70.0), missing=True),
        NumericFeature("bmi", lo=15.0, hi=40.0),
        *(CategoricalFeature(f"g{k:03d}", ("0", "1", "NA"), missing="NA") for k in range(80)),
    ),
    label=Label("y", ("neg", "pos")),
)


def reference(codebook: Codebook, batch: dict, row: int, memo: dict) -> Encoded:
    """The column-at-a-time encoding (the rules before the whole-chunk encoder)."""
    parts = [encode_part(f, batch[f.name], row, memo) for f in codebook.features]
    y = encode_label(codebook.label, batch[codebook.label.name], row, memo)
    return Encoded(parts, y, row)


def random_batch(rng, n: int, text: bool) -> dict:
    """One chunk of typed columns with missing values (``text``: every column as a CSV's dictionary text)."""
    def dict_text(values, mask=None):
        arr = pa.array(values, mask=mask)
        return arr.dictionary_encode() if text else arr

    color = rng.choice([" red", "green ", "blue"], n)
    smoke = rng.choice(["no", "yes"], n)
    grade = rng.integers(1, 4, n)
    dose = rng.choice([0.5, 1.0, 2.0], n)
    age = rng.uniform(0, 100, n).round(1)
    bmi = rng.uniform(10, 45, n)
    out = {
        "color": dict_text(list(color)),
        "smoke": dict_text(list(smoke), mask=rng.random(n) < 0.1),
        "grade": (dict_text([str(g) for g in grade], mask=rng.random(n) < 0.1) if text
                  else pa.array(grade.astype(float), mask=rng.random(n) < 0.1)),
        "dose": dict_text([f"{d:.1f}" for d in dose]) if text else pa.array(dose),
        "age": dict_text([f"{a}" for a in age], mask=rng.random(n) < 0.05) if text
        else pa.array(age, mask=rng.random(n) < 0.05),
        "bmi": dict_text([repr(float(b)) for b in bmi]) if text else pa.array(bmi),
        "y": dict_text(list(rng.choice(["neg", "pos"], n))),
    }
    for k in range(80):
        v = rng.integers(0, 2, n)
        out[f"g{k:03d}"] = (dict_text([str(x) for x in v], mask=rng.random(n) < 0.05) if text
                            else pa.array(v.astype(float), mask=rng.random(n) < 0.05))
    return out


@pytest.mark.parametrize("text", [True, False])
def test_whole_chunk_codes_equal_the_column_at_a_time_codes(text):
    rng = np.random.default_rng(3)
    memo_new, memo_ref, row = {}, {}, 1
    for n in (700, 650, 5000, 1):  # the dictionaries change order between chunks; 5000 rows: integer ranges
        batch = random_batch(rng, n, text)
        new = encode_batch(CB, batch, row, memo=memo_new)
        ref = reference(CB, batch, row, memo_ref)
        for i, f in enumerate(CB.features):
            a, b = new.column(i), ref.column(i)
            assert a.dtype == b.dtype, f.name
            np.testing.assert_array_equal(a, b, err_msg=f.name)
        np.testing.assert_array_equal(new.y, ref.y)
        row += n


def _message(fn) -> str:
    with pytest.raises(InputError) as e:
        fn()
    return str(e.value)


@pytest.mark.parametrize("text", [True, False])
@pytest.mark.parametrize("spoil", ["unknown level", "missing without a level", "not a number", "raw missing",
                                   "unknown class", "missing class", "two at once", "unused unknown value"])
def test_refused_values_give_the_same_one_line_error(text, spoil):
    rng = np.random.default_rng(5)
    n = 300
    batch = random_batch(rng, n, text)
    if spoil == "unknown level":
        batch["g040"] = pa.array(["0"] * 17 + ["7"] + ["1"] * (n - 18))
    elif spoil == "missing without a level":
        batch["color"] = pa.array(["red"] * 20 + [None] + ["blue"] * (n - 21))
    elif spoil == "not a number":
        batch["age"] = pa.array(["40"] * 9 + ["old"] + ["20"] * (n - 10))
    elif spoil == "raw missing":
        batch["bmi"] = pa.array([20.0] * 30 + [float("nan")] + [22.0] * (n - 31))
    elif spoil == "unknown class":
        batch["y"] = pa.array(["neg"] * 5 + ["maybe"] + ["pos"] * (n - 6))
    elif spoil == "missing class":
        batch["y"] = pa.array(["neg"] * 5 + [None] + ["pos"] * (n - 6))
    elif spoil == "two at once":  # the first column in codebook order is named, its unknown before its missing
        batch["g070"] = pa.array(["x"] + ["0"] * (n - 1))
        batch["dose"] = pa.array([None, "3"] + ["2"] * (n - 2))
    else:  # a dictionary value no row uses is not refused
        batch["color"] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)),
                                                        pa.array(["red", "purple"]))
    new = lambda: encode_batch(CB, batch, 11, memo={})  # noqa: E731
    ref = lambda: reference(CB, batch, 11, {})  # noqa: E731
    if spoil == "unused unknown value":
        np.testing.assert_array_equal(new().column(0), ref().column(0))
        return
    msg = _message(new)
    assert msg == _message(ref)
    assert "\n" not in msg and "old" not in msg and "maybe" not in msg


def test_a_wide_codebook_with_few_level_sets(tmp_path):
    """5,000 binary features share one level set: one lookup table, every code as the reference."""
    p, n = 5000, 40
    cb = Codebook(features=tuple(CategoricalFeature(f"f{k}", ("0", "1")) for k in range(p)),
                  label=Label("y", ("a", "b")))
    rng = np.random.default_rng(0)
    X = rng.integers(0, 2, (n, p))
    path = tmp_path / "wide.csv"
    with open(path, "w") as fh:
        fh.write(",".join(f.name for f in cb.features) + ",y\n")
        for r in range(n):
            fh.write(",".join(map(str, X[r])) + f",{'ab'[r % 2]}\n")
    enc = encode_file(path, cb)
    np.testing.assert_array_equal(np.column_stack(enc.columns), X)
    np.testing.assert_array_equal(enc.y, np.arange(n) % 2)


def test_csv_parquet_duckdb_and_a_frame_count_and_code_the_same(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("duckdb")
    from marg.marginals.data.frames import encode_rows
    from marg.marginals.counts.tables import plan_cliques
    from marg.protocols.export import count_file

    rng = np.random.default_rng(9)
    n = 400
    cols = {}
    for k in range(80):
        v = rng.integers(0, 2, n).astype(float)
        v[rng.random(n) < 0.05] = np.nan
        cols[f"g{k:03d}"] = v
    cols.update(color=rng.choice(["red", "green", "blue"], n), smoke=rng.choice(["no", "yes"], n),
                grade=rng.integers(1, 4, n).astype(float), dose=rng.choice([0.5, 1.0, 2.0], n),
                age=rng.uniform(0, 100, n).round(1), bmi=rng.uniform(10, 45, n), y=rng.choice(["neg", "pos"], n))
    frame = pd.DataFrame(cols)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, tmp_path / "site.parquet")
    pcsv.write_csv(table, tmp_path / "site.csv")
    codes = {src: encode_rows(rows, CB, with_label=True)
             for src, rows in [("csv", tmp_path / "site.csv"), ("parquet", tmp_path / "site.parquet"),
                               ("frame", frame)]}
    for src, enc in codes.items():
        for i, f in enumerate(CB.features):
            np.testing.assert_array_equal(enc.column(i), codes["csv"].column(i), err_msg=f"{src} {f.name}")
        np.testing.assert_array_equal(enc.y, codes["csv"].y)
    cliques = plan_cliques(CB, "first")
    tables = {src: count_file(path, CB, cliques)[0] for src, path in
              [("csv", str(tmp_path / "site.csv")), ("parquet", str(tmp_path / "site.parquet")),
               ("duckdb", f"duckdb://{tmp_path / 'site.parquet'}")]}
    for src, ts in tables.items():
        for a, b in zip(ts, tables["csv"]):
            assert a.clique == b.clique
            np.testing.assert_array_equal(a.counts, b.counts, err_msg=f"{src} {a.name}")


# ------------------------------------------------------------------ many plain columns found at once
WIDE = Codebook(
    features=tuple(CategoricalFeature(f"c{k:03d}", ("0", "1", "2", "NA"), missing="NA") for k in range(70))
    + tuple(CategoricalFeature(f"b{k:03d}", ("false", "true")) for k in range(70))
    + tuple(CategoricalFeature(f"w{k:03d}", tuple(str(v) for v in range(400))) for k in range(70)),
    label=Label("y", ("neg", "pos")),
)


def wide_batch(rng, n: int) -> dict:
    """Plain (not dictionary) columns, many of each type: float codes with nulls, ints, bools, and
    integer columns of 400 levels (above SHARED_MAX_VALUES a group: found column by column)."""
    out = {}
    for k in range(70):
        v = rng.integers(0, 3, n).astype(float)
        out[f"c{k:03d}"] = pa.array(v, mask=rng.random(n) < 0.1) if k % 2 else pa.array(v)  # half with nulls
        out[f"b{k:03d}"] = pa.array(rng.random(n) < 0.5)
        out[f"w{k:03d}"] = pa.array(rng.integers(0, 400, n))
    out["y"] = pa.array(list(rng.choice(["neg", "pos"], n)))
    return out


@pytest.mark.parametrize("cells", [1 << 20, 1000])  # 1000: a group's columns hashed a few at a time
def test_many_plain_columns_found_at_once_code_as_column_at_a_time(cells, monkeypatch):
    import marg.marginals.data.batch_codes as bc

    monkeypatch.setattr(bc, "SHARED_CELLS", cells)
    rng = np.random.default_rng(11)
    memo_new, memo_ref, row = {}, {}, 1
    for n in (300, 280, 300):  # the shared values change between chunks
        batch = wide_batch(rng, n)
        new = encode_batch(WIDE, batch, row, memo=memo_new)
        ref = reference(WIDE, batch, row, memo_ref)
        for i, f in enumerate(WIDE.features):
            a, b = new.column(i), ref.column(i)
            assert a.dtype == b.dtype, f.name
            np.testing.assert_array_equal(a, b, err_msg=f.name)
        np.testing.assert_array_equal(new.y, ref.y)
        row += n


@pytest.mark.parametrize("spoil", ["unknown level", "null without a level", "NaN float", "two columns"])
def test_many_plain_columns_refuse_as_column_at_a_time(spoil):
    rng = np.random.default_rng(12)
    n = 200
    batch = wide_batch(rng, n)
    if spoil == "unknown level":  # 7.0 is in the group's shared values; only c040's row 34 holds it
        batch["c040"] = pa.array([0.0] * 33 + [7.0] + [1.0] * (n - 34))
    elif spoil == "null without a level":
        batch["b010"] = pa.array([True] * 8 + [None] + [False] * (n - 9))
    elif spoil == "NaN float":  # NaN (not null) is a missing value: the level NA
        batch["c041"] = pa.array([0.0] * 3 + [float("nan")] + [2.0] * (n - 4))
    else:  # the first column in codebook order is named
        batch["c069"] = pa.array([5.0] + [0.0] * (n - 1))
        batch["c050"] = pa.array([0.0] * 10 + [9.0] + [0.0] * (n - 11))
    new = lambda: encode_batch(WIDE, batch, 21, memo={})  # noqa: E731
    ref = lambda: reference(WIDE, batch, 21, {})  # noqa: E731
    if spoil == "NaN float":
        np.testing.assert_array_equal(new().column(41), ref().column(41))
        assert new().column(41)[3] == 3
        return
    msg = _message(new)
    assert msg == _message(ref)
    assert "\n" not in msg
    assert ("c050" in msg) if spoil == "two columns" else True


# ------------------------------------------------------------------ whole-number floats without hashing
FLOATS = Codebook(
    features=tuple(CategoricalFeature(f"x{k:03d}", ("-3", "-1", "0", "1", "2", "0.5", "300", "NA"), missing="NA")
                   for k in range(70)),
    label=Label("y", ("neg", "pos")),
)


def float_batch(rng, n: int, kind: str) -> dict:
    """70 float64 columns (half with nulls, some sliced so their buffers start at an offset) of ``kind``."""
    pools = {"codes": [0.0, 1.0, 2.0], "negative": [-3.0, -1.0, 0.0, -0.0, 2.0], "fraction": [0.0, 1.0, 0.5],
             "wide range": [0.0, 300.0], "NaN": [0.0, 1.0, float("nan")]}
    out = {}
    for k in range(70):
        v = rng.choice(pools[kind], n + 3)
        arr = pa.array(v, mask=rng.random(n + 3) < 0.1) if k % 2 else pa.array(v)
        out[f"x{k:03d}"] = arr.slice(3) if k % 3 == 0 else arr.slice(0, n)
    out["y"] = pa.array(list(rng.choice(["neg", "pos"], n)))
    return out


@pytest.mark.parametrize("kind", ["codes", "negative", "fraction", "wide range", "NaN"])
def test_whole_number_floats_code_as_column_at_a_time(kind):
    import marg.marginals.data.batch_codes as bc

    rng = np.random.default_rng(13)
    memo_new, memo_ref, row = {}, {}, 1
    for n in (250, 250, 240):
        batch = float_batch(rng, n, kind)
        part = [(j, batch[f.name]) for j, f in enumerate(FLOATS.features)]
        fast = bc._whole_numbers(part, n)
        assert (fast is not None) == (kind in ("codes", "negative")), kind  # the other kinds are hashed
        new = encode_batch(FLOATS, batch, row, memo=memo_new)
        ref = reference(FLOATS, batch, row, memo_ref)
        for i, f in enumerate(FLOATS.features):
            a, b = new.column(i), ref.column(i)
            assert a.dtype == b.dtype, f.name
            np.testing.assert_array_equal(a, b, err_msg=f"{kind} {f.name}")
        row += n
