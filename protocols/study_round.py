"""A study's round through secure aggregation: the learner's signed round file, the site's checks, and the release step.

A round of a study (:mod:`protocols.study_file`) is a round of :mod:`protocols.secagg_round`
whose file carries, under the learner's signature, a ``study`` block: the study id, the round's
name, the tables every site releases (cliques and least-squares weights), the ρ each site
spends, and for the evaluation round the models evaluated. The roster is the study's, never the
learner's word: every member's signing and sealing key is checked against the study file with
:func:`protocols.pinning.check_pinned_roster` before anything is sealed (:func:`site_round`).

:class:`StudyTables` is the release step of :func:`protocols.export.export_site` for a round (its
``study=`` hook): it names the cliques counted, states the cost checked against the site's cap and
the study's total before any row is read, protects the counts (each site's Gaussian noise at the
round's ρ, or its share of the study's one noise, :mod:`marginals.shared_noise`) and records the
round in the site's study state once the ledger entry is written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from marg._util import atomic_write_bytes, canonical_json, now_iso
from marg.errors import InputError, RefusedError
from marg.marginals.accounting import PrivacyCost, zcdp_cost
from marg.marginals.release_plan import ReleasePlan

from .pinning import check_pinned_roster
from .secagg_round import ROUND_FORMAT, SecureRound, parse_round
from .signing import b64, sign_document
from .keys import public_bytes
from .study_file import Study

MECHANISM = "gaussian"
SLACK = 1e-9


def round_doc(study: Study, name: str, members: Sequence[str], learner_key: Any,
              block: Mapping[str, Any]) -> dict[str, Any]:
    """The learner's signed round file for round ``name`` of ``study`` among ``members`` (a fresh id)."""
    import secrets

    if len(members) < study.threshold:
        raise RefusedError(f"round {name!r} of study {study.study_id}: {len(members)} sites left, below the threshold "
                           f"{study.threshold}: the study cannot continue")
    roster = [{"site": p.site, "sign_pub": b64(public_bytes(p.sign_pub)), "seal_pub": b64(public_bytes(p.seal_pub))}
              for p in sorted((study.site(s) for s in members), key=lambda p: p.site)]
    doc = {"format": ROUND_FORMAT, "version": 1, "id": secrets.token_hex(16), "fingerprint": study.fingerprint,
           "threshold": study.threshold, "members": roster, "learner": study.learner.site, "stats": "study",
           "pairs": None, "study": {"study_id": study.study_id, "round": name, **dict(block)}}
    return sign_document(doc, learner_key)


def parse_study_round(study: Study, doc: Mapping[str, Any], name: str,
                      where: str) -> tuple[SecureRound, dict[str, Any]]:
    """The round file verified against the study's learner key, codebook and round name: (round, study block)."""
    rnd = parse_round(doc, learner_pub=study.learner.sign_pub, fingerprint=study.fingerprint, name=where)
    block = doc.get("study") if isinstance(doc.get("study"), dict) else {}
    if block.get("study_id") != study.study_id or block.get("round") != name:
        raise RefusedError(f"{where} refused: not round {name!r} of study {study.study_id} (replayed from another "
                           "study or round)")
    if rnd.threshold != study.threshold:
        raise RefusedError(f"{where} refused: threshold {rnd.threshold}, the study file says {study.threshold}")
    return rnd, dict(block)


def site_round(study: Study, doc: Mapping[str, Any], name: str, site: str,
               where: str) -> tuple[SecureRound, dict[str, Any]]:
    """:func:`parse_study_round`, then the roster held to the study file's pinned keys (before anything is sealed)."""
    rnd, block = parse_study_round(study, doc, name, where)
    members = {m.site: (m.sign_pub, m.seal_pub) for m in rnd.members}
    check_pinned_roster(members, study.pinned(), site, study.threshold, where)
    if site not in members:
        raise RefusedError(f"{where}: site {site!r} is not in this round's roster (dropped from the study earlier)")
    return rnd, block


def cliques_of(block: Mapping[str, Any]) -> list[tuple[str, ...]]:
    try:
        return [tuple(str(a) for a in c) for c in block["cliques"]]
    except (KeyError, TypeError):
        raise InputError("round file: malformed table list") from None


# ---------------------------------------------------------------------------------------
# the site's study state ($MARG_HOME/studies/<id>/state-<site>.json)
# ---------------------------------------------------------------------------------------
def state_path(study_home: Path, site: str) -> Path:
    return Path(study_home) / f"state-{site}.json"


def load_state(study_home: Path, site: str) -> dict[str, Any]:
    p = state_path(study_home, site)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"format": "marg-study-state", "site": site, "rounds": {}}
    except (OSError, ValueError):
        raise InputError(f"{p}: the site's study state is unreadable") from None
    if not isinstance(d, dict) or d.get("format") != "marg-study-state" or d.get("site") != site:
        raise InputError(f"{p}: not this site's study state")
    return d


def save_state(study_home: Path, site: str, d: Mapping[str, Any]) -> None:
    p = state_path(study_home, site)
    p.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_bytes(p, canonical_json(dict(d)))


def spent_rho(state: Mapping[str, Any]) -> float:
    """ρ this site spent in the study so far (each answered round's)."""
    return float(sum(float(r.get("rho", 0.0)) for r in state.get("rounds", {}).values() if r.get("uploaded")))


# ---------------------------------------------------------------------------------------
# the release step (export_site's study= hook)
# ---------------------------------------------------------------------------------------
@dataclass
class StudyTables:
    """One round's release at a site: ``cliques`` at ``rho`` (weights: least squares, as the learner asked).

    ``share`` (optional) replaces the site's own full noise by its share of the study's one noise
    (:mod:`marginals.shared_noise`): a :class:`~marg.marginals.shared_noise.SharedNoisePlan` of the round's
    tables. The ledger is then charged the study's guarantee (the secure sum of any ≥ t shares,
    ``study_cost()``) and records the share's own beside it (``site_cost()``: every other party colluding).
    """

    study: Study
    name: str
    round_id: str
    cliques_: list[tuple[str, ...]]
    rho: float
    weights: list[float] | None
    study_home: Path
    site: str
    share: Any = None
    max_rows: int = 1
    # a shared-noise share's own guarantee (its share alone), ledgered beside the cost
    own_cost: PrivacyCost | None = None
    record: dict[str, Any] | None = None
    release_plan: ReleasePlan | None = None
    study_cost: PrivacyCost | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def cliques(self, codebook: Any) -> list[tuple[str, ...]]:
        return list(self.cliques_)

    @property
    def requested(self) -> PrivacyCost:
        return zcdp_cost(self.rho, self.study.delta)

    def check(self, ledger_dir: Path | None, codebook: Any, site: str) -> None:
        """Refuse now (nothing read or charged): no ledger, this round answered already, or above the study's total."""
        if ledger_dir is None:
            raise InputError("a study round is recorded in the site's ledger")
        state = load_state(self.study_home, site)
        done = state["rounds"].get(self.name, {})
        if done.get("uploaded"):
            raise RefusedError(f"site {site!r} already answered round {self.name!r} of study {self.study.study_id} "
                               f"(ledger entry #{done.get('seq')}); nothing was spent twice")
        from marg.marginals.counts.dp_conversions import rho_for_epsilon

        total = rho_for_epsilon(self.study.epsilon, self.study.delta)
        spent = spent_rho(state)
        if spent + self.rho > total * (1.0 + SLACK) + 1e-15:
            raise RefusedError(f"site {site!r}: round {self.name!r} asks rho = {self.rho:.6g}, above the rest of its "
                               f"study total ({total - spent:.6g} of {total:.6g}); nothing was spent")
        if self.share is None:
            self.release_plan = ReleasePlan.for_cliques(self.cliques_, codebook, rho=self.rho, weights=self.weights,
                                                        delta=self.study.delta, mechanism=MECHANISM,
                                                        max_rows=self.max_rows)

    def protect(self, tables: Sequence[Any], codebook: Any) -> tuple[list[Any], PrivacyCost, dict[str, Any],
                                                                     dict[str, Any]]:
        if self.share is not None:
            released = self.share.share(list(tables))
            cost, self.own_cost = self.share.study_cost(), self.share.site_cost()
            self.study_cost = cost
            noise = {"mechanism": self.share.mechanism, "threshold": self.share.threshold, "sites": self.share.n_sites,
                     "own_cost": self.own_cost.to_dict()}
        else:
            if self.release_plan is None:
                raise InputError("the round's release was not planned")
            released, cost = self.release_plan.release(list(tables), codebook), self.release_plan.cost
            self.study_cost, noise = cost, {"mechanism": MECHANISM, "per_site": True}
        privacy = {"mechanism": self.share.mechanism if self.share is not None else MECHANISM, **cost.to_dict(),
                   "allocation": f"study round {self.name}"}
        self.record = {"study_id": self.study.study_id, "round": self.name, "round_id": self.round_id,
                       "rho": self.rho, "site_cost": cost.to_dict(), "study_cost": self.study_cost.to_dict(),
                       "noise": noise, **self.extra}
        return released, cost, privacy, self.record

    def commit(self, ledger_dir: Path, fingerprint: str, bundle: Any, entry: dict[str, Any] | None,
               cost: PrivacyCost) -> None:
        state = load_state(self.study_home, self.site)
        state["rounds"][self.name] = {"uploaded": True, "round_id": self.round_id, "seq": (entry or {}).get("seq"),
                                      "bundle": bundle.digest(), "rho": self.rho, "site_cost": cost.to_dict(),
                                      "study_cost": (self.study_cost or cost).to_dict(), "time": now_iso(),
                                      "revealed": False}
        save_state(self.study_home, self.site, state)
