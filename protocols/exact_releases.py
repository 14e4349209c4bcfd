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

Suppression across releases: a release's complementary suppression
(:mod:`marg.marginals.suppression`) is audited against that release's own tables only. So an
exact release with suppressed cells must not overlap an earlier exact release of the site,
and no exact release may overlap an earlier one that had suppressed cells (their margins
could recompute the hidden cells) unless it repeats it exactly; such releases need DP.

Keys are ``"n"``, ``"m:<json list of attributes>"``, ``"t:<json clique>"`` (suppressed
table) and ``"s:<json clique>"`` (moments); digests are the first 32 hex characters of
SHA-256 over shape and little-endian values. The codebook's fingerprint (key ``"codebook"``)
scopes them: releases under different codebooks (a study's tables, an evaluation's confusion
matrix) are different statistics even where attribute names coincide.
"""

from __future__ import annotations

import hashlib
import json
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import RefusedError

DIGEST_HEX = 32


def _digest(arr: np.ndarray, integer: bool) -> str:
    a = np.ascontiguousarray(arr, dtype="<i8" if integer else "<f8")
    h = hashlib.sha256(json.dumps(list(a.shape)).encode("ascii") + b"|" + a.tobytes())
    return h.hexdigest()[:DIGEST_HEX]


def _key(prefix: str, names: Sequence[str]) -> str:
    return prefix + json.dumps(list(names), separators=(",", ":"), ensure_ascii=False)


def release_digests(tables: Sequence[Any], n_rows: int | None, suppressed_tables: Sequence[str] = (),
                    codebook: str = "") -> dict[str, str] | None:
    """The digests of what an exact release disclosed; None if it holds no exact table.

    Parameters
    ----------
    tables : sequence of MarginalTable
        The released tables (after suppression).
    n_rows : int or None
        The row count the bundle states.
    suppressed_tables : names of tables with suppressed cells
    codebook : the codebook fingerprint of the release (scopes the keys)

    Returns
    -------
    dict key -> digest, or None
        Keys as in the module docstring. Margins are taken on attributes in sorted order, so
        the same margin of two different tables has one key.
    """
    exact = [t for t in tables if t.noise.is_exact]
    if not exact:
        return None
    out: dict[str, str] = {"codebook": str(codebook)}
    if n_rows is not None:
        out["n"] = str(int(n_rows))
    hidden = set(suppressed_tables)
    for t in exact:
        if t.kind == "moments":
            out[_key("s:", t.clique)] = _digest(t.counts, integer=False)
        elif t.name in hidden:
            out[_key("t:", t.clique)] = _digest(t.counts, integer=True)
        else:
            for r in range(1, len(t.clique) + 1):
                for sub in combinations(sorted(t.clique), r):
                    out[_key("m:", sub)] = _digest(t.marginal(sub), integer=True)
    return out


def scope(digests: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``(codebook fingerprint, the digests without it)`` of a release's digests."""
    return str(digests.get("codebook", "")), {k: v for k, v in digests.items() if k != "codebook"}


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
