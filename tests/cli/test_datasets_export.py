"""Site workflow on a real dataset: draft a codebook and export all tables from UCI adult."""

import json

import numpy as np
from typer.testing import CliRunner

from marg.cli.main import app
from marg.marginals.data.codebook import Codebook
from marg.marginals.data.encoding import encode_file
from marg.protocols.bundle import load_bundle

runner = CliRunner()


def test_adult_schema_init_and_export_all(tmp_path, datasets):
    data = datasets / "adult" / "adult.tsv.gz"
    schema = tmp_path / "adult.json"
    r = runner.invoke(app, ["schema", "init", str(data), "--label", "target", "--out", str(schema)])
    assert r.exit_code == 0, r.output
    cb = Codebook.load(schema)
    assert cb.n_features == 14
    out = tmp_path / "adult.bundle"
    # The default min-cell rule (3) refuses: adult has rare levels (e.g. a workclass seen once or twice).
    r = runner.invoke(app, ["export", str(data), "--schema", str(schema), "--site", "a", "--out", str(out), "--stats",
                            "all", "--allow-draft"])
    assert r.exit_code == 1 and "min-cell rule: table N[" in r.stderr and not out.exists()
    r = runner.invoke(app, ["export", str(data), "--schema", str(schema), "--site", "a", "--out", str(out), "--stats",
                            "all",
                            "--min-cell", "1", "--allow-draft"])
    assert r.exit_code == 0, r.output
    b = load_bundle(out)
    assert b.header["n_rows"] == 48842
    d = json.loads(runner.invoke(app, ["inspect", str(out), "--json"]).stdout)
    assert d["n_statistics"] == 1 + 14 + 91
    # The label table matches the published class counts, and pair tables are consistent.
    tabs = {t.clique: t for t in b.tables}
    np.testing.assert_array_equal(tabs[("target",)].counts, [11687, 37155])
    enc = encode_file(data, cb)
    i, j = cb.index("age"), cb.index("education")
    brute = np.zeros(tabs[("age", "education", "target")].shape, dtype=int)
    np.add.at(brute, (enc.X[:, i].astype(int), enc.X[:, j].astype(int), enc.y), 1)
    np.testing.assert_array_equal(tabs[("age", "education", "target")].counts, brute)
