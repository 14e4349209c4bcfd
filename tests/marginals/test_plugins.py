"""Where a new data source and a new DP mechanism plug in, each checked with a toy one that goes
through the real export path (:func:`marg.protocols.export.export_site`: plan, budget, count,
protect, bundle, ledger).

Oracles: the toy source counts its rows with ``collections.Counter`` (no marg counting code), and
its bundle must equal the one the built-in file source makes of the same rows; the toy mechanism
(continuous Laplace noise on counts, float domain) must report the cost OpenDP's own sequential
composition gives for the scales it recorded, and its noise records must say that the draws are
continuous, so the learner's tail bounds are those of the continuous Laplace.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections import Counter

import numpy as np
import opendp.prelude as dp
import pytest

from marg.errors import InputError
from marg.marginals.accounting import PrivacyCost
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.mechanisms import MECHANISMS, Mechanism, get_mechanism, register
from marg.marginals.noise_tails import halfwidth
from marg.marginals.sources.base import Source
from marg.marginals.counts.tables import MarginalTable, canonical_clique
from marg.protocols.aggregate import summary_from_bundles
from marg.protocols.bundle import load_bundle
from marg.protocols.export import export_site
from marg.protocols.ledger import Ledger

dp.enable_features("contrib")

CODEBOOK = Codebook(features=(CategoricalFeature("smoker", ("no", "yes")),
                              CategoricalFeature("age", ("young", "mid", "old"))),
                    label=Label("outcome", ("well", "ill")))


def _rows(seed: int) -> list[dict[str, str]]:
    """Every combination of levels, each 3 to 7 times (every cell >= 3: an exact release passes the min-cell rule)."""
    rng = np.random.default_rng(seed)
    names = [f.name for f in CODEBOOK.features] + [CODEBOOK.label.name]
    levels = [f.levels for f in CODEBOOK.features] + [CODEBOOK.label.classes]
    rows = [dict(zip(names, combo)) for combo in itertools.product(*levels) for _ in range(int(rng.integers(3, 8)))]
    rng.shuffle(rows)
    return rows


class ListSource(Source):
    """A toy source: rows held in a Python list of ``{column: text}``, counted here by
    ``collections.Counter`` over each clique's level codes (the codebook's level order)."""

    def __init__(self, rows: list[dict[str, str]]):
        self.rows, self.name = rows, "a list of rows"

    def describe(self) -> dict:
        return {"kind": "list", "location": "memory", "rows": len(self.rows)}

    def columns(self) -> list[str]:
        return list(self.rows[0]) if self.rows else []

    def count(self, codebook, cliques, progress=None):
        self.check_columns(codebook.feature_names + [codebook.label.name])
        levels = {f.name: f.levels for f in codebook.features} | {codebook.label.name: codebook.label.classes}
        tables = []
        for clique in cliques:
            clique = canonical_clique(codebook, clique)
            seen = Counter(tuple(levels[a].index(r[a]) for a in clique) for r in self.rows)
            counts = np.zeros(tuple(len(levels[a]) for a in clique), dtype=np.int64)
            for cell, k in seen.items():
                counts[cell] = k
            tables.append(MarginalTable(clique=clique, counts=counts))
        if progress is not None:
            progress(len(self.rows))
        return tables, len(self.rows)

    def draft_batches(self, columns):
        raise NotImplementedError("the toy source does not draft codebooks")


def _write_csv(rows: list[dict[str, str]], path):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_a_toy_source_exports_the_same_release_as_the_file_source_of_the_same_rows(tmp_path):
    rows = _rows(0)
    toy = export_site(ListSource(rows), CODEBOOK, "north", tmp_path / "toy.bundle", stats="all",
                      ledger_dir=tmp_path / "ledger")
    ref = export_site(_write_csv(rows, tmp_path / "rows.csv"), CODEBOOK, "north", tmp_path / "file.bundle", stats="all",
                      ledger_dir=None)
    assert toy.n_rows == ref.n_rows == len(rows) and toy.cost == ref.cost == PrivacyCost.unbounded()
    got, want = load_bundle(tmp_path / "toy.bundle"), load_bundle(tmp_path / "file.bundle")
    assert [t.name for t in got.tables] == [t.name for t in want.tables] == [t.name for t in toy.tables]
    for a, b in zip(got.tables, want.tables):
        assert np.array_equal(a.counts, b.counts), a.name
    # every table sums to the rows the toy holds; the pair table is the brute-force joint count
    assert all(int(t.counts.sum()) == len(rows) for t in got.tables)
    pair = next(t for t in got.tables if t.clique == ("smoker", "age", "outcome"))
    brute = Counter((r["smoker"], r["age"], r["outcome"]) for r in rows)
    assert int(pair.counts[1, 2, 0]) == brute[("yes", "old", "well")]
    # where the counts came from is the toy's own description, in the bundle and in the ledger
    assert got.header["source"] == ListSource(rows).describe()
    entry = Ledger(tmp_path / "ledger").entries()[-1]
    assert entry["source"] == ListSource(rows).describe() and entry["bundle"] == got.digest()
    assert summary_from_bundles([got]).n == len(rows)


@pytest.fixture
def toy_mechanism():
    """Continuous Laplace noise on every table (the float domain, even for integral counts)."""
    mech = register(Mechanism("laplace-float", "laplace",
                              lambda dp_, dom, metric, scale: dp_.m.make_laplace(dom, metric, scale=scale),
                              discrete=False))
    yield mech
    MECHANISMS.pop(mech.name)


def test_a_toy_mechanism_is_accounted_by_opendp_and_records_continuous_draws(tmp_path, toy_mechanism):
    rows = _rows(1)
    eps = 0.8
    res = export_site(_write_csv(rows, tmp_path / "rows.csv"), CODEBOOK, "north", tmp_path / "dp.bundle", stats="all",
                      epsilon=eps, mechanism="laplace-float", ledger_dir=tmp_path / "ledger")
    b = load_bundle(tmp_path / "dp.bundle")
    assert b.header["privacy"]["mechanism"] == "laplace-float"
    cost = PrivacyCost.from_dict(b.header["privacy"])
    assert cost.delta == 0.0 and cost.epsilon == pytest.approx(eps, rel=1e-12) and cost.epsilon <= eps
    # OpenDP's own sequential composition of the recorded measurements gives the same ε
    f64 = dp.vector_domain(dp.atom_domain(T="f64", nan=False))
    meas = [dp.m.make_laplace(f64, dp.l1_distance(T="f64"), scale=t.noise.scale) for t in b.tables]
    assert float(dp.c.make_composition(meas).map(1.0)) == pytest.approx(cost.epsilon, rel=1e-12)
    assert sum(t.noise.epsilon for t in b.tables) == pytest.approx(cost.epsilon, rel=1e-12)
    for t in b.tables:
        assert t.counts.dtype == np.float64  # continuous noise: no rounding to the integer lattice
        assert t.noise.mechanism == "laplace" and t.noise.std == pytest.approx(math.sqrt(2.0) * t.noise.scale,
                                                                               rel=1e-12)
        assert t.noise.draws(True) == (("laplace", t.noise.scale, False, 1),)  # continuous, whatever the table kind
    # the learner's tail bound of such a draw is the continuous Laplace quantile b·ln(1/α)
    b0 = b.tables[0].noise.scale
    assert halfwidth((("laplace", b0, False, 1),), 0.05) == pytest.approx(b0 * math.log(1 / 0.05), rel=1e-6)
    # the ledger charges what the bundle states
    entry = Ledger(tmp_path / "ledger").entries()[-1]
    assert PrivacyCost.from_dict(entry["cost"]) == cost == res.cost


def test_a_mechanism_takes_only_its_own_kind_of_budget(tmp_path, toy_mechanism):
    assert get_mechanism("laplace-float").pure
    with pytest.raises(InputError, match="--mechanism laplace-float needs --epsilon"):
        export_site(_write_csv(_rows(2), tmp_path / "rows.csv"), CODEBOOK, "north", tmp_path / "x.bundle",
                    rho=0.5, mechanism="laplace-float", ledger_dir=None)
    with pytest.raises(InputError, match="unknown --mechanism 'nope'"):
        export_site(tmp_path / "rows.csv", CODEBOOK, "north", tmp_path / "x.bundle", epsilon=1.0, mechanism="nope",
                    ledger_dir=None)
    with pytest.raises(InputError, match="already registered"):
        register(Mechanism("laplace", "laplace", toy_mechanism.build))
