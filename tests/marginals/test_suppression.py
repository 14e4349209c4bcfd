"""Cell suppression against an attacker who knows the algorithm (issues 18 and 25): the
simulation attack (tests/helpers/simulation_attack.py) leaves every hidden small cell at least
k candidate values, or the policy refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marg.errors import RefusedError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.disclosure import apply_min_cell
from marg.marginals.suppression import candidate_values
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.simulation_attack import compositions, simulation_attack


def _release(rng, n_feat=None, classes=2, levels=(2, 5), n=(8, 36)):
    n_feat = n_feat or int(rng.integers(1, 4))
    cb = Codebook(features=tuple(CategoricalFeature(f"f{i}", tuple(str(v) for v in range(int(rng.integers(*levels)))))
                                 for i in range(n_feat)), label=Label("y", tuple("npq"[:classes])))
    n = int(rng.integers(*n))
    X = np.column_stack([rng.integers(0, f.n_levels, n) for f in cb.features]).astype(float)
    y = rng.integers(0, classes, n)
    return cb, count_tables(cb, X, y, plan_cliques(cb, "first"))


def _hidden(tables, sup):
    return [(next(i for i, t in enumerate(tables) if t.name == s.table), s.cell) for s in sup]


def _public(k, label="y"):
    """The public algorithm as the attacker runs it: tables → released tables, None if refused."""
    def run(tabs):
        try:
            return apply_min_cell(tabs, k=k, policy="suppress", label=label)[0]
        except RefusedError:
            return None
    return run


def _naive(k):
    """Classic deterministic complementary suppression: zero the small cells and, in each class
    column holding one, the smallest other nonzero cell — the kind of rule issue 25 broke."""
    from dataclasses import replace

    def run(tabs):
        out = []
        for t in tabs:
            c = np.array(t.counts, copy=True)
            if c.ndim == 2:
                for v in range(c.shape[1]):
                    col = c[:, v]
                    small = np.flatnonzero((col > 0) & (col < k))
                    if small.size:
                        others = [a for a in np.flatnonzero(col > 0) if a not in small]
                        col[small] = 0
                        if others:
                            col[min(others, key=lambda a: (col[a], a))] = 0
            out.append(replace(t, counts=c))
        return out
    return run


def test_the_attack_recovers_cells_that_a_deterministic_complementary_rule_hides():
    """The helper is a real attack: against the classic rule it narrows some small cell below k."""
    rng = np.random.default_rng(0)
    narrowed = 0
    for _ in range(40):
        cb, tables = _release(rng)
        k = 3
        released = _naive(k)(tables)
        hidden = [(i, tuple(int(v) for v in ix)) for i, (t, r) in enumerate(zip(tables, released))
                  for ix in np.argwhere(t.counts != r.counts)]
        small = [h for h in hidden if 0 < tables[h[0]].counts[h[1]] < k]
        if not small:
            continue
        cand, partial = simulation_attack(tables, released, hidden, _naive(k), "y")
        assert all(tables[h[0]].counts[h[1]] in cand[h] for h in hidden)  # the truth is always a candidate
        narrowed += any(h not in partial and len(cand[h]) < k for h in small)
    assert narrowed >= 5


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 4), st.integers(2, 3), st.booleans())
def test_every_hidden_small_cell_keeps_k_candidates_against_the_simulation_attack(seed, k, classes, long):
    """Features of 2–4 levels (whole columns) and of 4–7 levels at up to 80 rows (tails, issue 49)."""
    rng = np.random.default_rng(seed)
    cb, tables = _release(rng, classes=classes, **({"levels": (4, 8), "n": (20, 80)} if long else {}))
    try:
        out, sup = apply_min_cell(tables, k=k, policy="suppress", label="y", codebook=cb)
    except RefusedError as exc:
        assert "class" in str(exc) and ("patients" in str(exc))
        # refused only for a small class or a column that cannot hide a cell among k values
        tot = np.asarray(tables[0].counts)
        small_class = np.any((tot > 0) & (tot < k))
        too_small = any(candidate_values(t.counts.shape[0], int(t.counts[:, v].sum()), k) < k
                        for t in tables[1:] for v in range(t.counts.shape[1])
                        if np.any((t.counts[:, v] > 0) & (t.counts[:, v] < k)))
        assert small_class or too_small
        return
    for t in out:  # no small cell is left visible
        assert not np.any((t.counts > 0) & (t.counts < k))
    hidden = _hidden(tables, sup)
    small = [h for h in hidden if 0 < tables[h[0]].counts[h[1]] < k]
    assert {(i, tuple(int(v) for v in ix)) for i, t in enumerate(tables)
            for ix in np.argwhere((t.counts > 0) & (t.counts < k))} <= set(small)
    cand, _ = simulation_attack(tables, out, hidden, _public(k), "y")
    for h in small:
        assert tables[h[0]].counts[h[1]] in cand[h]
        assert len(cand[h]) >= k, (h, sorted(cand[h]))


@pytest.mark.parametrize("m,total,k", [(2, 3, 3), (2, 4, 3), (2, 7, 3), (3, 3, 3), (4, 5, 2), (2, 2, 2), (3, 9, 4)])
def test_candidate_count_is_the_brute_force_count(m, total, k):
    """candidate_values against the definition: values of one cell over the fillings of the column
    that hold a cell in [1, k−1]."""
    seen = {f[0] for f in compositions(total, m) if any(0 < v < k for v in f)}
    assert candidate_values(m, total, k) == len(seen)


def test_every_tail_cell_keeps_k_values_over_every_filling_of_its_column():
    """The tail chain (suppression.hidden_tail) against the definition, by brute force: group every filling of
    a column (m levels, class total S) by what the release shows — where the tail starts, the head's counts —
    and each hidden cell takes at least k values within every group (columns the policy refuses left out)."""
    from marg.marginals.suppression import hidden_tail

    tails = 0
    for k in (2, 3, 4):
        for m in (2, 3, 4, 5, 6):
            for S in range(k, 12):
                seen: dict[tuple, list[set[int]]] = {}
                for f in compositions(S, m):
                    st = hidden_tail(np.array(f), k)
                    if st == m or (st == 0 and candidate_values(m, S, k) < k):
                        continue
                    tails += 0 < st
                    vals = seen.setdefault((st, f[:st]), [set() for _ in range(m - st)])
                    for a in range(st, m):
                        vals[a - st].add(f[a])
                for (st, head), vals in seen.items():
                    assert all(len(v) >= k for v in vals), (k, m, S, st, head, vals)
    assert tails > 1000  # the chain does hide partial tails, not only whole columns


def test_pair_tables_and_small_classes_are_refused():
    cb = Codebook(features=tuple(CategoricalFeature(n, ("0", "1", "2")) for n in "ab"), label=Label("y", ("n", "p")))
    rng = np.random.default_rng(1)
    X = rng.integers(0, 3, (40, 2)).astype(float)
    X[0] = [2, 2]
    tables = count_tables(cb, X, rng.integers(0, 2, 40), plan_cliques(cb, "all"))
    if any(((t.counts > 0) & (t.counts < 3)).any() for t in tables):
        with pytest.raises(RefusedError, match="first-order releases only"):
            apply_min_cell(tables, k=3, policy="suppress", label="y")
    y = np.zeros(40, dtype=int)
    y[:2] = 1  # class p has 2 patients
    tables = count_tables(cb, X, y, plan_cliques(cb, "first"))
    with pytest.raises(RefusedError, match=r"a class has fewer than 3 patients \(which one is not said\)"):
        apply_min_cell(tables, k=3, policy="suppress", label="y", codebook=cb)


def test_the_issue_release_through_the_console_script(tmp_path):
    """Issue 25's release: 300 rows, --stats first --min-cell-policy suppress. The bundle hides class
    columns' tails; the attack on it (hidden positions known) leaves every hidden cell k candidates."""
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
    from marg.protocols.bundle import load_bundle
    from tests.helpers.console import marg

    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "d.csv", generate(300, SITES[0], seed=4))
    r = marg("export", "d.csv", "--schema", "cb.json", "--site", "north", "--out", "s.bundle", "--stats", "first",
             "--min-cell-policy", "suppress", "--no-ledger", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    b = load_bundle(tmp_path / "s.bundle")
    per_table = b.header["suppressed_cells"]
    assert per_table and "cell" not in json.dumps(per_table)
    released = b.tables
    lab = [t for t in released if t.clique == ("cv_event",)][0]
    tables = [lab] + [t for t in released if t is not lab]
    totals = np.asarray(lab.counts)
    # what the attacker sees: a class column short of its class total hides the cells after its last
    # released nonzero one (a released 0 just before the tail is counted in: more cells, more fillings)
    hidden = [(i, (a, v)) for i, t in enumerate(tables[1:], 1) for v in range(t.counts.shape[1])
              if t.counts[:, v].sum() != totals[v]
              for a in range(int(np.flatnonzero(np.r_[1, t.counts[:, v]])[-1]), t.counts.shape[0])]
    assert 0 < sum(per_table.values()) <= len(hidden)
    # the true tables, to run the attack against (the attacker's fillings include them)
    from marg.marginals.sources import open_source
    from marg.marginals.counts.tables import plan_cliques as plan

    with open_source(tmp_path / "d.csv") as src:
        true, _ = src.count(demo_codebook(), plan(demo_codebook(), "first"), None)
    true = [next(t for t in true if t.name == x.name) for x in tables]
    cand, _ = simulation_attack(true, tables, hidden, _public(3, "cv_event"), "cv_event", limit=2_000)
    small = [h for h in hidden if 0 < true[h[0]].counts[h[1]] < 3]
    assert small
    for h in small:
        assert len(cand[h]) >= 3 and true[h[0]].counts[h[1]] in cand[h]
