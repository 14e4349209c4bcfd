"""A CSV's column names are Arrow's, read without a column decoder per name: for a plain header (no
quote character) the names are the first line split at the delimiter, and the first read block's rows
are still parsed (a malformed row there is refused as before), with one column decoded. Arrow's reader
held about 8 KB of C heap per column it decodes: at 20,000 columns the names cost more than the rows
(issue 48's wide study)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from marg.errors import InputError
from marg.marginals.data import io

HEADERS = {
    "plain.csv": b"a,b,c\n1,2,3\n",
    "bom.csv": b"\xef\xbb\xbfa,b\n1,2\n",
    "crlf.csv": b"a,b\r\n1,2\r\n",
    "cr.csv": b"a,b\r1,2\r",
    "blank_lines.csv": b"\n\na,b\n1,2\n",
    "spaces_and_empty.csv": b"a , b,,\n1,2,3,4\n",
    "duplicates.csv": b"a,a,b\n1,2,3\n",
    "quoted.csv": b'"a,x",b,"c""d"\n1,2,3\n',
    "quote_inside.csv": b'a"b,c\n1,2\n',
    "unicode.csv": "gène,ü,y\n1,2,3\n".encode(),
    "header_only.csv": b"a,b\n",
    "tabs.tsv": b"a\tb c\td\n1\t2\t3\n",
    "sniffed.txt": b"a\tb\n1\t2\n",
}


def arrow_names(path) -> list[str]:
    """Arrow's reader's own names (every column decoded), the old way."""
    opts = pcsv.ParseOptions(delimiter=io._delimiter(path))
    with pa.input_stream(str(path), compression="detect") as s:
        return pcsv.open_csv(s, parse_options=opts).schema.names


@pytest.mark.parametrize("name", sorted(HEADERS))
def test_the_names_are_arrows(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(HEADERS[name])
    assert io.column_names(path) == arrow_names(path)
    gz = tmp_path / (name + ".gz")
    gz.write_bytes(gzip.compress(HEADERS[name]))
    assert io.column_names(gz) == arrow_names(path)


def test_a_plain_header_is_split_and_a_quoted_one_left_to_arrow(tmp_path):
    (tmp_path / "p.csv").write_bytes(b"a,b\n1,2\n")
    (tmp_path / "q.csv").write_bytes(b'"a",b\n1,2\n')
    (tmp_path / "n.csv").write_bytes(b"a,b")  # no line end: Arrow's reader decides (it refuses this file)
    names, first = io._plain_header(tmp_path / "p.csv")
    assert names == ["a", "b"] and first.to_pybytes() == b"a,b\n1,2\n"
    assert io._plain_header(tmp_path / "q.csv") is None
    assert io._plain_header(tmp_path / "n.csv") is None


def test_the_first_blocks_whole_rows_only(tmp_path, monkeypatch):
    """The block handed to Arrow ends at the last line end within the default block: the rows Arrow's
    reader parses first on the file itself (the partial row after it is the next block's)."""
    monkeypatch.setattr(io, "DEFAULT_CHUNK_BYTES", 20)
    path = tmp_path / "d.csv"
    path.write_bytes(b"a,b\n11,22\n33,44\n55,66\n")  # 20 bytes end inside "55,66"
    names, first = io._plain_header(path)
    assert names == ["a", "b"] and first.to_pybytes() == b"a,b\n11,22\n33,44\n"


@pytest.mark.parametrize("text, message", [
    (b"a,b\n1,2,3\n", "line 2 has 3 fields, the header 2"),
    (b"a,b,c\n1,2,3\n4,5\n", "line 3 has 2 of the header's 3 fields (first missing: column 'c')"),
    (b"a,b", "malformed CSV"),
    (b"", "Empty CSV file"),
])
def test_a_malformed_first_block_is_refused_as_before(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(text)
    with pytest.raises(InputError) as err:
        io.column_names(path)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_header_that_is_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes(b"a,g\xe8ne\n1,2\n")
    with pytest.raises(InputError, match=r"header is not UTF-8 text \(column 2"):
        io.column_names(path)


CHILD = """
import json, sys
from marg.cli.app import lean_arrow_memory
lean_arrow_memory()  # the pool a marg command runs on
import pyarrow.csv  # noqa: F401 (its import is not the names' cost)
from marg.marginals.data.io import column_names, give_back_memory
def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) * 1024
give_back_memory()
with open("/proc/self/clear_refs", "w") as fh:  # the peak RSS starts again from the resident size
    fh.write("5")
before = hwm()
names = column_names(sys.argv[1])
print(json.dumps({"columns": len(names), "grew": hwm() - before}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/clear_refs")
def test_naming_20000_columns_costs_about_the_header(tmp_path):
    """The peak RSS grows by less than 200 × the header's bytes while the names of a 20,000-column file of 20
    rows are read (the names and the first block's parse; Arrow's reader decoding every column: ≈ 1,300 ×)."""
    names = [f"g{i:05d}" for i in range(20_000)]
    path = tmp_path / "wide.csv"
    row = ",".join("01"[i % 2] for i in range(20_000))
    header = ",".join(names).encode() + b"\n"
    path.write_bytes(header + "".join(row + "\n" for _ in range(20)).encode())
    r = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
    got = json.loads(r.stdout)
    assert got["columns"] == 20_000
    assert got["grew"] < 200 * len(header), (got, len(header))
