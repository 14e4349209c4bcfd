"""The site's side of select-then-measure: its two rounds, the learner's signed request, and what is left to spend.

:mod:`marg.marginals.study` holds the budget rule; this module holds what crosses the network
and what the site remembers:

- :class:`Round1` and :class:`Round2`, the two releases as steps of the one export pipeline
  (:func:`marg.protocols.export.prepare_release`, ``study=``): what the site counts, what the
  release costs (checked against the ledger's cap before any data is read), what it releases —
  each table through a :class:`marg.marginals.release_plan.ReleasePlan` built once (round 1's
  label table: :func:`marg.marginals.study.label_plan`; round 2's asked tables: in
  :meth:`Round2.check`, before any data is read), as the one-round export does;
- the **request** (:class:`marg.marginals.request.StudyRequest`), signed by the learner's
  Ed25519 key (:func:`write_request`) and verified by the site against its trust store, role
  learner (:func:`read_request`): an unsigned, altered or untrusted request is refused;
- the site's **study record** beside its ledger (``studies/<fingerprint>.json``, written
  atomically after the ledger entry): the total stated in round 1, what round 1 spent, and
  whether round 2 was answered. Round 2 spends at most ``ρ_total − ρ_round1`` and only once;
  a request asking more, naming a table outside the codebook, or answered already is refused
  in one line before anything is counted or charged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from marg._util import atomic_write_bytes, canonical_json, now_iso
from marg.errors import InputError, RefusedError
from marg.marginals.accounting import PrivacyCost, zcdp_cost
from marg.marginals.release_plan import ReleasePlan
from marg.marginals.request import StudyRequest
from marg.marginals.study import (STUDY_FORMAT, STUDY_MECHANISM, StudyPlan, release_round1, round1_cliques,
                                  round1_record, round2_record, with_gaussian_label)
from marg.marginals.counts.tables import canonical_clique

SLACK = 1e-9  # relative: a request of exactly the rest, rounded in JSON, is not "more than the rest"


# ------------------------------------------------------------------ the request
def write_request(path: str | Path, request: StudyRequest, sign_key: Any) -> str:
    """Write ``request`` signed by the learner's key (canonical JSON, atomically); return its digest."""
    from .signing import sign_document

    if sign_key is None:
        raise InputError("a round-2 request is signed by the learner: give --sign-key LEARNER.sign.key")
    data = canonical_json(sign_document(request.to_dict(), sign_key))
    atomic_write_bytes(Path(path), data)
    return hashlib.sha256(data).hexdigest()


def read_request(path: str | Path, fingerprint: str, trust: Any) -> tuple[StudyRequest, str, str]:
    """The request at ``path`` after its learner's signature checks out: (request, signer, sha256 of the file).

    Raises
    ------
    RefusedError
        No trust store given, unsigned, signed by a key not trusted as a learner, or altered.
    InputError
        Not a request, or for another codebook.
    """
    from .signing import document_signed_by, trusted_signer
    from .trust_store import TrustStore

    p = Path(path)
    try:
        raw = p.read_bytes()
        d = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"request file not found: {p}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{p}: not a request file (JSON expected)") from None
    req = StudyRequest.from_dict(d, p, fingerprint)
    if trust is None:
        raise RefusedError(f"{p.name} refused: give --trust with the learner's key (role learner) to check who asks")
    kid = d.get("key_id")
    if d.get("signature") is None or not isinstance(kid, str):
        raise RefusedError(f"{p.name} refused: unsigned request (the learner signs it: marg request --sign-key)")
    store = trust if isinstance(trust, TrustStore) else TrustStore(trust)
    signer, pub, _ = trusted_signer({"key_id": kid, "value": d.get("signature")}, store, p.name, role="learner")
    if not document_signed_by(d, pub):
        raise RefusedError(f"{p.name} refused: bad signature by {signer!r} (the request was altered)")
    return req, signer, hashlib.sha256(raw).hexdigest()


# ------------------------------------------------------------------ the site's study record
def study_path(ledger_dir: str | Path, fingerprint: str) -> Path:
    return Path(ledger_dir) / "studies" / f"{fingerprint[:32]}.json"


def load_study(ledger_dir: str | Path | None, fingerprint: str) -> dict[str, Any] | None:
    """The site's record of the study ``fingerprint`` (None: round 1 not run here)."""
    if ledger_dir is None:
        return None
    p = study_path(ledger_dir, fingerprint)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{p}: the site's study record is unreadable") from None
    if not isinstance(d, dict) or d.get("format") != STUDY_FORMAT:
        raise InputError(f"{p}: not a study record")
    return d


def _save_study(ledger_dir: Path, fingerprint: str, d: dict[str, Any]) -> None:
    p = study_path(ledger_dir, fingerprint)
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(p, canonical_json(d))


# ------------------------------------------------------------------ the two rounds as export steps
@dataclass
class Round1:
    """Round 1 under DP: the label table and the private selection (:mod:`marg.marginals.study`).

    ``requested`` is the site's whole study total: the cap is checked against it before round 1
    spends anything, so round 2 can never be refused for the cap after round 1 spent its share.
    """

    plan: StudyPlan
    max_rows: int = 1
    record: dict[str, Any] | None = None
    unit: dict[str, Any] | None = None  # the privacy unit declared (PrivacyUnit.to_dict): round 2 must declare it too

    @property
    def requested(self) -> PrivacyCost:
        return self.plan.total_cost

    def cliques(self, codebook: Any) -> list[tuple[str, ...]]:
        return round1_cliques(codebook)

    def check(self, ledger_dir: Path | None, codebook: Any, site: str) -> None:
        fingerprint = codebook.fingerprint
        if ledger_dir is None:
            raise InputError("the two-round DP export needs the site's ledger (it remembers the study's total for "
                             "round 2); --rounds 1 releases in one round")
        d = load_study(ledger_dir, fingerprint)
        if d is not None:
            raise RefusedError(f"this site already ran round 1 of study {fingerprint[:12]}… (ledger entry "
                               f"#{d.get('round1', {}).get('seq')}): answer the learner's request with --request REQ "
                               "(a second round 1 would spend the total again)")
        # the rule sees the bound the export applies (set before this check): re-derived here, before the cap is
        # checked against ``requested`` and before a ρ cap keeps the label table Gaussian, so neither is undone later
        self.plan = self.plan.at_max_rows(self.max_rows)
        if self.plan.label_mechanism == "laplace" and _rho_capped(ledger_dir):
            self.plan = with_gaussian_label(self.plan)  # a ρ cap counts Laplace's ε_L as ε_L²/2: keep it zCDP

    def protect(self, tables: Sequence[Any], codebook: Any) -> tuple[list[Any], PrivacyCost, dict[str, Any],
                                                                     dict[str, Any]]:
        released, sel, cost = release_round1(tables, codebook, self.plan, self.max_rows)
        privacy = {"mechanism": f"{self.plan.label_mechanism}+noisy-top-k", **cost.to_dict(),
                   "allocation": "select-then-measure round 1",
                   "target": {"epsilon": self.plan.epsilon, "delta": self.plan.delta}}
        self.record = round1_record(self.plan, sel, cost)
        return released, cost, privacy, self.record

    def commit(self, ledger_dir: Path, fingerprint: str, bundle: Any, entry: dict[str, Any] | None,
               cost: PrivacyCost) -> None:
        _save_study(ledger_dir, fingerprint, {
            "format": STUDY_FORMAT, "fingerprint": fingerprint, "site": bundle.site, "created": now_iso(),
            "total": {"epsilon": self.plan.epsilon, "delta": self.plan.delta, "rho": self.plan.rho_total},
            # what round 1 took from the study's ρ_total (with a Laplace label table, not its ε_L²/2)
            "round1": {"bundle": bundle.digest(), "seq": None if entry is None else entry.get("seq"),
                       "rho": float((self.record or {}).get("rho_study", cost.rho)), "unit": self.unit},
            "round2": None})


def _unit_said(u: dict[str, Any] | None) -> str:
    return "none declared" if u is None else f"{u.get('column')!r} (at most {u.get('max_rows_per_unit')} rows each)"


def _rho_capped(ledger_dir: Path) -> bool:
    """Whether the site's ledger caps ρ (then a pure-ε release counts ε²/2 against it)."""
    from .ledger import Ledger

    try:
        cap = Ledger(ledger_dir).cap()
    except (InputError, RefusedError, OSError):
        return False  # the export's own ledger check reports what is wrong with it
    return cap is not None and cap.rho > 0.0


@dataclass
class Round2:
    """Round 2: the tables a signed request asks for, at the ρ it asks of this site (at most the rest)."""

    request: StudyRequest
    request_digest: str
    signer: str | None
    rho: float = 0.0
    delta: float = 0.0
    max_rows: int = 1
    record: dict[str, Any] | None = None
    unit: dict[str, Any] | None = None  # must be round 1's (issue 45: a study's rounds share one unit)
    release_plan: ReleasePlan | None = None  # the asked tables planned once at ``rho`` (set by :meth:`check`)

    def check(self, ledger_dir: Path | None, codebook: Any, site: str) -> None:
        """Refuse now (one line, nothing read or charged): no round 1 here, answered already,
        a table outside the codebook, this site not asked, or more than the rest."""
        fingerprint = codebook.fingerprint
        d = load_study(ledger_dir, fingerprint)
        if d is None:
            raise RefusedError(f"refused: this site has no round 1 of study {fingerprint[:12]}… in its ledger folder "
                               f"{ledger_dir} (run marg export --epsilon TOTAL first)")
        if d.get("round2") is not None:
            raise RefusedError(f"refused: this site already answered round 2 of study {fingerprint[:12]}… "
                               f"(ledger entry #{d['round2'].get('seq')}); nothing is left to spend")
        if "unit" in d["round1"] and d["round1"]["unit"] != self.unit:
            raise RefusedError(f"refused: round 2 declares privacy unit {_unit_said(self.unit)}, round 1 of study "
                               f"{fingerprint[:12]}… declared {_unit_said(d['round1']['unit'])}: a study's rounds "
                               "count one unit")
        known = set(codebook.discrete_names)
        for c in self.request.tables:
            bad = [a for a in c if a not in known]
            if bad:
                raise RefusedError(f"refused: the request names {bad[0]!r}, which is not a discrete feature of the "
                                   "codebook")
        if site not in self.request.budget:
            raise RefusedError(f"refused: the request asks nothing of site {site!r} (it names "
                               f"{', '.join(sorted(self.request.budget)) or 'no site'})")
        total, spent = float(d["total"]["rho"]), float(d["round1"]["rho"])
        rest = max(0.0, total - spent)
        asked = self.request.budget[site]
        if asked > rest * (1.0 + SLACK) + 1e-15:
            raise RefusedError(f"refused: the request asks site {site!r} for rho = {asked:.6g}, more than the rest of "
                               f"its study total ({rest:.6g} = {total:.6g} - {spent:.6g} spent in round 1); nothing "
                               "was spent")
        self.rho, self.delta = min(asked, rest), float(d["total"]["delta"])
        # the release planned once, before any data is read: its noise and cost are what protect() releases;
        # each clique as counting names it (codebook order: a request may name a pair as (f3, f0))
        cliques, weights = self._asked(codebook)
        self.release_plan = ReleasePlan.for_cliques(cliques, codebook, rho=self.rho, weights=weights,
                                                    delta=self.delta, mechanism=STUDY_MECHANISM,
                                                    max_rows=self.max_rows) if cliques else None

    @property
    def requested(self) -> PrivacyCost:
        """What the request asks of this site (ρ at the study's δ), checked against the cap."""
        return zcdp_cost(self.rho, self.delta) if self.rho > 0 else PrivacyCost.zero()

    def cliques(self, codebook: Any) -> list[tuple[str, ...]]:
        return self._asked(codebook)[0]

    def _asked(self, codebook: Any) -> tuple[list[tuple[str, ...]], list[float]]:
        """The asked tables, each once in canonical order (a table asked twice in another order,
        ``(f3, f0)`` and ``(f0, f3)``, is released once: its weights add), and their weights."""
        y = codebook.label.name
        known = set(codebook.discrete_names)
        merged: dict[tuple[str, ...], float] = {}
        for c, w in zip(self.request.tables, self.request.weights):
            # a name outside the codebook is kept as asked: check() refuses it, in one line, before anything is spent
            k = canonical_clique(codebook, tuple(c) + (y,)) if set(c) <= known else tuple(c) + (y,)
            merged[k] = merged.get(k, 0.0) + float(w)
        return list(merged), list(merged.values())

    def protect(self, tables: Sequence[Any], codebook: Any) -> tuple[list[Any], PrivacyCost, dict[str, Any],
                                                                     dict[str, Any]]:
        if not tables:
            cost = PrivacyCost.zero()
            released: list[Any] = []
        else:
            if self.release_plan is None:
                raise InputError("round 2 releases the tables its check planned; none were planned")
            released, cost = self.release_plan.release(tables, codebook), self.release_plan.cost
        privacy = {"mechanism": STUDY_MECHANISM, **cost.to_dict(),
                   "allocation": "the learner's request (least squares)"}
        self.record = round2_record(self.rho, cost, self.request_digest, self.signer)
        return released, cost, privacy, self.record

    def commit(self, ledger_dir: Path, fingerprint: str, bundle: Any, entry: dict[str, Any] | None,
               cost: PrivacyCost) -> None:
        d = load_study(ledger_dir, fingerprint) or {}
        d["round2"] = {"bundle": bundle.digest(), "seq": None if entry is None else entry.get("seq"), "rho": cost.rho,
                       "request": self.request_digest}
        _save_study(ledger_dir, fingerprint, d)
