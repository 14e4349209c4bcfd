"""Select, then measure on the command line: what an export of a round says, and what ``marg request`` asks for.

The commands (``marg export``, ``marg request``) parse; which round an export is, the library
decides (:func:`marg.protocols.release_kind.release_kind`, from the request ``marg export``
builds); this module words what a round did and plans the learner's request
(:mod:`marg.learners.study.two_round`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from marg.errors import InputError


def study_lines(record: dict[str, Any], out: Path, dry_run: bool = False) -> list[str]:
    """What an export of a round says after its bundle line (a dry run: what it would spend)."""
    if dry_run:
        return [line.replace("spent ρ", "would spend ρ").replace("round 1 of", "dry run of round 1 of")
                .replace("round 2 of", "dry run of round 2 of") for line in study_lines(record, out)[:2]]
    if record.get("round") == 1:
        plan, sel = record.get("plan", {}), record.get("selection", {})
        from .plan import split_line

        rest = float(plan.get("rho_rest", 0.0))
        return [split_line(plan), f"round 1 of select-then-measure: study total ε = {plan.get('epsilon'):g} (ρ = "
                f"{plan.get('rho_total'):.4g}); spent ρ = {record.get('rho_study', record['spent']['rho']):.4g} "
                f"(label table {plan.get('rho_label'):.3g}"
                + (f", by Laplace at ε = {plan['epsilon_label']:.3g}" if plan.get("label_mechanism") == "laplace"
                   else "")
                + f", private top-{sel.get('k')} "
                f"of {sel.get('candidates')} features {sel.get('rho'):.3g}); ρ = {rest:.4g} left for round 2",
                f"send {out} to the learner; answer its request with: marg export DATA --schema SCHEMA --site NAME "
                "--out NAME.r2 --request REQ --trust LEARNER-KEYS"]
    if record.get("round") == 2:
        by = record.get("requested_by")
        return [f"round 2 of select-then-measure: spent ρ = {record['spent']['rho']:.4g} of the "
                f"{record.get('rho', 0):.4g} the request asked" + (f" (signed by {by})" if by else "")]
    return []


def request_study(bundles: list[Path], out: Path, trust: Any, allow_unsigned: bool, key: Any,
                  signer: tuple[Any, str] | None) -> dict[str, Any]:
    """``marg request`` without ``--top``: plan round 2 from the round-1 bundles, sign and write it.

    ``signer``: the learner's key and name (``--sign-key``, else the configured one). Returns what
    was asked (for the command to print)."""
    from marg.learners.study.two_round import plan_request, site_round1
    from marg.marginals.study import study_record
    from marg.protocols.load import load_verified_bundles
    from marg.protocols.study import write_request

    if signer is None:
        raise InputError("the round-2 request is signed by the learner (sites refuse an unsigned one): give --sign-key "
                         "LEARNER.sign.key, or keep the learner's key in $MARG_HOME/keys (or $MARG_SIGN_KEY)")
    sk = signer[0]
    bs = load_verified_bundles(bundles, trust, allow_unsigned, key)
    cb = bs[0].codebook
    recs, seen = [], set()
    for b, p in zip(bs, bundles):
        if b.fingerprint != cb.fingerprint:
            raise InputError(f"{p}: another study's codebook (the round-1 bundles must share one)")
        rec = study_record(b.header)
        if rec is None or rec.get("round") != 1:
            raise InputError(f"{p}: not a round-1 bundle of select-then-measure (marg export --epsilon TOTAL; "
                             "for a one-round release use --top K)")
        if b.site in seen:
            raise InputError(f"{p}: site {b.site!r} gave two round-1 bundles")
        seen.add(b.site)
        lab = [t for t in b.tables if t.clique == (cb.label.name,)]
        if not lab:
            raise InputError(f"{p}: no label table")
        recs.append(site_round1(b.site, rec, lab[0].counts))
    req = plan_request(recs, cb)
    digest = write_request(out, req, sk)
    return {"out": str(out), "tables": [list(c) for c in req.tables], "weights": list(req.weights),
            "budget": req.budget, "why": req.why, "digest": digest}
