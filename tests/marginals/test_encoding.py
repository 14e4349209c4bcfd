import gzip

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.data.encoding import encode_file, iter_encoded
from marg.errors import InputError

CB = Codebook(
    features=(
        CategoricalFeature("color", ("red", "green", "blue")),
        CategoricalFeature("smoke", ("no", "yes", "unknown"), missing="unknown"),
        NumericFeature("age", edges=(30, 60), missing=True),
        NumericFeature("bp", lo=80, hi=200),
    ),
    label=Label("y", ("neg", "pos")),
)

GOOD = """color,smoke,age,bp,y,extra
red,no,25,120,neg,1
green,,30,250,pos,2
blue,yes,61,70,pos,3
red,yes,,100,neg,4
"""


def write(tmp_path, text, name="d.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_encode_good_file(tmp_path):
    enc = encode_file(write(tmp_path, GOOD), CB)
    np.testing.assert_array_equal(enc.X[:, 0], [0, 1, 2, 0])
    np.testing.assert_array_equal(enc.X[:, 1], [0, 2, 1, 1])  # empty → missing level
    np.testing.assert_array_equal(enc.X[:, 2], [0, 0, 2, 3])  # 30 is in (-inf, 30]; empty → missing bin
    np.testing.assert_array_equal(enc.X[:, 3], [120, 200, 80, 100])  # clipped to the public range
    np.testing.assert_array_equal(enc.y, [0, 1, 1, 0])


def test_tsv_gzip_and_parquet_equal_csv(tmp_path):
    ref = encode_file(write(tmp_path, GOOD), CB)
    tsv = tmp_path / "d.tsv.gz"
    with gzip.open(tsv, "wt") as fh:
        fh.write(GOOD.replace(",", "\t"))
    enc = encode_file(tsv, CB)
    np.testing.assert_array_equal(enc.X, ref.X)
    np.testing.assert_array_equal(enc.y, ref.y)
    tbl = pa.table(
        {
            "color": ["red", "green", "blue", "red"],
            "smoke": ["no", None, "yes", "yes"],
            "age": [25.0, 30.0, 61.0, None],
            "bp": [120, 250, 70, 100],
            "y": ["neg", "pos", "pos", "neg"],
        }
    )
    pq.write_table(tbl, tmp_path / "d.parquet")
    enc = encode_file(tmp_path / "d.parquet", CB)
    np.testing.assert_array_equal(enc.X, ref.X)
    np.testing.assert_array_equal(enc.y, ref.y)


def test_streaming_in_small_chunks_equals_whole(tmp_path, rng):
    rows = ["color,smoke,age,bp,y"]
    for _ in range(3000):
        rows.append(
            f"{rng.choice(['red', 'green', 'blue'])},{rng.choice(['no', 'yes', ''])},"
            f"{rng.integers(0, 90)},{rng.integers(50, 250)},{rng.choice(['neg', 'pos'])}"
        )
    p = write(tmp_path, "\n".join(rows) + "\n")
    whole = encode_file(p, CB)
    chunks = list(iter_encoded(p, CB, chunk_bytes=4096))
    assert len(chunks) > 3
    assert [c.start_row for c in chunks][:2] == [1, 1 + chunks[0].n]
    np.testing.assert_array_equal(np.concatenate([c.X for c in chunks]), whole.X)


@pytest.mark.parametrize(
    "text, pattern",
    [
        (GOOD.replace("blue,yes", "purple,yes"),
         r"column 'color': unknown level at row 3 \(not shown: a patient's value"),
        (GOOD.replace("red,no,25", "red,no,abc"), r"column 'age': the value at row 1 is not a number \(not shown"),
        (GOOD.replace(",120,neg", ",,neg"), r"column 'bp': missing or NaN value at row 1"),
        (GOOD.replace("green,,30", ",,30"), r"column 'color': missing value at row 2 \(the codebook gives this "
                                            r"feature no missing level\)"),
        (GOOD.replace("61,70,pos", "61,70,"), r"column 'y': missing label at row 3"),
        (GOOD.replace("61,70,pos", "61,70,maybe"), r"column 'y': unknown class at row 3 \(not shown"),
        (GOOD.replace("bp,", "bpx,"), r"column 'bp' is absent"),
        (GOOD.replace("red,no,25,120", "red,no,NaN,120").replace("age", "age"), None),
    ],
)
def test_bad_input_one_line_errors(tmp_path, text, pattern):
    p = write(tmp_path, text)
    if pattern is None:  # NaN in a binned feature WITH a missing level is fine
        assert encode_file(p, CB).X[0, 2] == 3
        return
    with pytest.raises(InputError, match=pattern) as exc:
        encode_file(p, CB)
    assert "\n" not in str(exc.value)


def test_nan_without_missing_level(tmp_path):
    cb = Codebook(features=(NumericFeature("age", edges=(30,)),), label=Label("y", ("0", "1")))
    p = write(tmp_path, "age,y\n10,0\nNaN,1\n")
    with pytest.raises(InputError, match=r"column 'age': missing or NaN value at row 2"):
        encode_file(p, cb)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="data file not found"):
        encode_file(tmp_path / "none.csv", CB)
