from itertools import combinations

import numpy as np
import pytest

from marg.marginals.data.codebook import Codebook
from marg.errors import InputError
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import MarginalTable, parse_pairs, plan_cliques
from tests.conftest import random_codebook, random_rows
from tests.helpers.files import folder_bytes


def brute_count(cb: Codebook, X, y, clique):
    shape = tuple(cb.attribute_size(a) for a in clique)
    out = np.zeros(shape, dtype=np.int64)
    for r in range(len(y)):
        idx = tuple(int(y[r]) if a == cb.label.name else int(X[r, cb.index(a)]) for a in clique)
        out[idx] += 1
    return out


@pytest.mark.parametrize("seed", range(5))
def test_tables_equal_brute_force_all_orders(seed):
    rng = np.random.default_rng(seed)
    cb = random_codebook(rng, n_features=4, max_levels=4, n_classes=int(rng.integers(2, 4)))
    X, y = random_rows(rng, cb, 300)
    attrs = cb.feature_names + [cb.label.name]
    cliques = [c for k in (1, 2, 3, 4) for c in combinations(attrs, k)]
    tables = count_tables(cb, X, y, cliques)
    assert len(tables) == len(cliques)
    for t in tables:
        np.testing.assert_array_equal(t.counts, brute_count(cb, X, y, t.clique))
        assert t.total == 300


def test_moments_of_raw_numeric(rng):
    cb = random_codebook(rng, n_features=2, numeric=1)
    X, y = random_rows(rng, cb, 200)
    (t,) = count_tables(cb, X, y, [("num0", "y")])
    assert t.kind == "moments"
    for k in range(cb.n_classes):
        v = X[y == k, cb.index("num0")]
        assert t.counts[0, k] == pytest.approx(v.sum())
        assert t.counts[1, k] == pytest.approx((v**2).sum())


def test_plans(rng):
    cb = random_codebook(rng, n_features=4)
    first = plan_cliques(cb, "first")
    assert first[0] == ("y",) and len(first) == 5
    assert len(plan_cliques(cb, "all")) == 5 + 6
    pairs = parse_pairs(cb, "f2:f0, f1:f3")
    assert pairs == [("f0", "f2"), ("f1", "f3")]
    assert plan_cliques(cb, "pairs", pairs)[-2:] == [("f0", "f2", "y"), ("f1", "f3", "y")]
    with pytest.raises(InputError, match="unknown feature 'zz'"):
        parse_pairs(cb, "f0:zz")
    with pytest.raises(InputError, match="bad pair 'f0'"):
        parse_pairs(cb, "f0")
    with pytest.raises(InputError, match="unknown --stats"):
        plan_cliques(cb, "triples")


def test_table_validation():
    with pytest.raises(InputError, match="NaN"):
        MarginalTable(("a",), np.array([1.0, np.nan]))
    with pytest.raises(InputError, match="2-attribute clique"):
        MarginalTable(("a", "b"), np.zeros(3))
    t = MarginalTable(("a", "b", "y"), np.arange(24).reshape(2, 3, 4))
    np.testing.assert_array_equal(t.marginal(("y", "a")), np.arange(24).reshape(2, 3, 4).sum(axis=1).T)


def test_codes_out_of_range(rng):
    cb = random_codebook(rng, n_features=2)
    X, y = random_rows(rng, cb, 10)
    X[3, 1] = 7
    with pytest.raises(InputError, match="feature 'f1': code 7 at row 4"):
        count_tables(cb, X, y, plan_cliques(cb))


@pytest.mark.parametrize("stats", ["first", "all"])
def test_counting_from_dictionaries_equals_brute_force(stats):
    """Dictionary columns (any value order, an unused value the codebook refuses, nulls into a
    missing level, integer codes) count exactly what brute force counts from the codes."""
    import pyarrow as pa

    from marg.marginals.data.codebook import CategoricalFeature, Label
    from marg.marginals.data.encoding import encode_batch
    from marg.marginals.counts.counting import TableCounter

    rng = np.random.default_rng(7)
    cb = Codebook(features=(CategoricalFeature("color", ("red", "green", "blue")),
                            CategoricalFeature("smoke", ("no", "yes", "unknown"), missing="unknown"),
                            CategoricalFeature("code", tuple(str(k) for k in range(5)))),
                  label=Label("y", ("neg", "pos")))
    n = 6000
    color = pa.DictionaryArray.from_arrays(pa.array(rng.integers(1, 4, n).astype(np.int32)),
                                           pa.array(["purple", "blue", " red", "green"]))
    smoke_idx = rng.integers(0, 2, n).astype(np.int32)
    smoke = pa.DictionaryArray.from_arrays(pa.array(smoke_idx, mask=rng.random(n) < 0.2), pa.array(["yes", "no"]))
    batch = {"color": color, "smoke": smoke, "code": pa.array(rng.integers(1, 5, n)),
             "y": pa.array(rng.choice(["neg", "pos"], n))}
    enc = encode_batch(cb, batch, 1)
    tc = TableCounter(cb, plan_cliques(cb, stats))
    tc.add_encoded(enc)
    X = np.column_stack([
        np.array([["red", "green", "blue"].index(v.strip()) for v in color.dictionary_decode().to_pylist()]),
        np.array([{"no": 0, "yes": 1, None: 2}[v] for v in smoke.dictionary_decode().to_pylist()]),
        np.asarray(batch["code"]),
    ])
    y = (np.asarray(batch["y"]) == "pos").astype(int)
    for t in tc.tables():
        np.testing.assert_array_equal(t.counts, brute_count(cb, X, y, t.clique))


def test_first_order_joint_counts_over_chunks_whose_dictionaries_change():
    """First-order tables counted several features to one bincount and accumulated over chunks
    (:class:`~marg.marginals.counts.counting._Joint`) equal the per-row count when chunks share a
    dictionary, change its order, change an integer column's range, and when a feature has
    too many values to share a joint index (its own group, a wider index type)."""
    import pyarrow as pa

    from marg.marginals.data.codebook import CategoricalFeature, Label
    from marg.marginals.data.encoding import encode_batch
    from marg.marginals.counts.counting import JOINT_CELLS, TableCounter

    rng = np.random.default_rng(11)
    wide = tuple(f"w{k}" for k in range(JOINT_CELLS // 2 + 5))  # alone: (levels + 1) · K > JOINT_CELLS
    cb = Codebook(features=(CategoricalFeature("color", ("red", "green", "blue")),
                            CategoricalFeature("code", tuple(str(k) for k in range(7))),
                            CategoricalFeature("wide", wide),
                            *(CategoricalFeature(f"g{k}", tuple("abcdefghij")) for k in range(6))),
                  label=Label("y", ("neg", "pos", "unk")))
    dictionaries = [["red", "green", "blue"], ["red", "green", "blue"], ["blue", "red", "green"]]
    tc, memo, Xs, ys = TableCounter(cb, plan_cliques(cb, "first")), {}, [], []
    row = 1
    for k, (n, lo, hi) in enumerate([(5000, 0, 7), (4500, 0, 7), (5200, 2, 5)]):
        ci = rng.integers(0, 3, n).astype(np.int32)
        color = pa.DictionaryArray.from_arrays(pa.array(ci), pa.array(dictionaries[k]))
        code = rng.integers(lo, hi, n)
        w = rng.integers(0, len(wide), n)
        g = [rng.integers(0, 10, n) for _ in range(6)]
        yv = rng.integers(0, 3, n)
        batch = {"color": color, "code": pa.array(code), "wide": pa.array([wide[i] for i in w]),
                 **{f"g{j}": pa.array(["abcdefghij"[i] for i in g[j]]) for j in range(6)},
                 "y": pa.array([("neg", "pos", "unk")[i] for i in yv])}
        enc = encode_batch(cb, batch, row, memo=memo)
        row += n
        tc.add_encoded(enc)
        Xs.append(np.column_stack([[("red", "green", "blue").index(dictionaries[k][i]) for i in ci], code, w, *g]))
        ys.append(yv)
    X, y = np.vstack(Xs), np.concatenate(ys)
    assert tc.n_rows == len(y) == 14700
    for t in tc.tables():
        np.testing.assert_array_equal(t.counts, brute_count(cb, X, y, t.clique))


def test_an_oversized_plan_is_refused_before_counting(tmp_path):
    """Two 100,000-level features with every pair: 2·10¹⁰ counts (149 GiB) — refused in one line,
    nothing written, before the data file is even opened."""
    from marg.errors import InputError
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
    from marg.protocols.export import export_site

    levels = tuple(f"v{k}" for k in range(100_000))
    cb = Codebook(features=(CategoricalFeature("a", levels), CategoricalFeature("b", levels)),
                  label=Label("y", ("0", "1")))
    out = tmp_path / "x.bundle"
    with pytest.raises(InputError, match=r"^the release plan holds 20,000,400,002 counts \(149\.0 GiB\), over the "
                                         r"limit") as exc:
        export_site(tmp_path / "missing.csv", cb, "s", out, stats="all", ledger_dir=tmp_path / "ledger",
                    max_levels=100_000)
    assert "N[a,b,y] 20,000,000,000 cells" in str(exc.value) and "\n" not in str(exc.value)
    assert not out.exists() and not (tmp_path / "ledger").exists()


def _oversized_study(d):
    """Codebook (two 100,000-level features, a binary label) and a three-row CSV in ``d``."""
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

    levels = tuple(f"v{k}" for k in range(100_000))
    cb = Codebook(features=(CategoricalFeature("a", levels), CategoricalFeature("b", levels)),
                  label=Label("y", ("0", "1")))
    cb.save(d / "codebook.json")
    (d / "data.csv").write_text("a,b,y\nv1,v2,0\nv99999,v0,1\nv5,v5,0\n")
    return d / "codebook.json", d / "data.csv"


def _planned_size_refusal(stderr):
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert "the release plan holds 20,000,400,002 counts (149.0 GiB), over the limit" in stderr, stderr
    assert "over the limit of 268,435,456 (N[a,b,y] 20,000,000,000 cells, N[b,y] 200,000 cells)" in stderr, stderr


def test_an_oversized_plan_is_refused_through_the_cli(tmp_path):
    """marg export --stats all at a configured site: one line naming the tables and the planned
    size, exit != 0, no bundle, the site's ledger and configuration byte-identical."""
    from functools import partial

    from tests.helpers.console import run as marg_run

    schema, data = _oversized_study(tmp_path)
    home = tmp_path / "home"
    run = partial(marg_run, home=home)

    assert run("keys", "init", "--site", "s", "--dir", tmp_path / "keys").exit_code == 0
    r = run("audit", "init", "--site", "s", "--key", tmp_path / "keys" / "s.sign.key", "--epsilon", "10")
    assert r.exit_code == 0, r.output
    before = folder_bytes(home)
    assert "site.json" in before and "ledger/ledger.jsonl" in before
    for extra in ([], ["--epsilon", "1", "--rounds", "1"]):
        r = run("export", data, "--schema", schema, "--site", "s", "--out", tmp_path / "x.bundle", "--stats", "all",
                "--max-levels", "100000", *extra)
        assert r.exit_code != 0, r.output
        _planned_size_refusal(r.stderr)
        assert not (tmp_path / "x.bundle").exists()
        assert folder_bytes(home) == before
    assert not (tmp_path / "marg-ledger").exists()


def test_an_oversized_plan_is_refused_before_allocating(tmp_path):
    """The installed marg under a 2 GiB address-space limit: still the one-line planned-size
    refusal (no MemoryError, no traceback), nothing written; the same limit does stop numpy
    from allocating the plan's counts, so the refusal came before any allocation."""
    import os
    import resource
    import subprocess
    import sys
    from pathlib import Path

    schema, data = _oversized_study(tmp_path)
    limit = 2 << 30
    env = {**os.environ, "MARG_HOME": str(tmp_path / "home"), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    marg = Path(sys.executable).parent / "marg"
    assert marg.exists(), marg
    p = subprocess.run([str(marg), "export", str(data), "--schema", str(schema), "--site", "s", "--out",
                        str(tmp_path / "x.bundle"), "--stats", "all", "--max-levels", "100000", "--ledger",
                        str(tmp_path / "ledger")],
                       cwd=tmp_path, env=env, preexec_fn=limited, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "MemoryError" not in p.stderr and "Traceback" not in p.stderr
    _planned_size_refusal(p.stderr)
    assert not (tmp_path / "x.bundle").exists() and not (tmp_path / "ledger").exists()
    assert not (tmp_path / "marg-ledger").exists() and not (tmp_path / "home").exists()
    # the control: under that limit the plan's counts cannot be allocated
    c = subprocess.run([sys.executable, "-c", "import numpy; numpy.zeros(20_000_400_002, dtype=numpy.int64)"],
                       env=env, preexec_fn=limited, capture_output=True, text=True, timeout=120)
    assert c.returncode != 0 and "MemoryError" in c.stderr, c.stderr
