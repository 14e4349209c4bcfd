"""Min-cell rule: refusal names the table and cell; suppression zeroes the class columns holding
offending cells and records them; DP tables and empty cells pass."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.disclosure import DEFAULT_MIN_CELL, DEFAULT_POLICY, apply_min_cell
from marg.errors import InputError, RefusedError
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.privacy import privatize
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import MarginalTable, plan_cliques


def _t(clique, counts, **kw):
    return MarginalTable(clique=clique, counts=np.asarray(counts), **kw)


def test_defaults_are_datashield_threshold_and_refusal():
    assert DEFAULT_MIN_CELL == 3 and DEFAULT_POLICY == "refuse"


def test_refuses_table_with_small_nonzero_cell_naming_the_table_not_the_cell():
    ok = _t(("y",), [10, 12])
    bad = _t(("a", "y"), [[5, 7], [0, 2], [5, 3]])
    out, sup = apply_min_cell([ok, _t(("a", "y"), [[5, 7], [0, 3], [5, 2 + 1]])])
    assert sup == [] and len(out) == 2
    with pytest.raises(RefusedError) as ei:
        apply_min_cell([ok, bad])
    msg = str(ei.value)
    assert "\n" not in msg and "N[a,y]" in msg and "below 3" in msg and "1 nonzero cell" in msg
    assert "a=1" not in msg and "y=1" not in msg and " 2 " not in msg  # issue 35: no cell, no count
    # empty cells (0) are allowed; a threshold of 1 disables the rule
    apply_min_cell([_t(("a", "y"), [[0, 0], [4, 3]])])
    out, sup = apply_min_cell([bad], k=1)
    assert sup == [] and np.array_equal(out[0].counts, bad.counts)
    # higher threshold catches more
    with pytest.raises(RefusedError, match="below 6"):
        apply_min_cell([ok, _t(("a", "y"), [[5, 7], [0, 3], [6, 6]])], k=6)


def test_bad_arguments():
    with pytest.raises(InputError):
        apply_min_cell([_t(("y",), [4, 4])], policy="hide")
    with pytest.raises(InputError):
        apply_min_cell([_t(("y",), [4, 4])], k=0)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 7))
def test_suppression_zeroes_the_tail_of_class_columns_holding_an_offending_cell(seed, k):
    from marg.marginals.suppression import hidden_tail

    rng = np.random.default_rng(seed)
    m, K = int(rng.integers(1, 8)), int(rng.integers(2, 4))
    counts = rng.integers(0, 9, size=(m, K))
    counts[:, counts.sum(0) == 0] = k  # no empty class
    lab, t = _t(("y",), counts.sum(0)), _t(("a", "y"), counts)
    try:
        out, sup = apply_min_cell([lab, t], k=k, policy="suppress", label="y")
    except RefusedError as exc:  # a small class, or a column too small to hide a cell among k values
        assert "patients" in str(exc)
        return
    new = out[1].counts
    bad_cols = np.any((counts > 0) & (counts < k), axis=0)
    # no nonzero cell below k remains; an offending column keeps a head and zeroes a tail of >= 3 levels (the whole
    # column when it has fewer, or a class of at most k patients); every other cell is untouched
    assert not np.any((new > 0) & (new < k))
    assert np.array_equal(new[:, ~bad_cols], counts[:, ~bad_cols])
    want = set()
    for v in np.flatnonzero(bad_cols):
        start = hidden_tail(counts[:, v], k)
        assert m - start >= min(3, m) and (start == 0 or counts[:, v].sum() > k)
        assert np.array_equal(new[:start, v], counts[:start, v]) and np.all(new[start:, v] == 0)
        assert counts[start:, v].sum() >= k  # what the tail hides is at least k patients
        want |= {(a, int(v)) for a in range(start, m)}
    assert {s.cell for s in sup} == want
    assert all(s.table == t.name for s in sup) and np.array_equal(out[0].counts, lab.counts)
    if bad_cols.any():
        with pytest.raises(RefusedError):
            apply_min_cell([lab, t], k=k, policy="refuse")
    else:
        assert apply_min_cell([lab, t], k=k)[0][1] is t


def test_moment_tables_are_checked_through_class_counts():
    cb = Codebook(features=(NumericFeature("age", lo=0, hi=90), CategoricalFeature("s", ("m", "f"))),
                  label=Label("y", ("a", "b", "c")))
    X = np.array([[30.0, 0], [40.0, 1], [50.0, 0], [60.0, 1], [70.0, 0], [80.0, 1], [20.0, 0]])
    y = np.array([0, 0, 0, 1, 1, 1, 2])  # class 2 has a single patient
    tables = count_tables(cb, X, y, plan_cliques(cb, "first"))
    with pytest.raises(RefusedError):
        apply_min_cell(tables, label="y")
    # the moment table sums class 2's single value: checked via the class counts N[y]
    lab = [t for t in tables if t.clique == ("y",)]
    mom = [t for t in tables if t.kind == "moments"]
    with pytest.raises(RefusedError, match=r"moments:age,y sums over a class with fewer than 3 patients \(which class "
                                           r"is not"):
        apply_min_cell(mom + lab, label="y")
    apply_min_cell([_t(("y",), [3, 3, 4])] + mom, label="y")  # every class has >= 3 patients
    # a class of fewer than k patients cannot be suppressed away either: its total gives it back
    with pytest.raises(RefusedError, match=r"fewer than 3 patients \(which"):
        apply_min_cell(mom + lab, label="y", policy="suppress")
    # without any class counts in the release, a moment table cannot be checked
    with pytest.raises(RefusedError, match="cannot check"):
        apply_min_cell(mom, label="y")


def test_dp_tables_are_not_checked():
    t = _t(("a", "y"), [[1, 2], [7, 9]], noise=NoiseRecord(mechanism="laplace", scale=1.0, std=1.4, epsilon=1.0))
    out, sup = apply_min_cell([t])
    assert out[0] is t and sup == []
    cb = Codebook(features=(CategoricalFeature("a", ("0", "1")),), label=Label("y", ("n", "p")))
    exact = count_tables(cb, np.array([[0.0], [1.0], [1.0]]), np.array([0, 1, 1]), plan_cliques(cb, "first"))
    with pytest.raises(RefusedError):
        apply_min_cell(exact)
    noisy, _ = privatize(exact, epsilon=1.0, codebook=cb)
    out, sup = apply_min_cell(noisy)
    assert sup == [] and all(a is b for a, b in zip(out, noisy))


def test_exact_releases_do_not_reveal_one_patient_or_where_cells_were_suppressed(tmp_path):
    """Two exact exports of a dataset that changed by one patient would reveal that patient: the
    second is refused (nothing written); a suppressing export says how many cells, not where."""
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
    from marg.protocols.bundle import Bundle
    from tests.helpers.console import run

    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    cols = generate(400, SITES[0], seed=9)
    write_csv(tmp_path / "all.csv", cols, slice(0, 400))
    write_csv(tmp_path / "less.csv", cols, slice(0, 399))
    led = tmp_path / "ledger"
    r = run("export", tmp_path / "all.csv", "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle",
            "--stats", "first", "--min-cell", "5", "--min-cell-policy", "suppress", "--ledger", led)
    assert r.exit_code == 0, r.output
    header = Bundle.from_bytes((tmp_path / "a.bundle").read_bytes()).header
    sup = header.get("suppressed_cells")
    assert isinstance(sup, dict) and all(isinstance(v, int) and v > 0 for v in sup.values())
    r = run("export", tmp_path / "less.csv", "--schema", schema, "--site", "north", "--out", tmp_path / "b.bundle",
            "--stats", "first", "--min-cell", "1", "--ledger", led)
    assert r.exit_code == 1 and "would reveal the difference" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "b.bundle").exists() and len((led / "ledger.jsonl").read_text().splitlines()) == 1
    # the same data again (nothing to difference) and a DP release of the changed data pass
    assert run("export", tmp_path / "all.csv", "--schema", schema, "--site", "north", "--out", tmp_path / "c.bundle",
               "--stats", "first", "--min-cell", "5", "--min-cell-policy", "suppress", "--ledger", led).exit_code == 0
    assert run("export", tmp_path / "less.csv", "--schema", schema, "--site", "north", "--out", tmp_path / "d.bundle",
               "--stats", "first", "--epsilon", "1", "--rounds", "1", "--ledger", led).exit_code == 0
