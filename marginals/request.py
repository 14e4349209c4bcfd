"""The two-round protocol for many features: screen on first-order tables, then ask for pairs.

Round 1: every site releases first-order tables only (``marg export --stats first``, with a
part of the privacy budget). The learner aggregates them and ranks the discrete features
by the screening score — the lower confidence bound of their L1 dependence on the label
under the recorded noise (:mod:`marg.learners.selection.screening`, the one ranking the screened
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

Version 3 (:class:`StudyRequest`, the select-then-measure path of :mod:`marg.marginals.study`):
``"tables"`` (cliques of 1–5 features, first-order tables included), ``"weights"`` (each
table's share of round 2), ``"budget"`` (``{site: {"rho": ρ}}``, what each site spends in
round 2), ``"why"`` (the learner's reasons), signed by the learner
(:mod:`marg.protocols.study`); a site answers it with ``marg export --request``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Sequence


from marg._util import atomic_write_bytes
from marg.errors import InputError

from .counts.tables import MAX_CLIQUE

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
                  features: Sequence[str] | None = None,
                  sign: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> Path:
    """Write a request file (atomically) and return its path.

    ``features`` defaults to the features named in ``pairs`` in order of appearance. ``sign``
    (the learner's signature, :func:`marg.protocols.pair_request.signer`) adds ``key_id`` and
    ``signature`` to the document; sites refuse an unsigned request unless told otherwise.
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
    doc = req.to_dict() if sign is None else sign(req.to_dict())
    atomic_write_bytes(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))
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
    fp = _fingerprint(d, path, fingerprint)
    pairs = d.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise InputError(f"request file {path} names no pair")
    out = []
    version = d.get("version", 1)
    if version == STUDY_VERSION:
        raise InputError(f"request file {path} is a select-then-measure request (version 3): answer it with "
                         "marg export DATA --request REQUEST, not --pairs")
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


def _fingerprint(d: dict[str, Any], path: Any, fingerprint: str | None) -> str:
    fp = d.get("fingerprint")
    if not isinstance(fp, str) or not fp:
        raise InputError(f"request file {path} has no fingerprint")
    if fingerprint is not None and fp != fingerprint:
        raise InputError(f"request file {path} is for study {fp[:12]}…, not this codebook {fingerprint[:12]}…")
    return fp


STUDY_VERSION = 3


@dataclass(frozen=True)
class StudyRequest:
    """The learner's round-2 request of the select-then-measure path (version 3).

    Attributes
    ----------
    fingerprint : str
        Codebook fingerprint of the study.
    tables : tuple of tuple of str
        Feature cliques (1 to MAX_CLIQUE features), each released with the label; may be empty
        (the learner asks for nothing: round 2 then spends nothing).
    weights : tuple of float
        Each table's share of the site's round-2 ρ (sum 1 when ``tables`` is not empty).
    budget : dict site -> float
        The ρ each site is asked to spend in round 2 (the rest of its study total, as its
        round-1 bundle recorded it).
    why : dict
        The learner's reasons (pooled selection, the allocation rule), for the site to read.
    """

    fingerprint: str
    tables: tuple[tuple[str, ...], ...]
    weights: tuple[float, ...]
    budget: dict[str, float]
    why: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"format": REQUEST_FORMAT, "version": STUDY_VERSION, "fingerprint": self.fingerprint,
                "tables": [list(c) for c in self.tables], "weights": list(self.weights),
                "budget": {s: {"rho": r} for s, r in sorted(self.budget.items())}, "why": self.why}

    @classmethod
    def from_dict(cls, d: Any, path: Any, fingerprint: str | None = None) -> "StudyRequest":
        """Parse (one-line InputError naming ``path`` and the bad field); with ``fingerprint``, refuse another
        study's."""
        if not isinstance(d, dict) or d.get("format") != REQUEST_FORMAT or d.get("version") != STUDY_VERSION:
            raise InputError(f"{path}: not a select-then-measure request (marg request writes one from round-1 "
                             "bundles)")
        fp = _fingerprint(d, path, fingerprint)
        tables, weights = d.get("tables"), d.get("weights")
        if not isinstance(tables, list) or not isinstance(weights, list) or len(tables) != len(weights):
            raise InputError(f"request file {path}: 'tables' and 'weights' must be lists of the same length")
        out = []
        for c in tables:
            if not (isinstance(c, list) and 1 <= len(c) <= MAX_CLIQUE and all(isinstance(a, str) and a for a in c)
                    and len(set(c)) == len(c)):
                raise InputError(f"request file {path}: bad table {c!r} (1 to {MAX_CLIQUE} distinct feature names)")
            out.append(tuple(c))
        if len(set(out)) != len(out):
            raise InputError(f"request file {path}: a table is asked twice")
        try:
            w = tuple(float(x) for x in weights)
        except (TypeError, ValueError):
            raise InputError(f"request file {path}: weights must be numbers") from None
        if any(not (x > 0.0) for x in w) or (w and abs(sum(w) - 1.0) > 1e-6):
            raise InputError(f"request file {path}: weights must be > 0 and sum to 1")
        budget = d.get("budget")
        if not isinstance(budget, dict):
            raise InputError(f"request file {path}: 'budget' must map each site to its round-2 rho")
        b: dict[str, float] = {}
        for s, v in budget.items():
            r = v.get("rho") if isinstance(v, dict) else None
            if not isinstance(r, (int, float)) or isinstance(r, bool) or not (r >= 0.0) or r != r or r == float("inf"):
                raise InputError(f"request file {path}: site {s!r} has no finite rho >= 0 in 'budget'")
            b[str(s)] = float(r)
        why = d.get("why") if isinstance(d.get("why"), dict) else {}
        return cls(fp, tuple(out), w, b, why)
