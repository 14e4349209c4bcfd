"""The two-round protocol for many features: screen on first-order tables, then ask for pairs.

Round 1: every site releases first-order tables only (``marg export --stats first``, with a
part of the privacy budget). The learner aggregates them and ranks the discrete features
by the screening score — the lower confidence bound of their L1 dependence on the label
under the recorded noise (:mod:`marg.learners.screening`, the one ranking the screened
learners use too; ``marg request --top K``) —, keeps the top K, and writes a **request
file** (:func:`write_request`) listing the K(K−1)/2 pairs.
Round 2: each site exports the pair tables ``N[x_i, x_j, y]`` of those pairs only
(``marg export --stats pairs --pairs @request.json``) with the rest of its budget. Pair
tables for p features cost O(p²) cells and budget shares; for K ≪ p this is what makes
pairwise learners (Rényi, DCC) feasible and their noise tolerable.

Request file (JSON, UTF-8)::

    {"format": "marg-request", "version": 1,
     "fingerprint": "<codebook fingerprint of the study>",
     "features": ["a", "b", "c"],               # the screened features, best first
     "pairs": [["a", "b"], ["a", "c"], ["b", "c"]]}

A site refuses a request whose fingerprint is not its codebook's.

Version 2 (written when a request names a table over more than two features): the same
keys, and an entry of ``"pairs"`` may list 3–5 features — the higher-order tables
``N[x_i, x_j, x_k, y]`` the ``boost`` learner asks for (``marg request --learner boost``,
:mod:`marg.learners.boost.request`). Version-1 files read unchanged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Sequence


from marg._util import atomic_write_bytes
from marg.errors import InputError

from .tables import MAX_CLIQUE

REQUEST_FORMAT = "marg-request"


@dataclass(frozen=True)
class PairRequest:
    """A learner's round-2 request.

    Attributes
    ----------
    fingerprint : str
        Codebook fingerprint of the study.
    features : tuple of str
        Screened features, best first.
    pairs : tuple of tuple of str
        Feature cliques, each released with the label: pairs, or 3–5 features (version 2).
    """

    fingerprint: str
    features: tuple[str, ...]
    pairs: tuple[tuple[str, ...], ...]

    @classmethod
    def all_pairs(cls, fingerprint: str, features: Sequence[str]) -> "PairRequest":
        """A request for every pair among ``features``."""
        feats = tuple(features)
        return cls(fingerprint, feats, tuple(combinations(feats, 2)))

    @property
    def spec(self) -> str:
        """The cliques as a ``--pairs`` string: ``"a:b,a:c,b:c"`` (``"a:b:c"`` for a triple)."""
        return ",".join(":".join(c) for c in self.pairs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": REQUEST_FORMAT,
            "version": 1 if all(len(c) == 2 for c in self.pairs) else 2,
            "fingerprint": self.fingerprint,
            "features": list(self.features),
            "pairs": [list(p) for p in self.pairs],
        }


def write_request(path: str | os.PathLike[str], fingerprint: str, pairs: Sequence[tuple[str, ...]],
                  features: Sequence[str] | None = None) -> Path:
    """Write a request file (atomically) and return its path.

    ``features`` defaults to the features named in ``pairs`` in order of appearance.
    """
    if not isinstance(fingerprint, str) or not fingerprint:
        raise InputError(f"request needs the study's codebook fingerprint, got {fingerprint!r}")
    prs = []
    for p in pairs:
        if not 2 <= len(p) <= MAX_CLIQUE or len(set(p)) != len(p) or not all(isinstance(a, str) and a for a in p):
            raise InputError(f"bad pair {p!r} in request (2 to {MAX_CLIQUE} distinct feature names)")
        prs.append(tuple(p))
    if not prs:
        raise InputError("request names no pair")
    if features is None:
        seen: list[str] = []
        for c in prs:
            for x in c:
                if x not in seen:
                    seen.append(x)
        features = seen
    req = PairRequest(fingerprint, tuple(features), tuple(prs))
    path = Path(path)
    atomic_write_bytes(path, (json.dumps(req.to_dict(), indent=2) + "\n").encode("utf-8"))
    return path


def read_request(path: str | os.PathLike[str], fingerprint: str | None = None) -> PairRequest:
    """Read a request file; with ``fingerprint``, refuse one made for another study.

    Raises
    ------
    InputError
        Missing/malformed file, or a fingerprint mismatch (named with both values).
    """
    path = Path(path)
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"request file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read request file {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"request file {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(d, dict) or d.get("format") != REQUEST_FORMAT:
        raise InputError(f"not a marg request file: {path}")
    fp = d.get("fingerprint")
    if not isinstance(fp, str) or not fp:
        raise InputError(f"request file {path} has no fingerprint")
    if fingerprint is not None and fp != fingerprint:
        raise InputError(f"request file {path} is for study {fp[:12]}…, not this codebook {fingerprint[:12]}…")
    pairs = d.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise InputError(f"request file {path} names no pair")
    out = []
    version = d.get("version", 1)
    if version not in (1, 2):
        raise InputError(f"request file {path}: unknown version {version!r} (this marg reads 1 and 2)")
    width = 2 if version == 1 else MAX_CLIQUE
    for p in pairs:
        if not (isinstance(p, list) and 2 <= len(p) <= width and all(isinstance(a, str) and a for a in p)
                and len(set(p)) == len(p)):
            raise InputError(f"request file {path}: bad pair {p!r}")
        out.append(tuple(p))
    feats = d.get("features", [])
    if not isinstance(feats, list) or not all(isinstance(a, str) for a in feats):
        raise InputError(f"request file {path}: 'features' must be a list of names")
    return PairRequest(fp, tuple(feats), tuple(out))
