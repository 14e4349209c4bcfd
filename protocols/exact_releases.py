"""What exact (noise-free) releases already disclosed: the guard against differencing attacks.

Two exact releases of overlapping statistics from a dataset that changed in between — one
patient added, removed or edited — disclose that patient: the difference of the two
``N[x_i, y]`` tables is the patient's feature level and label. Differential privacy makes
such repeated releases safe; exact releases are not.

The ledger therefore records, for every exact release, a digest of everything it showed
(:func:`release_digests`): the row count and the margin of every exact count table on every
non-empty subset of its attributes (so ``N[a, y]`` of one release and ``N[a, b, y]`` of another
are compared on their common ``{a, y}``), plus whole-table digests of tables with suppressed
cells (whose margins are not truthful) and of moment tables. A later exact release of the
same site is refused (:func:`check_exact_release`) when any key it shares with earlier exact
releases has another digest: the data changed, and the difference would disclose it. The same
numbers may be released again (that discloses nothing new).

**Invariant to the codebook's form.** Whoever writes the codebook (the learner, or a site's
operator) controls its form, so the digests do not depend on it: a statistic is named by its
attributes' **column names** (sorted), and its numbers are digested in **canonical form** —
each cell named by what its levels *mean* to the encoder (a categorical level by its trimmed
text, plus whether missing values fall in it; a bin by its interval; a class by its trimmed
text), empty cells dropped, cells sorted. Reordering features or levels, adding unused levels,
padding a level with whitespace, renaming the codebook or its study leave every digest as it
was, so ``export all.csv --schema cb.json`` then ``export minus_one.csv --schema
cb_reordered.json`` is refused. Changing what a level means (other bin edges, another missing
level) changes the digest of every statistic on that column: refused too, even on unchanged
data (two binnings of the same column can isolate the patients between their edges). What is
*not* covered: the same column released under another name (a copy of the column in the data
file is other data to marg), and exact releases recorded by marg before this form (their
digests are per codebook; they are compared, as then, only with releases under the same
codebook).

Suppression across releases: a release's complementary suppression
(:mod:`marg.marginals.suppression`) is audited against that release's own tables only. So an
exact release with suppressed cells must not overlap an earlier exact release of the site,
and no exact release may overlap an earlier one that had suppressed cells (their margins
could recompute the hidden cells) unless it repeats it exactly; such releases need DP.

Keys are ``"n"``, ``"m:<json list of attributes>"``, ``"t:<json list>"`` (suppressed
table) and ``"s:<json list>"`` (moments); digests are the first 32 hex characters of SHA-256
over the canonical JSON of the cells. ``"scope"`` names the rows released: ``"study"`` (the
site's rows, minus any held-out ones) or ``"evaluation"`` (held-out rows); releases of
different scopes are not compared. (Entries of older marg carry ``"codebook"``, the
fingerprint that scoped them, instead.)
"""

from __future__ import annotations

import hashlib
import json
import math
from json.encoder import encode_basestring
from itertools import combinations, product
from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import RefusedError

DIGEST_HEX = 32


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, separators=(",", ":"),
                                     ensure_ascii=False).encode("utf-8")).hexdigest()[:DIGEST_HEX]


def _key(prefix: str, names: Sequence[str]) -> str:
    return prefix + json.dumps(list(names), separators=(",", ":"), ensure_ascii=False)


def level_meanings(codebook: Any, name: str) -> list[str]:
    """What each code of attribute ``name`` means to the encoder, independent of the codebook's form.

    A class or categorical level: its text as the encoder matches it (trimmed), with
    ``" +missing"`` when missing values fall in it; a bin: its interval ``(lo, hi]`` (edges as
    ``repr`` floats) or ``missing``.
    """
    if name == codebook.label.name:
        return ["class " + c.strip() for c in codebook.label.classes]
    f = codebook.feature(name)
    if f.kind == "categorical":
        return ["level " + lv.strip() + (" +missing" if lv == f.missing else "") for lv in f.levels]
    edges = [-math.inf, *f.edges, math.inf]
    out = [f"bin ({edges[k]!r}, {edges[k + 1]!r}]" for k in range(len(edges) - 1)]
    return out + (["bin missing"] if f.missing else [])


def _canonical_counts(arr: np.ndarray, meanings: Sequence[Sequence[str]]) -> list:
    """The nonzero cells of ``arr`` as ``[[meaning, …], count]``, merged and sorted."""
    cells: dict[tuple[str, ...], int] = {}
    a = np.asarray(arr)
    at = np.nonzero(a)
    names = [[meanings[d][i] for i in ix.tolist()] for d, ix in enumerate(at)]
    for key, v in zip(zip(*names), a[at].tolist()):
        cells[key] = cells.get(key, 0) + int(v)
    return sorted([list(k), v] for k, v in cells.items() if v != 0)


def _cell_plan(meanings: tuple[tuple[str, ...], ...], plans: dict) -> Any:
    """How :func:`_margins_digests` writes a margin over attributes of these ``meanings``: False when
    some attribute has two levels of one meaning (their cells merge: the general path), else
    ``(shape, per axis the levels in their meanings' sorted order, per cell in that order the JSON
    text of ``[[meaning, …],`` )`` — the lexicographic order of the cells' meaning lists, which is
    the order :func:`_canonical_counts` sorts them in. Kept in ``plans`` per meanings."""
    plan = plans.get(meanings)
    if plan is None:
        plan = False
        if all(len(set(m)) == len(m) for m in meanings):
            orders = [sorted(range(len(m)), key=m.__getitem__) for m in meanings]
            texts = [[json.dumps(m[i], ensure_ascii=False) for i in o] for m, o in zip(meanings, orders)]
            plan = (tuple(len(m) for m in meanings), [np.asarray(o, dtype=np.intp) for o in orders],
                    ["[[" + ",".join(c) + "]," for c in product(*texts)])
        plans[meanings] = plan
    return plan


def _margins_digests(out: dict[str, Any], jobs: list[tuple[str, Any, tuple[str, ...], tuple]]) -> None:
    """Fill ``out[key] = _digest(_canonical_counts(t.marginal(sub), meanings))`` for every job
    ``(key, t, sub, meanings)``, the same 32 hex characters, batched: the integer tables of one shape
    whose margins are over the same axes and meanings are stacked, summed and permuted in a few numpy
    calls, and each margin's canonical JSON is its nonzero cells' texts (:func:`_cell_plan`) joined;
    a release of 20,000 first-order tables is 40,000 margins. Other margins take the general path."""
    plans: dict = {}
    groups: dict[tuple, list[tuple[str, np.ndarray]]] = {}
    for key, t, sub, means in jobs:
        a = np.asarray(t.counts)
        plan = _cell_plan(means, plans)
        axes = tuple(t.clique.index(n) for n in sub)
        if plan is False or a.dtype.kind not in "iu" or tuple(a.shape[k] for k in axes) != plan[0]:
            out[key] = _digest(_canonical_counts(t.marginal(sub), means))
            continue
        groups.setdefault((a.shape, a.dtype.str, axes, means), []).append((key, a))
    for (shape, _, axes, means), items in groups.items():
        _, orders, cells = plans[means]
        m = np.stack([a for _, a in items])
        drop = tuple(k + 1 for k in range(len(shape)) if k not in axes)
        # as MarginalTable.marginal: the dropped axes summed, then the kept ones in sub's order
        m = m.sum(axis=drop) if drop else m
        kept = sorted(axes)
        m = np.transpose(m, [0] + [kept.index(k) + 1 for k in axes])
        for d, o in enumerate(orders):
            m = m.take(o, axis=d + 1)
        for (key, _), row in zip(items, m.reshape(len(items), -1).tolist()):
            text = ",".join([c + str(v) + "]" for c, v in zip(cells, row) if v != 0])
            out[key] = hashlib.sha256(("[" + text + "]").encode("utf-8")).hexdigest()[:DIGEST_HEX]


def release_digests(tables: Sequence[Any], n_rows: int | None, suppressed_tables: Sequence[str] = (),
                    codebook: Any = None, scope: str = "study") -> dict[str, str] | None:
    """The digests of what an exact release disclosed; None if it holds no exact table.

    Parameters
    ----------
    tables : sequence of MarginalTable
        The released tables (after suppression).
    n_rows : int or None
        The row count the bundle states.
    suppressed_tables : names of tables with suppressed cells
    codebook : Codebook
        The release's codebook: what each level means (:func:`level_meanings`).
    scope : {"study", "evaluation"}
        Which rows were released (see the module docstring).

    Returns
    -------
    dict key -> digest, or None
        Keys as in the module docstring, on attributes in sorted order, so the same margin of
        two tables — or of two codebooks that order or name levels differently — has one key.
    """
    exact = [t for t in tables if t.noise.is_exact]
    if not exact:
        return None
    out: dict[str, str] = {"scope": str(scope)}
    if n_rows is not None:
        out["n"] = str(int(n_rows))
    hidden = set(suppressed_tables)
    meaning: dict[str, tuple[str, ...]] = {}  # per attribute, once (the label's for every table)
    names_json: dict[str, str] = {}
    jobs: list[tuple[str, Any, tuple[str, ...], tuple]] = []  # the margins' digests, made together below
    for t in exact:
        names = sorted(t.clique)
        if t.kind == "moments":
            f, lab = codebook.feature(t.clique[0]), t.clique[1]
            sums = {c: [float(t.counts[0, k]), float(t.counts[1, k])]
                    for k, c in enumerate(level_meanings(codebook, lab))}
            out[_key("s:", names)] = _digest([[f.lo, f.hi], sorted([c, v] for c, v in sums.items() if v != [0.0, 0.0])])
            continue
        for a in t.clique:
            if a not in meaning:
                meaning[a] = tuple(level_meanings(codebook, a))
                # as _key writes it inside its list: json.dumps(a, ensure_ascii=False) of a name (a codebook's
                # names are strings) is this, without building an encoder per call (20,000 names a wide release)
                names_json[a] = encode_basestring(a)
        if hidden and t.name in hidden:
            out[_key("t:", names)] = _digest(_canonical_counts(t.marginal(names), [meaning[a] for a in names]))
            continue
        for r in range(1, len(names) + 1):
            for sub in combinations(names, r):
                key = "m:[" + ",".join([names_json[a] for a in sub]) + "]"  # _key("m:", sub)
                # exact tables of one release have one margin on common attributes (N[y] once, not per table)
                if key not in out:
                    out[key] = None  # its place in the order; the digest comes from _margins_digests
                    jobs.append((key, t, sub, tuple(meaning[a] for a in sub)))
    _margins_digests(out, jobs)
    return out


def scope(digests: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``(scope, the digests without it)`` of a release's digests: ``"#study"`` or
    ``"#evaluation"``, or the codebook fingerprint of an older marg's entry."""
    if "codebook" in digests:
        return str(digests["codebook"]), {k: v for k, v in digests.items() if k != "codebook"}
    return "#" + str(digests.get("scope", "study")), {k: v for k, v in digests.items() if k != "scope"}


def _attributes(key: str) -> set[str]:
    return set() if key == "n" else set(json.loads(key[2:]))


def check_exact_release(
    earlier: Mapping[str, tuple[str, int]],
    suppressed_seq: int | None,
    new: Mapping[str, str],
    new_suppressed: bool,
) -> None:
    """Refuse an exact release that would let a differencing or a recomputation disclose patients.

    Parameters
    ----------
    earlier : mapping key -> (digest, seq)
        What the site's earlier exact releases disclosed, with the entry that first did.
    suppressed_seq : int or None
        The first earlier exact release with suppressed cells.
    new : mapping key -> digest
        :func:`release_digests` of the new release.
    new_suppressed : bool
        The new release has suppressed cells.

    Raises
    ------
    RefusedError
        One line naming the statistic, the earlier entry and the remedy (DP).
    """
    for key, digest in new.items():
        old = earlier.get(key)
        if old is not None and old[0] != digest:
            what = "the row count" if key == "n" else f"statistic {_words(key)}"
            raise RefusedError(
                f"exact release refused: {what} differs from the exact release of ledger entry #{old[1]} (the data "
                f"changed): releasing it exactly would reveal the difference, the changed patients; release it with "
                f"DP (--epsilon or --rho)"
            )
    if not earlier or all(k in earlier for k in new):
        return  # nothing new: the same numbers again disclose nothing
    new_attrs = set().union(*(_attributes(k) for k in new))
    old_attrs: dict[str, int] = {}
    for k, (_, seq) in earlier.items():
        for a in _attributes(k):
            old_attrs.setdefault(a, seq)
    shared = sorted(a for a in new_attrs if a in old_attrs)
    if shared and (new_suppressed or suppressed_seq is not None):
        seq = suppressed_seq if suppressed_seq is not None else old_attrs[shared[0]]
        raise RefusedError(
            f"exact release refused: it shares attribute {shared[0]!r} with the exact release of ledger entry #{seq}, "
            f"and suppressed cells (of either release) could be recomputed across the two; release it with DP "
            f"(--epsilon or --rho)"
        )


def _words(key: str) -> str:
    names = json.loads(key[2:])
    prefix = {"m:": "margin", "t:": "table", "s:": "moment table"}[key[:2]]
    return f"{prefix} [{', '.join(names)}]"
