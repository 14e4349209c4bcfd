"""A study run by its parties: the drop box's state machine, each party's keys, and ``marg study status``.

Each party runs one idempotent command until the study is done (``marg study run``): a site
(:func:`marg.study_site.run_site`) and the learner (:func:`marg.study_learner.run_learner`). They
meet only in the study's drop box (:mod:`marg.protocols.drop_box`, untrusted: every file below is
signed by its writer or sealed to its reader, and verified when read). Round ``R`` of the study's
rounds (``select``, ``measure``, ``evaluate``) is a secure-aggregation round
(:mod:`marg.protocols.secagg_round`, :mod:`marg.protocols.study_round`)::

    R/round.json          learner   the round: id, roster (the survivors of the round before), tables, ρ
    R/upload-SITE.json    site      its masked tables and its sealed Shamir shares (ledgered first)
    R/request.json        learner   the survivors (at least t) and the envelopes for each
    R/reveal-SITE.json    site      its shares that unmask the survivors' sum (once per round)
    R/sum.bundle          learner   the survivors' summed tables, signed
    R/refused.json        learner   fewer than t answered: nothing was released, the study stops
    evaluate/model.json   learner   the chosen model (signed), evaluated on each site's held-out patients
    final/model.json      learner   the certified model (signed): the holdout bound on the model as chosen
    final/result.json     learner   the study's outcome: certificate, sites, dropped, each round's survivors

The learner closes a round (writes the request, or the sum) when every member answered, or on
``--close`` with at least ``t``: the missing sites are dropped, recorded in the request, and take no
part in later rounds; a site that comes late finds the round closed and uploads nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marg.errors import InputError, RefusedError

ROUND_NAMES = ("select", "measure", "evaluate")
EVAL_MODEL = "evaluate/model.json"
FINAL_MODEL = "final/model.json"
FINAL_RESULT = "final/result.json"


def round_file(r: str) -> str:
    return f"{r}/round.json"


def upload_file(r: str, site: str) -> str:
    return f"{r}/upload-{site}.json"


def request_file(r: str) -> str:
    return f"{r}/request.json"


def reveal_file(r: str, site: str) -> str:
    return f"{r}/reveal-{site}.json"


def sum_file(r: str) -> str:
    return f"{r}/sum.bundle"


def refused_file(r: str) -> str:
    return f"{r}/refused.json"


@dataclass
class Party:
    """A party of an opened study: the study, its home, its keys, the drop box."""

    study: Any
    name: str
    home: Path
    sign_key: Any
    seal_key: Any
    drop: Any

    @property
    def local(self) -> Path:
        from marg.protocols.study_file import study_dir

        return study_dir(self.home, self.study)


def key_files(home: Path, name: str) -> tuple[Path, Path]:
    """The party's key files: ``HOME/keys/NAME.sign.key`` and ``NAME.seal.key`` (``marg keys init --dir HOME/keys``)."""
    from marg.protocols.keys import SEAL_KEY_SUFFIX, SIGN_KEY_SUFFIX
    from marg.protocols.site import KEYS_DIR

    d = Path(home) / KEYS_DIR
    return d / f"{name}{SIGN_KEY_SUFFIX}", d / f"{name}{SEAL_KEY_SUFFIX}"


def open_party(study_path: str | Path, name: str | None, learner: bool, check_drop: bool = True,
               pin: bool = True) -> Party:
    """Read and verify the study, load this party's keys from ``$MARG_HOME`` and check them against it.

    Every refusal here comes before anything is spent or written to the drop box (the study file
    pin, :func:`marg.protocols.study_file.pin_learner`, is written last, once everything checked;
    ``pin=False`` leaves it to the caller, which checks the site's data first: a refusal then writes nothing).
    """
    import os

    from marg.protocols.drop_box import DropBox
    from marg.protocols.keys import load_seal_key, load_signing_key, read_passphrase_file
    from marg.protocols.site import site_home
    from marg.protocols.study_file import check_own_keys, pin_learner, read_study

    study = read_study(study_path)
    if learner:
        name = study.learner.site
    elif name is None:
        raise InputError("give --site NAME (a site of the study) or --learner")
    else:
        study.site(name)  # a site not in the roster: one line naming the roster
    home = site_home()
    sign_f, seal_f = key_files(home, name)
    for f in (sign_f, seal_f):
        if not f.is_file():
            raise InputError(f"no key file {f} ({name!r}'s keys: marg keys init --site {name} --dir {f.parent})")
    pw_file = os.environ.get("MARG_PASSPHRASE_FILE")
    pw = read_passphrase_file(pw_file) if pw_file else None
    sk, ck = load_signing_key(sign_f, pw), load_seal_key(seal_f, pw)
    check_own_keys(study, name, sk, ck, learner=learner)
    drop = DropBox(study.drop)
    if check_drop:
        drop.check_writable()
    if not learner and pin:
        pin_learner(study, home)
    return Party(study, name, home, sk, ck, drop)


def read_json(drop: Any, name: str) -> dict[str, Any] | None:
    """A JSON document of the drop box (None: absent); one-line InputError when it is not JSON."""
    data = drop.read(name)
    if data is None:
        return None
    try:
        d = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise InputError(f"drop box {drop}: {name} is not a JSON document") from None
    if not isinstance(d, dict):
        raise InputError(f"drop box {drop}: {name} is not a JSON object")
    return d


def learner_signed(party_or_study: Any, drop: Any, name: str) -> dict[str, Any] | None:
    """A learner-signed document of the drop box, verified against the study's learner key (None: absent)."""
    from marg.protocols.signing import document_signed_by

    study = getattr(party_or_study, "study", party_or_study)
    d = read_json(drop, name)
    if d is None:
        return None
    if not document_signed_by(d, study.learner.sign_pub):
        raise RefusedError(f"drop box {drop}: {name} refused: not signed by the study's learner (altered or planted)")
    return d


def evaluation_ordinal(summed: Any) -> int:
    """The evaluated model's ordinal j on the sites' held-out sets, from the evaluation round's summed bundle.

    Each site's upload states, under its signature, the rank of the model among the distinct models its
    ledger records as evaluated on that held-out set (``evaluations_on_split``, 1 for the first; a study's
    evaluation and ``marg evaluate``'s alike). The sum relays them (``privacy.per_site``); the largest
    counts, so the certificate's share of α is g(j) = 6/(π²·j²)
    (:func:`marg.learners.certification.holdout_certificate.evaluation_share`): keeping the best of every model ever
    evaluated on those patients is covered without an option. An upload without it (an older marg) counts
    as the first.
    """
    per_site = ((getattr(summed, "header", None) or {}).get("privacy") or {}).get("per_site") or []
    known = [p.get("evaluations_on_split") for p in per_site if isinstance(p, dict)]
    return max([int(k) for k in known if isinstance(k, int) and not isinstance(k, bool) and k >= 1] or [1])


# ---------------------------------------------------------------------------------------
# the study declared once
# ---------------------------------------------------------------------------------------
def study_plan_rule(codebook: Any, epsilon: float, delta: float, rows: list[int], threshold: int, noise: str,
                    max_rows: int = 1) -> dict[str, Any]:
    """Each round's ρ, the held-out fraction and the selection mode, from public quantities only.

    The design rule :func:`marg.marginals.study_design.design_study` (the codebook, the sites' stated rows,
    ε, δ, t, the noise): the evaluation share and held-out fraction minimise the expected holdout
    certificate, the rest is split between ``select`` and ``measure`` by the split rule; the rounds' ρ
    add to ρ_total, the largest ρ that is (ε, δ)-DP. ``selection``: the design's mode, which the runner runs
    (``selection_run``: the same): ``"pooled"`` (round 1 pools every first-order table), ``"private"`` (round 1
    pools the label table at ``rho_label``, each site's own OpenDP top-k at ``rho_select``:
    :mod:`marg.protocols.study_top_k`) or ``"first-order"``.
    """
    from marg.marginals.study_design import design_study

    d = design_study(codebook, len(rows), rows, float(epsilon), float(delta), threshold, max_rows, True, noise)
    return {"rho": dict(d.rounds), "rho_total": d.rho_total, "holdout": d.holdout, "k": int(d.k),
            "rounds": list(d.round_names),
            "rows": list(rows), "rows_stated": d.rows_stated, "selection": d.selection,
            "selection_run": d.selection, "rho_label": d.rho_label, "rho_select": d.rho_select,
            "expected_certificate": d.expected_certificate, "rule": d.to_dict()["rule"]}


def init_study(schema: str | Path, roster: str | Path, epsilon: float, delta: float, drop: str, sign_key: str | Path,
               out: str | Path, threshold: int | None = None, noise: str | None = None,
               rows: list[int] | None = None) -> dict[str, Any]:
    """Write the signed study file (``marg study init``); return it as written."""
    import os

    from marg.marginals.data.codebook import Codebook
    from marg.marginals.study_split import DEFAULT_ROWS
    from marg.protocols.drop_box import DropBox
    from marg.protocols.keys import load_signing_key, read_passphrase_file
    from marg.protocols.study_file import make_study, roster_from_dir, write_study

    cb = Codebook.load(schema)
    pw_file = os.environ.get("MARG_PASSPHRASE_FILE")
    sk = load_signing_key(sign_key, read_passphrase_file(pw_file) if pw_file else None)
    learner, parties = roster_from_dir(roster, sk.public_key())
    n_sites = len(parties) - 1
    if Path(out).exists():
        raise InputError(f"{out} exists: a study is declared once (refusing to overwrite it)")
    DropBox(drop).check_writable()
    if rows is not None and len(rows) != n_sites:
        raise InputError(f"--rows gives {len(rows)} counts for the roster's {n_sites} sites")
    stated = list(rows) if rows else [DEFAULT_ROWS[0]] * max(n_sites, 1)
    noise = noise or ("shared" if n_sites >= 3 else "per-site")
    t = threshold if threshold is not None else n_sites // 2 + 1
    unit = cb.unit_declaration
    plan = study_plan_rule(cb, epsilon, delta, stated, t, noise, int(unit.get("max_rows_per_unit") or 1) if unit else 1)
    doc = make_study(cb, parties, learner, sk, epsilon=epsilon, delta=delta, drop=drop, plan=plan,
                     holdout=plan["holdout"], threshold=threshold, noise=noise, rounds=tuple(plan["rounds"]))
    write_study(doc, out)
    return doc


# ---------------------------------------------------------------------------------------
# status
# ---------------------------------------------------------------------------------------
def status(study_path: str | Path) -> dict[str, Any]:
    """What the drop box says of the study: each round's state, each site's part, the model when done.

    Anyone with the study file can ask; every file counted is verified first (an upload by its
    site's key, the learner's files by the learner's). A site's spend is what its uploads state
    under its signature (its ledger holds the authoritative record).
    """
    from marg.protocols.drop_box import DropBox
    from marg.protocols.secagg_round import parse_upload
    from marg.protocols.study_file import read_study
    from marg.protocols.study_round import parse_study_round

    study = read_study(study_path)
    drop = DropBox(study.drop)
    sites = {s: {"state": "not started", "rounds": {}, "rho": 0.0} for s in study.names}
    rounds: dict[str, Any] = {}
    pending = None
    for r in study.rounds:
        doc = learner_signed(study, drop, round_file(r))
        if doc is None:
            rounds[r] = {"state": "not opened"}
            pending = pending or f"the learner opens round {r!r} (marg study run STUDY --learner)"
            break
        rnd, block = parse_study_round(study, doc, r, round_file(r))
        info: dict[str, Any] = {"state": "open", "members": rnd.names, "rho": float(block.get("rho", 0.0))}
        answered = []
        for s in rnd.names:
            up = read_json(drop, upload_file(r, s))
            if up is not None:
                parse_upload(up, rnd, upload_file(r, s))
                answered.append(s)
                sites[s]["rounds"][r] = "uploaded"
                sites[s]["rho"] += float(block.get("rho", 0.0))
        info["uploaded"] = answered
        req = learner_signed(study, drop, request_file(r))
        if learner_signed(study, drop, refused_file(r)) is not None:
            info["state"] = "refused"
            rounds[r] = info
            pending = f"round {r!r} was refused (fewer than t = {study.threshold} sites answered): the study stopped"
            break
        if req is None:
            missing = [s for s in rnd.names if s not in answered]
            pending = pending or (f"sites {', '.join(missing)} answer round {r!r}" if missing else
                                  f"the learner collects round {r!r}")
            rounds[r] = info
            break
        info["survivors"], info["dropped"] = list(req.get("survivors", [])), list(req.get("dropped", []))
        for s in info["dropped"]:
            sites[s]["state"] = f"dropped in round {r}"
        revealed = [s for s in info["survivors"] if drop.exists(reveal_file(r, s))]
        info["revealed"] = revealed
        for s in revealed:
            sites[s]["rounds"][r] = "revealed"
        if not drop.exists(sum_file(r)):
            info["state"] = "revealing"
            missing = [s for s in info["survivors"] if s not in revealed]
            pending = pending or (f"sites {', '.join(missing)} reveal their shares for round {r!r}" if missing
                                  else f"the learner sums round {r!r}")
            rounds[r] = info
            break
        info["state"] = "summed"
        rounds[r] = info
    result = learner_signed(study, drop, FINAL_RESULT)
    for s, v in sites.items():
        if v["state"] == "not started" and v["rounds"]:
            v["state"] = "done" if result is not None else "taking part"
    out = {"study_id": study.study_id, "drop": str(drop), "threshold": study.threshold, "noise": study.noise,
           "sites": sites, "rounds": rounds, "done": result is not None,
           "pending": None if result is not None else (pending or "the learner fits and certifies the model"),
           "model": f"{drop}/{FINAL_MODEL}" if result is not None else None,
           "result": {k: v for k, v in (result or {}).items() if k not in ("signature", "key_id")} or None}
    return out
