"""The study file: one signed declaration of a study, read by every command of it (``marg study``).

A study is declared once, by the learner (``marg study init``), as canonical JSON (format
``"marg-study"``) signed with the learner's Ed25519 key (:func:`protocols.signing.sign_document`):

    study_id          32 hex digits, fresh
    codebook          the codebook (embedded) and its ``fingerprint``
    learner, sites    each party's name, Ed25519 signing key and X25519 sealing key (base64 raw)
    epsilon, delta    each site's total (ε, δ) for the whole study
    threshold         secure aggregation's t (more than half the sites)
    rounds            the rounds' names, e.g. ("select", "measure", "evaluate")
    holdout           the fraction of each site's patients held out for the evaluation round
    privacy_unit      {"column", "max_rows"} or None (the codebook's declaration)
    drop              the drop box: a folder, ``sftp://`` or ``s3://`` URL
    noise             "shared" (the noise shared under secure aggregation) or "per-site"
    plan              the budget split per round (ρ of each round) and the rule that chose it

:func:`read_study` verifies the signature against the learner key the file names, the codebook
against its fingerprint, and every key; a file altered after signing is refused. The learner's key
is then held to what the reader already trusts (:func:`pin_learner`): the first study file a site
reads for a study id is remembered in ``$MARG_HOME/studies/<id>/study.sha256``; another file for the
same id is refused, and a site with a trust store of learner keys (``$MARG_HOME/trust``) refuses a
learner not in it. A site's own key files must be its entry in the study (:func:`check_own_keys`).
:meth:`Study.pinned` gives the :class:`protocols.pinning.PinnedKeys` every secure-aggregation round
of the study is checked against before anything is sealed.
"""

from __future__ import annotations

import hashlib
import math
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from marg._util import atomic_write_bytes, canonical_json, now_iso, read_json_file
from marg.errors import InputError, RefusedError
from marg.marginals.data.codebook import Codebook

from .keys import SEAL_PUB_SUFFIX, SIGN_PUB_SUFFIX, key_id, load_seal_public_key, load_verify_key, public_bytes, \
    short_id, validate_site_name
from .pinning import Pinned, PinnedKeys
from .signing import b64, document_signed_by, sign_document, unb64

STUDY_FILE_FORMAT = "marg-study"
ROUNDS = ("select", "measure", "evaluate")
NOISES = ("shared", "per-site")
STUDIES_DIR = "studies"  # under $MARG_HOME: each study's local record (pin, state)
TRUST_DIR = "trust"  # under $MARG_HOME: the site's trust store of learner keys, when it keeps one


@dataclass(frozen=True)
class Study:
    """A verified study file (module docstring)."""

    study_id: str
    codebook: Codebook
    fingerprint: str
    learner: Pinned
    sites: tuple[Pinned, ...]
    epsilon: float
    delta: float
    threshold: int
    rounds: tuple[str, ...]
    holdout: float
    privacy_unit: dict[str, Any] | None
    drop: str
    noise: str
    plan: dict[str, Any]
    digest: str = ""  # sha256 of the file's bytes as read

    @property
    def names(self) -> list[str]:
        return [s.site for s in self.sites]

    def site(self, name: str) -> Pinned:
        """The roster entry of site ``name``; InputError naming the roster otherwise."""
        for s in self.sites:
            if s.site == name:
                return s
        raise InputError(f"site {name!r} is not in study {self.study_id}'s roster ({', '.join(self.names)})")

    def pinned(self) -> PinnedKeys:
        """Every roster member's signing and sealing key, as the study file pins them."""
        return PinnedKeys(self.sites, f"study file {self.study_id}")

    def round_rho(self, name: str) -> float:
        """ρ (zCDP) each site spends in round ``name`` (the plan's split of the study total)."""
        try:
            return float(self.plan["rho"][name])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"study {self.study_id}: the plan gives no budget for round {name!r}") from None


def _party(name: str, sign_pub: ed25519.Ed25519PublicKey, seal_pub: x25519.X25519PublicKey) -> dict[str, str]:
    return {"name": name, "sign_pub": b64(public_bytes(sign_pub)), "seal_pub": b64(public_bytes(seal_pub))}


def _parse_party(d: Any, where: str) -> Pinned:
    if not isinstance(d, dict):
        raise InputError(f"{where}: malformed party entry")
    name = validate_site_name(str(d.get("name")))
    sp, cp = unb64(d.get("sign_pub"), 32), unb64(d.get("seal_pub"), 32)
    if sp is None or cp is None:
        raise InputError(f"{where}: the keys of {name!r} are not 32-byte base64 keys")
    try:
        sign = ed25519.Ed25519PublicKey.from_public_bytes(sp)
        seal = x25519.X25519PublicKey.from_public_bytes(cp)
    except ValueError:
        raise InputError(f"{where}: the keys of {name!r} are malformed") from None
    if cp == bytes(32):
        raise InputError(f"{where}: the sealing key of {name!r} is the zero point")
    return Pinned(name, sign, seal)


def roster_from_dir(roster: str | os.PathLike[str], learner_pub: ed25519.Ed25519PublicKey) -> tuple[str, list[Pinned]]:
    """(learner's name, the sites) of a roster folder: ``NAME.sign.pub`` + ``NAME.seal.pub`` per party.

    The learner is the party whose signing key is ``learner_pub``; every other party with both
    files is a site. A party with one file of the two is refused (a sealing key missing or stray).
    """
    d = Path(roster)
    if not d.is_dir():
        raise InputError(f"--roster {str(d)!r} is not a directory")
    names = sorted({p.name[: -len(SIGN_PUB_SUFFIX)] for p in d.glob(f"*{SIGN_PUB_SUFFIX}")}
                   | {p.name[: -len(SEAL_PUB_SUFFIX)] for p in d.glob(f"*{SEAL_PUB_SUFFIX}")})
    learner, sites = None, []
    for n in names:
        sign_f, seal_f = d / f"{n}{SIGN_PUB_SUFFIX}", d / f"{n}{SEAL_PUB_SUFFIX}"
        if not sign_f.exists() or not seal_f.exists():
            raise InputError(f"roster {d}: {n!r} has "
                             f"{'no ' + sign_f.name if not sign_f.exists() else 'no ' + seal_f.name} (each party "
                             "needs its signing and its sealing public key)")
        p = Pinned(validate_site_name(n), load_verify_key(sign_f), load_seal_public_key(seal_f))
        if p.sign_id == key_id(learner_pub):
            learner = p
        else:
            sites.append(p)
    if learner is None:
        raise InputError(f"roster {d} holds no public key of the learner's --sign-key "
                         f"({short_id(key_id(learner_pub))}): add LEARNER.sign.pub and LEARNER.seal.pub")
    return learner.site, [learner] + sites


def make_study(codebook: Codebook, parties: list[Pinned], learner: str, sign_key: ed25519.Ed25519PrivateKey, *,
               epsilon: float, delta: float, drop: str, plan: Mapping[str, Any], holdout: float,
               threshold: int | None = None, noise: str | None = None,
               rounds: tuple[str, ...] = ROUNDS) -> dict[str, Any]:
    """The signed study document (module docstring); ``parties``: the learner's entry and the sites'."""
    sites = [p for p in parties if p.site != learner]
    lrn = [p for p in parties if p.site == learner]
    if len(lrn) != 1 or key_id(sign_key) != lrn[0].sign_id:
        raise InputError(f"the learner {learner!r} must be in the roster under the --sign-key's public key")
    if len(sites) < 2:
        raise InputError(f"the roster names {len(sites)} site: a study's rounds go through secure aggregation, which "
                         "needs two sites at least (one site: the per-site commands, marg export)")
    n = len(sites)
    if not (math.isfinite(float(epsilon)) and float(epsilon) > 0):
        raise InputError(f"--epsilon must be a positive number, got {epsilon!r}")
    if not 0.0 < float(delta) < 1.0:
        raise InputError(f"--delta must be in (0, 1), got {delta!r}")
    if tuple(rounds) not in (ROUNDS, ROUNDS[:2]):
        raise InputError(f"a study's rounds are {', '.join(ROUNDS)} or the first two, got {list(rounds)!r}")
    if "evaluate" in rounds and not 0.0 < float(holdout) < 1.0:
        raise InputError(f"the held-out fraction must be in (0, 1), got {holdout!r}")
    if "evaluate" not in rounds and float(holdout) != 0.0:
        raise InputError("a study without the evaluation round holds out no patient, got a held-out fraction "
                         f"{holdout!r}")
    t = n // 2 + 1 if threshold is None else int(threshold)
    if n >= 2 and not n // 2 < t <= n:
        raise InputError(f"--threshold must be more than half the sites and at most all of them ({n // 2 + 1}..{n}), "
                         f"got {t}")
    noise = noise or ("shared" if n >= 3 else "per-site")
    if noise not in NOISES:
        raise InputError(f"--noise must be one of {', '.join(NOISES)}, got {noise!r}")
    keys = [p.sign_id for p in parties] + [b64(public_bytes(p.seal_pub)) for p in parties if p.seal_pub is not None]
    if len(set(keys)) != len(keys):
        raise InputError("two parties of the roster share a key")
    unit = codebook.unit_declaration or None
    doc = {"format": STUDY_FILE_FORMAT, "version": 1, "study_id": secrets.token_hex(16), "created": now_iso(),
           "codebook": codebook.to_dict(include_draft=False), "fingerprint": codebook.fingerprint,
           "learner": _party(learner, lrn[0].sign_pub, lrn[0].seal_pub),
           "sites": [_party(p.site, p.sign_pub, p.seal_pub) for p in sorted(sites, key=lambda p: p.site)],
           "epsilon": float(epsilon), "delta": float(delta), "threshold": t, "rounds": list(rounds),
           "holdout": float(holdout),
           "privacy_unit": None if unit is None else {"column": unit["column"], "max_rows": unit["max_rows_per_unit"]},
           "drop": str(drop), "noise": noise, "plan": dict(plan)}
    return sign_document(doc, sign_key)


def write_study(doc: Mapping[str, Any], out: str | os.PathLike[str]) -> None:
    atomic_write_bytes(Path(out), canonical_json(dict(doc)) + b"\n")


def parse_study(d: Any, name: str, digest: str = "") -> Study:
    """Verify a study document (signature by the learner it names, fingerprint, keys); see the module docstring."""
    if not isinstance(d, dict) or d.get("format") != STUDY_FILE_FORMAT or d.get("version") != 1:
        raise InputError(f"{name}: not a marg study file")
    try:
        learner = _parse_party(d["learner"], name)
        sites = tuple(_parse_party(s, name) for s in d["sites"])
        cb = Codebook.from_dict(d["codebook"])
        sid = str(d["study_id"])
        int(sid, 16)
        fields = (float(d["epsilon"]), float(d["delta"]), int(d["threshold"]), tuple(str(r) for r in d["rounds"]),
                  float(d["holdout"]), str(d["drop"]), str(d["noise"]), dict(d["plan"]))
        unit = d.get("privacy_unit")
    except InputError:
        raise
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{name}: malformed study file") from None
    if not document_signed_by(d, learner.sign_pub):
        raise RefusedError(f"{name} refused: bad signature (the study file was altered after the learner signed it, "
                           f"or is not signed by the learner key it names)")
    if len(sid) != 32:
        raise InputError(f"{name}: malformed study id")
    if cb.fingerprint != d.get("fingerprint"):
        raise RefusedError(f"{name} refused: the embedded codebook does not match its fingerprint")
    names = [s.site for s in sites]
    if len(set(names)) != len(names) or learner.site in names:
        raise InputError(f"{name}: a party is listed twice")
    eps, delta, t, rounds, holdout, drop, noise, plan = fields
    if noise not in NOISES or not (len(sites) < 2 or len(sites) // 2 < t <= len(sites)):
        raise InputError(f"{name}: malformed study file (noise or threshold)")
    return Study(sid, cb, cb.fingerprint, learner, sites, eps, delta, t, rounds, holdout,
                 dict(unit) if isinstance(unit, dict) else None, drop, noise, plan, digest)


def read_study(path: str | os.PathLike[str]) -> Study:
    """The study file at ``path``, verified (:func:`parse_study`)."""
    p = Path(path)
    d = read_json_file(p, "study", "study file")
    return parse_study(d, str(p), hashlib.sha256(canonical_json(d)).hexdigest())


# ---------------------------------------------------------------------------------------
# what a party checks against its own files
# ---------------------------------------------------------------------------------------
def study_dir(home: Path, study: Study) -> Path:
    """The party's local record of ``study``: ``HOME/studies/<study id>``."""
    return Path(home) / STUDIES_DIR / study.study_id


def pin_learner(study: Study, home: Path) -> None:
    """Hold the study file to what this party trusts: the first file read for a study id, and its trust store.

    Refused: another study file for a study id seen before (``study.sha256`` differs), or a
    learner key not in ``HOME/trust`` when that folder holds learner keys.
    """
    from .trust_store import TrustStore

    trust = Path(home) / TRUST_DIR
    if trust.is_dir():
        store = TrustStore(trust)
        learners = {kid for kid in store.keys if store.role(kid) == "learner"}
        if learners and study.learner.sign_id not in learners:
            raise RefusedError(f"study {study.study_id} refused: its learner {study.learner.site!r} (key "
                               f"{short_id(study.learner.sign_id)}) is not a learner in this site's trust store "
                               f"{trust}")
    pin = study_dir(home, study) / "study.sha256"
    if pin.exists():
        if pin.read_text().strip() != study.digest:
            raise RefusedError(f"study {study.study_id} refused: this party first read another study file with the "
                               f"same id ({pin}); a study is declared once")
        return
    pin.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_bytes(pin, (study.digest + "\n").encode())


def check_own_keys(study: Study, name: str, sign_key: ed25519.Ed25519PrivateKey, seal_key: x25519.X25519PrivateKey,
                   learner: bool = False) -> None:
    """Refuse unless ``name``'s key pair is its entry in the study (a roster key not its own)."""
    entry = study.learner if learner else study.site(name)
    if learner and entry.site != name:
        raise InputError(f"the study's learner is {entry.site!r}, not {name!r}")
    if key_id(sign_key) != entry.sign_id or not entry.seals_to(seal_key.public_key()):
        raise RefusedError(f"study {study.study_id} refused: {name!r}'s key files are not the keys the study file "
                           f"lists for it (signing {short_id(entry.sign_id)}); nothing was done")
