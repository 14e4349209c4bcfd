"""``marg secagg``: secure aggregation from the command line, dropout-tolerant.

Thin commands over :mod:`protocols.secagg_round` — the learner runs ``start``, ``collect``
and ``finish``; each site runs ``submit`` and ``reveal``. The learner sees only the sum of the
sites that uploaded; up to ``n − t`` sites may drop out.
"""


from pathlib import Path
from typing import Annotated, Optional

import typer

from marg.marginals.accounting import DEFAULT_DELTA

from .app import sub_app
from .common import JsonOpt, OutOpt, SchemaOpt, SiteOpt, emit_json, err

app = sub_app("Secure aggregation: the learner sees only the sum of the sites' tables (dropout-tolerant).")

RoundOpt = Annotated[Path, typer.Option("--round", help="The round file (marg secagg start).")]
LearnerKeyOpt = Annotated[Path, typer.Option("--key", help="The learner's signing key (LEARNER.sign.key).")]
SiteKeyOpt = Annotated[Optional[Path], typer.Option("--key",
                                                    help="The site's signing key (default: the configured site's).")]
SealKeyOpt = Annotated[Path, typer.Option("--seal-key", help="The site's sealing key (SITE.seal.key): pairwise masks "
                                                             "and its shares.")]
TrustOpt = Annotated[Path, typer.Option("--trust",
                                        help="The learners this site trusts: a folder of LEARNER.sign.pub files.")]
PassOpt = Annotated[Optional[Path], typer.Option("--passphrase-file",
                                                 help="File holding the private keys' passphrase.")]
MembersOpt = Annotated[Path, typer.Option("--members",
                                          help="This site's own list of the study's sites: a local folder of "
                                               "SITE.sign.pub and SITE.seal.pub (marg keys trust). A pinned site "
                                               "under another signing or sealing key, or a roster with fewer than the "
                                               "threshold of fully pinned sites, is refused before anything is "
                                               "sealed.")]


def _pw(passphrase_file: Optional[Path]) -> Optional[bytes]:
    from marg.protocols.keys import read_passphrase_file

    return read_passphrase_file(passphrase_file) if passphrase_file else None


def _learner_round(path: Path, key: Path, passphrase_file: Optional[Path]):
    from marg.protocols.keys import SIGN_KEY_SUFFIX, load_signing_key
    from marg.protocols.secagg_round import ROUND_FORMAT, parse_round, read_doc

    sk = load_signing_key(key, _pw(passphrase_file))
    rnd = parse_round(read_doc(path, ROUND_FORMAT), learner_pub=sk.public_key(), name=str(path))
    name = key.name[: -len(SIGN_KEY_SUFFIX)] if key.name.endswith(SIGN_KEY_SUFFIX) else key.stem
    return rnd, sk, name


def _site_round(path: Path, trust: Path, members: Path, site: str, fingerprint: str | None = None):
    """The round, verified against the learners this site trusts and its own list of study members."""
    from marg.protocols.pinning import PinnedKeys
    from marg.protocols.trust_store import TrustStore
    from marg.protocols.secagg_round import ROUND_FORMAT, check_roster, parse_round, read_doc

    rnd = parse_round(read_doc(path, ROUND_FORMAT), trust=TrustStore(trust), fingerprint=fingerprint, name=str(path))
    pinned = PinnedKeys.from_dir(members)
    check_roster(rnd, pinned, site, str(path))  # signing and sealing keys, before anything is sealed
    return rnd, pinned


def _site_keys(key: Optional[Path], seal_key: Path, passphrase_file: Optional[Path], ledger: Optional[Path]):
    """The site's signing and sealing keys and its ledger folder (defaults: the configured site's,
    :func:`marg.protocols.site.site_ledger`)."""
    from marg.protocols.keys import load_seal_key, load_signing_key
    from marg.protocols.site import site_ledger

    ledger, cfg = site_ledger(ledger)
    if key is None:
        if cfg is None:
            from marg.errors import InputError

            raise InputError("give the site's signing key (--key SITE.sign.key)")
        key = cfg.sign_key
    pw = _pw(passphrase_file)
    return load_signing_key(key, pw), load_seal_key(seal_key, pw), ledger


@app.command("start")
def start_cmd(
    schema: SchemaOpt,
    roster: Annotated[Path, typer.Option("--roster", help="Folder with each site's SITE.sign.pub and SITE.seal.pub.")],
    key: LearnerKeyOpt,
    out: OutOpt,
    sites: Annotated[Optional[str], typer.Option("--sites", help="Comma-separated sites (default: every site with "
                                                                 "both keys in --roster).")] = None,
    threshold: Annotated[Optional[int], typer.Option("--threshold",
                                                     help="Sites needed to finish (default and least: more than "
                                                          "half); up to n - t may drop out.")] = None,
    stats: Annotated[str, typer.Option(help="The tables every site releases: first, pairs (with --pairs) or "
                                            "all.")] = "first",
    pairs: Annotated[Optional[str], typer.Option(help='Pairs for --stats pairs: "a:b,c:d".')] = None,
    passphrase_file: PassOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Learner: start a secure round (a fresh id, the roster, the threshold), signed with its key."""
    from marg.marginals.data.codebook import Codebook
    from marg.marginals.counts.tables import parse_pairs
    from marg.protocols.keys import SEAL_PUB_SUFFIX, SIGN_KEY_SUFFIX, SIGN_PUB_SUFFIX, load_signing_key
    from marg.protocols.secagg_round import start_round, write_doc

    cb = Codebook.load(schema)
    if sites:
        names = [s.strip() for s in sites.split(",") if s.strip()]
    else:
        names = sorted(p.name[: -len(SIGN_PUB_SUFFIX)] for p in roster.glob(f"*{SIGN_PUB_SUFFIX}")
                       if (roster / (p.name[: -len(SIGN_PUB_SUFFIX)] + SEAL_PUB_SUFFIX)).exists())
    sk = load_signing_key(key, _pw(passphrase_file))
    learner = key.name[: -len(SIGN_KEY_SUFFIX)] if key.name.endswith(SIGN_KEY_SUFFIX) else key.stem
    pair_list = parse_pairs(cb, pairs) if pairs else None
    doc = start_round(roster, names, cb.fingerprint, sk, learner, threshold, stats, pair_list)
    write_doc(doc, out)
    n, t = len(doc["members"]), doc["threshold"]
    if json_out:
        emit_json({"out": str(out), "round": doc["id"], "sites": [m["site"] for m in doc["members"]], "threshold": t})
        return
    typer.echo(f"wrote {out}: secure round {doc['id']} of {n} sites ({', '.join(m['site'] for m in doc['members'])}), "
               f"threshold {t}: the sum is recovered if at most {n - t} drop out")


@app.command("submit")
def submit_cmd(
    data: Annotated[str, typer.Argument(metavar="DATA", help="The site's data (as for marg export).")],
    schema: SchemaOpt,
    round_file: RoundOpt,
    site: SiteOpt,
    trust: TrustOpt,
    members: MembersOpt,
    seal_key: SealKeyOpt,
    out: OutOpt,
    key: SiteKeyOpt = None,
    epsilon: Annotated[Optional[float], typer.Option("--epsilon", help="DP noise added at this site before masking: "
                                                                       "total ε.")] = None,
    rho: Annotated[Optional[float], typer.Option("--rho", help="DP noise added at this site before masking: total ρ "
                                                               "(zCDP).")] = None,
    delta: Annotated[float, typer.Option(help="δ of a Gaussian release.")] = DEFAULT_DELTA,
    mechanism: Annotated[str, typer.Option(help="gaussian or laplace.")] = "gaussian",
    min_cell: Annotated[int, typer.Option("--min-cell", help="Exact releases: smallest allowed nonzero cell of this "
                                                             "site's tables.")] = 3,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="The site's ledger (default: the configured one, "
                                                                    "else ./marg-ledger).")] = None,
    passphrase_file: PassOpt = None,
    json_out: JsonOpt = False,
    privacy_unit: Annotated[Optional[str], typer.Option("--privacy-unit",
                                                        help="The column naming each patient (default the codebook's "
                                                             "privacy_unit), or 'row'; as for marg export.")] = None,
    max_rows_per_unit: Annotated[Optional[int], typer.Option("--max-rows-per-unit",
                                                             help="With --privacy-unit: count at most K rows of each "
                                                                  "patient; every table's sensitivity scales with "
                                                                  "K.")] = None,
) -> None:
    """Site: count, add DP noise, mask and upload this site's tables for a secure round (recorded in the ledger)."""
    from marg._util import canonical_json
    from marg.marginals.data.codebook import Codebook
    from marg.protocols.export import export_site
    from marg.protocols.secagg_round import make_upload

    cb = Codebook.load(schema)
    rnd, _ = _site_round(round_file, trust, members, site, cb.fingerprint)
    sk, ck, ledger = _site_keys(key, seal_key, passphrase_file, ledger)

    def package(bundle):
        return canonical_json(make_upload(rnd, site, bundle.tables, ck, sk, bundle.header.get("privacy"))) + b"\n"

    res = export_site(data, cb, site, out, stats=rnd.stats, pairs=list(rnd.pairs) if rnd.pairs else None,
                      epsilon=epsilon, rho=rho, delta=delta, mechanism=mechanism, min_cell=min_cell, signing_key=sk,
                      round_id=rnd.id, ledger_dir=ledger, package=package, privacy_unit=privacy_unit,
                      max_rows_per_unit=max_rows_per_unit)
    noise = "exact counts" if res.cost.epsilon == float("inf") else f"DP cost {res.cost.describe()}"
    if json_out:
        emit_json({"out": str(out), "site": site, "round": rnd.id, "n_tables": len(res.tables),
                   "cost": res.cost.to_dict(),
                   "ledger_entry": res.ledger_entry["seq"] if res.ledger_entry else None})
        return
    typer.echo(f"wrote {out}: site {site!r}'s masked tables for round {rnd.id} ({len(res.tables)} tables, {noise}); "
               f"ledger entry #{res.ledger_entry['seq']}" if res.ledger_entry else f"wrote {out}")


@app.command("collect")
def collect_cmd(
    uploads: Annotated[list[Path], typer.Argument(help="The uploads that arrived.")],
    round_file: RoundOpt,
    key: LearnerKeyOpt,
    out: OutOpt,
    passphrase_file: PassOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Learner: check the uploads and ask the surviving sites for their shares (the dropped sites are recorded)."""
    from marg.protocols.secagg_round import UPLOAD_FORMAT, make_request, parse_upload, read_doc, write_doc

    rnd, sk, _ = _learner_round(round_file, key, passphrase_file)
    ups = [parse_upload(read_doc(p, UPLOAD_FORMAT), rnd, str(p)) for p in uploads]
    seen: dict[str, Path] = {}
    for p, u in zip(uploads, ups):
        if u.masked.site in seen:
            from marg.errors import RefusedError

            raise RefusedError(f"{p} refused: site {u.masked.site!r} already uploaded {seen[u.masked.site]}")
        seen[u.masked.site] = p
    doc = make_request(rnd, ups, sk)
    write_doc(doc, out)
    dropped = f"; dropped: {', '.join(doc['dropped'])}" if doc["dropped"] else "; no site dropped out"
    if json_out:
        emit_json({"out": str(out), "round": rnd.id, "survivors": list(doc["survivors"]),
                   "dropped": list(doc["dropped"]),
                   "threshold": rnd.threshold})
        return
    typer.echo(f"wrote {out}: {len(doc['survivors'])} of {len(rnd.members)} sites uploaded{dropped}. "
               f"Each survivor answers with marg secagg reveal; {rnd.threshold} answers are needed.")


@app.command("reveal")
def reveal_cmd(
    request: Annotated[Path, typer.Argument(help="The learner's request (marg secagg collect).")],
    round_file: RoundOpt,
    site: SiteOpt,
    trust: TrustOpt,
    members: MembersOpt,
    seal_key: SealKeyOpt,
    out: OutOpt,
    key: SiteKeyOpt = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger",
                                                   help="The site's ledger that recorded its upload (default: the "
                                                        "configured one, else ./marg-ledger); it remembers the "
                                                        "reveal.")] = None,
    passphrase_file: PassOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Site: reveal the shares that remove the survivors' self masks and the dropped sites' masks — once per round."""
    from marg.protocols.ledger import Ledger
    from marg.protocols.secagg_round import REQUEST_FORMAT, make_reveal, read_doc, reveal_once, write_doc
    from marg.protocols.site import resolve_export_ledger

    rnd, pinned = _site_round(round_file, trust, members, site)
    sk, ck, ledger = _site_keys(key, seal_key, passphrase_file, ledger)
    ledger_dir, site_cfg = resolve_export_ledger(ledger, site, sk)  # a configured site: its own ledger only
    doc = make_reveal(rnd, read_doc(request, REQUEST_FORMAT), site, ck, sk, members=pinned)
    marker = reveal_once(Ledger(ledger_dir, site=site_cfg), rnd, site)  # once per round, in the upload's ledger
    try:
        write_doc(doc, out)
    except BaseException:
        marker.unlink()  # nothing revealed: the round may still be answered
        raise
    if json_out:
        emit_json({"out": str(out), "site": site, "round": rnd.id, "survivors": list(doc["survivors"])})
        return
    typer.echo(f"wrote {out}: site {site!r}'s shares for round {rnd.id} (survivors {', '.join(doc['survivors'])})")


@app.command("finish")
def finish_cmd(
    uploads: Annotated[list[Path], typer.Argument(help="The survivors' uploads.")],
    round_file: RoundOpt,
    request: Annotated[Path, typer.Option("--request", help="The request sent to the sites (marg secagg collect).")],
    reveals: Annotated[list[Path], typer.Option("--reveal", help="A site's reveal; repeat (at least the threshold).")],
    schema: SchemaOpt,
    key: LearnerKeyOpt,
    out: OutOpt,
    passphrase_file: PassOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Learner: recover the survivors' summed tables and write them as a bundle signed with the learner's key.

    `marg learn SUM.bundle --trust DIR` reads it when DIR holds the learner's own LEARNER.sign.pub.
    """
    from marg.marginals.data.codebook import Codebook
    from marg.protocols.bundle import Bundle
    from marg.protocols.secagg_round import REQUEST_FORMAT, REVEAL_FORMAT, UPLOAD_FORMAT, finish, parse_upload, read_doc
    from marg.protocols.signing import finalize_bundle
    from marg._util import atomic_write_bytes

    cb = Codebook.load(schema)
    rnd, sk, learner = _learner_round(round_file, key, passphrase_file)
    if rnd.fingerprint != cb.fingerprint:
        from marg.errors import InputError

        raise InputError(f"{round_file}: the round is for codebook {rnd.fingerprint[:16]}…, not {cb.fingerprint[:16]}…")
    ups = [parse_upload(read_doc(p, UPLOAD_FORMAT), rnd, str(p)) for p in uploads]
    tables, info = finish(rnd, ups, read_doc(request, REQUEST_FORMAT), [read_doc(p, REVEAL_FORMAT) for p in reveals])
    privacy = _max_privacy([u.privacy for u in ups])
    bundle = Bundle.build(cb, tables, site=learner, n_rows=None, privacy=privacy,
                          extra={"secagg": info, "round": rnd.id})
    final, data = finalize_bundle(bundle, sk)
    atomic_write_bytes(out, data)
    dropped = f", {len(info['dropped'])} dropped out ({', '.join(info['dropped'])})" if info["dropped"] else ""
    if json_out:
        emit_json({"out": str(out), "round": rnd.id, "sites": list(info["sites"]), "dropped": list(info["dropped"]),
                   "signed_by": learner, "privacy": privacy, "digest": final.digest()})
        return
    typer.echo(f"wrote {out}: the sum of {len(info['sites'])} sites' tables{dropped}, round {rnd.id}, "
               f"signed by {learner!r}")
    if info["dropped"]:
        err(f"note: the sum covers only the {len(info['sites'])} surviving sites' patients")


def _max_privacy(parts):
    """A secure sum's privacy: per field the largest site's cost (the sites' patients are disjoint)."""
    out = {"mechanism": "none", "epsilon": 0.0, "delta": 0.0, "rho": 0.0}
    mechs = {p.get("mechanism") for p in parts if p}
    for p in parts:
        for f in ("epsilon", "delta", "rho"):
            v = (p or {}).get(f, 0.0)
            v = float("inf") if v == "inf" else float(v)
            out[f] = max(out[f], v)
    out["mechanism"] = mechs.pop() if len(mechs) == 1 else "mixed"
    return {k: ("inf" if isinstance(v, float) and v == float("inf") else v) for k, v in out.items()}
