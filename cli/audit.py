"""``marg audit``: what left this site — show the release ledger, verify its integrity.

Thin commands over :class:`protocols.ledger.Ledger`. ``show`` lists every release (when,
to whom, which statistics, privacy cost, running total against the cap); ``verify`` checks
the hash chain, every signature, the running totals and, given the bundle files, that each
released file has its entry — exit 1 naming the first bad entry.
"""


import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marg.errors import InputError, RefusedError
from marg.marginals.accounting import DEFAULT_DELTA

from .app import sub_app
from .common import JsonOpt, SiteOpt, emit_json, err


def _heavy() -> None:
    """Import the ledger (cryptography, numpy) on first use, not at ``marg --help``."""
    global PrivacyCost, Spend, cap_delta, short_id, Ledger, SEAL_MAGIC, site_ledger
    from marg.marginals.accounting import PrivacyCost, Spend, cap_delta
    from marg.protocols.keys import short_id
    from marg.protocols.ledger import Ledger
    from marg.protocols.sealing import SEAL_MAGIC
    from marg.protocols.site import site_ledger


def _open(ledger: Optional[Path], key: Optional[Path] = None) -> "Ledger":
    """The ledger folder asked for (default: the configured site's, else ./marg-ledger),
    pinned to the site's key when it is the configured ledger (or to ``key`` if given)."""
    ledger, cfg = site_ledger(ledger)
    site = cfg if cfg is not None and cfg.owns(ledger) else None
    return Ledger(ledger, public_key=key, site=site)


def _existing(led: "Ledger") -> "Ledger":
    """``led`` if its folder holds a ledger; a folder with none is refused (it would read "0 releases, verified"),
    unless it is the configured site's, whose checkpoint then names the ledger as deleted or truncated."""
    if not led.directory.is_dir():
        raise InputError(f"no ledger directory at {str(led.directory)!r}")
    if not led.path.exists() and getattr(led, "site", None) is None:  # the site's own ledger: verify names the deletion
        raise InputError(f"{str(led.directory)!r} holds no ledger ({led.path.name} is missing): give the site's ledger "
                         "folder (--ledger DIR)")
    return led


app = sub_app("The site's release ledger: what left, when, to whom, at what privacy cost.")

LedgerOpt = Annotated[Optional[Path], typer.Option("--ledger", help="The site's ledger folder (default: the "
                                                                    "configured site's, else ./marg-ledger).")]
KeyFileOpt = Annotated[Path, typer.Option("--key", help="The site's signing key (SITE.sign.key).")]
PassOpt = Annotated[Optional[Path], typer.Option("--passphrase-file", help="File holding the key's passphrase.")]
EpsOpt = Annotated[Optional[float], typer.Option("--epsilon",
                                                 help="Cap on the total ε of all exports of this dataset.")]
DeltaOpt = Annotated[Optional[float], typer.Option(
    "--delta", help=f"The δ the cap's ε holds at (default {DEFAULT_DELTA:g}, as marg export's; 0: pure-DP releases "
    "only, unless --rho is set). Lowering a cap keeps the δ in force unless given.")]
RhoOpt = Annotated[Optional[float], typer.Option("--rho", help="Cap on the total ρ (zCDP) of all exports.")]


def _fmt(x: Any) -> str:
    if x == "inf" or (isinstance(x, float) and math.isinf(x)):
        return "inf"
    return f"{float(x):.4g}"


def _refused_words(e: dict) -> str | None:
    """A refused evaluation's entry (:mod:`marg.protocols.evaluation_ledger`), in words; None otherwise."""
    ev = (e.get("source") or {}).get("evaluation") if isinstance(e.get("source"), dict) else None
    if not isinstance(ev, dict) or not ev.get("refused"):
        return None
    return f"refused evaluation ({ev['refused']}{', exact' if ev.get('exact') else ''})"


def _stats_words(stats: list[dict], width: int = 44) -> str:
    names = ", ".join(s.get("name", "?") for s in stats)
    text = f"{len(stats)}: {names}"
    return text if len(text) <= width else text[: width - 1] + "…"


def _expand_bundles(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            for f in sorted(p.iterdir()):
                if f.is_file():
                    with open(f, "rb") as fh:
                        head = fh.read(8)
                    if head in (b"MARGBNDL", SEAL_MAGIC):
                        out.append(f)
        else:
            out.append(p)
    return out


@app.command("show")
def show_cmd(
    ledger: LedgerOpt = None,
    json_out: JsonOpt = False,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write the history as a readable page (HTML, no "
                                                                "network resources).")] = None,
    key: Annotated[Optional[Path], typer.Option("--key", help="The site's public key (.sign.pub) to check signatures; "
                                                              "default the configured site's.")] = None,
) -> None:
    """List every release recorded in the ledger, with its privacy cost and the running total."""
    _heavy()
    led = _existing(_open(ledger, key))
    if html is not None:
        from marg._util import atomic_write_bytes
        from marg.reports.audit_page import audit_page

        atomic_write_bytes(html, audit_page(led).encode("utf-8"))
        err(f"wrote {html}: the ledger's release history")
    entries = led.entries()
    report = led.verify(allow_unsigned=True, require_key=False)
    cap = PrivacyCost.from_dict(report.cap) if report.cap is not None else None
    spend = Spend.from_dict(report.spend)
    at = cap_delta(cap)
    composed = spend.as_cost(at)
    if json_out:
        emit_json(
            {
                "ledger": str(led.path),
                "entries": entries,
                "n_entries": len(entries),
                "spent": composed.to_dict(),
                "spent_sum": report.spent,
                "spend": report.spend,
                "cap": cap.to_dict() if cap is not None else None,
                "head": report.head,
                "integrity": {"ok": report.ok, "reason": report.reason, "key_source": report.key_source,
                              "unsigned": report.unsigned, "torn_tail": report.torn_tail},
            }
        )
        return
    sites = sorted({e["site"] for e in entries})
    n_rel = sum(1 for e in entries if e.get("kind", "release") == "release")
    typer.echo(f"Ledger {led.path}: {n_rel} release(s) by site {', '.join(map(repr, sites)) or '-'}")
    typer.echo(f"Budget cap: {cap.describe_cap() if cap is not None else 'none recorded (marg audit budget)'}")
    if entries:
        hdr = (f"{'seq':>4}  {'time (UTC)':<25} {'to':<16} {'statistics':<44} {'mechanism':<9} {'ε':>8} {'δ':>8} "
               f"{'ρ':>8}  {'total ε/cap':>13} {'total ρ/cap':>13}")
        typer.echo(hdr)
        running = Spend()
        for e in entries:
            if e.get("kind") == "cap":
                typer.echo(f"{e['seq']:>4}  {e['time']:<25} privacy cap set to "
                           f"{PrivacyCost.from_dict(e['cap']).describe_cap()}")
                continue
            cost = e["cost"]
            running = running.add(PrivacyCost.from_dict(cost))
            row_cap = PrivacyCost.from_dict(e["cap"]) if e.get("cap") else None
            total = running.as_cost(cap_delta(row_cap))
            typer.echo(
                f"{e['seq']:>4}  {e['time']:<25} {_to(e):<16} "
                f"{_refused_words(e) or _stats_words(e['statistics']):<44} {e['mechanism']:<9} "
                f"{_fmt(cost['epsilon']):>8} {_fmt(cost['delta']):>8} {_fmt(cost['rho']):>8}  "
                f"{_pair(total, row_cap, 'epsilon'):>13} {_pair(total, row_cap, 'rho'):>13}"
            )
            if e.get("own_cost"):  # a shared-noise share (marginals.shared_noise): its two guarantees
                own = PrivacyCost.from_dict(e["own_cost"])
                typer.echo(f"{'':>6}shared noise: the cost above is the study's guarantee (the secure sum of >= t "
                           "sites, while t of its shares stay secret from the learner; charged); this site's share "
                           f"alone: {own.describe()}")
    if any(e["cost"].get("epsilon") == "inf" for e in entries):
        typer.echo("inf = exact counts were released: no differential-privacy guarantee for those releases.")
    typer.echo(f"Spent so far: {_spent_words(spend, composed, report.spent)}")
    if cap is not None:
        typer.echo(f"Remaining: {_remaining(cap, composed)}")
    status = "verified" if report.ok else f"FAILED ({report.reason})"
    if report.unsigned:
        status += f"; {len(report.unsigned)} unsigned entr{'y' if len(report.unsigned) == 1 else 'ies'}"
    keys = report.key_source if report.key_source != "none" else "none given (signatures not checked; pass --key)"
    typer.echo(f"Integrity: {status}; keys: {keys}; head {report.head or '-'} (record it: `marg audit verify --head` "
               "detects a rollback)")
    if report.torn_tail:
        typer.echo("Note: the ledger ended in an incomplete line (ignored); see `marg audit verify`.")


def _to(e: dict) -> str:
    if not e.get("recipient"):
        return "unsealed"
    name = e.get("recipient_name")
    return f"{name[:7]}:{e['recipient'][:8]}" if name else short_id(e["recipient"])


def _pair(total: "PrivacyCost", cap: "PrivacyCost | None", field: str) -> str:
    t = _fmt(getattr(total, field))
    cv = getattr(cap, field) if cap is not None else 0.0
    return f"{t}/{_fmt(cv)}" if cv > 0 else t


def _spent_words(spend: "Spend", composed: "PrivacyCost", sums: dict) -> str:
    """The composed spend in words, by the composition that gives its ε (:meth:`Spend.composition_at`): a pure
    part and a zCDP part are named apart (pure ε + ρ = ε by OpenDP's composition), never a ρ that holds the pure
    part's ε²/2 beside an ε it does not convert to; the plain sum of ε's."""
    if spend.exact:
        return "unbounded (exact counts were released)"
    if composed.delta == 0.0:
        return f"ε={_fmt(composed.epsilon)} (pure DP; as zCDP ρ={_fmt(composed.rho)})"
    eps_delta = f"(ε={_fmt(composed.epsilon)}, δ={composed.delta:g})"
    kind, _ = spend.composition_at(composed.delta)
    if kind == "pure+zcdp":
        words = (f"pure ε={_fmt(spend.eps_pure)} (Laplace) + ρ={_fmt(spend.rho_zcdp)} (zCDP: the other releases' ρ "
                 f"add) = {eps_delta} by OpenDP's composition of pure DP with zCDP")
    elif kind == "basic":
        words = f"{eps_delta} by adding the releases' ε's and δ's (tighter than converting ρ={_fmt(composed.rho)})"
    else:
        words = f"ρ={_fmt(composed.rho)} (zCDP: the releases' ρ add) = {eps_delta} by OpenDP's conversion"
        if spend.eps_pure > 0:
            words += " (Laplace releases counted as zCDP, ρ = ε²/2: tighter here than pure ε)"
    return words + f"; the releases' ε's added up would be {_fmt(sums.get('epsilon', 0.0))}"


def _remaining(cap: "PrivacyCost", spent: "PrivacyCost") -> str:
    parts = []
    if cap.epsilon > 0:
        parts.append(f"ε {_fmt(max(0.0, cap.epsilon - spent.epsilon))} at δ {cap.delta:g}")
    if cap.rho > 0:
        parts.append(f"ρ {_fmt(max(0.0, cap.rho - spent.rho))}")
    return ", ".join(parts)


@app.command("verify")
def verify_cmd(
    ledger: LedgerOpt = None,
    bundles: Annotated[
        Optional[list[Path]],
        typer.Option("--bundles", help="Released bundle files (or folders of them) that must each have an entry: "
                     "--bundles A B C (or repeated)."),
    ] = None,
    more: Annotated[Optional[list[Path]], typer.Argument(metavar="BUNDLES", help="More bundle files after --bundles A.",
                                                         show_default=False)] = None,
    key: Annotated[
        Optional[Path],
        typer.Option("--key", help="The site's public signing key (.sign.pub), from an independent copy. "
                     "Default: the key the site configuration pins (never keys found in the ledger folder)."),
    ] = None,
    head: Annotated[Optional[str], typer.Option("--head", help="A head hash recorded earlier (marg audit show): the "
                                                               "ledger must still contain it.")] = None,
    allow_unsigned: Annotated[bool, typer.Option("--allow-unsigned", help="Accept entries without signature.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Check the hash chain, every signature, the rules, the checkpoint and the bundle files; exit 1 on the first
    failure."""
    _heavy()
    if more and not bundles:
        raise InputError(f"{more[0]}: bundle files follow --bundles (marg audit verify --bundles A B)")
    led = _existing(_open(ledger, key))
    report = led.verify(bundle_paths=_expand_bundles([*(bundles or []), *(more or [])]) or None,
                        allow_unsigned=allow_unsigned, head=head)
    if json_out:
        emit_json(report.to_dict())
        if not report.ok:
            err(f"marg: error: {report.message()}")
            raise typer.Exit(code=RefusedError.exit_code)
        return
    if not report.ok:
        raise RefusedError(report.message())
    typer.echo(report.message())
    typer.echo(f"signatures checked with the key from: {report.key_source}"
               + (" (pass --key with an independent copy of the site key for a real audit)"
                  if report.key_source != "given" else ""))
    if report.bundles:
        typer.echo(f"{len(report.bundles)} bundle file(s) matched their entries: "
                   + ", ".join(f"{Path(b['path']).name}→#{b['seq']}" for b in report.bundles))
    cap = PrivacyCost.from_dict(report.cap) if report.cap is not None else None
    typer.echo(f"spent: {Spend.from_dict(report.spend).describe(cap_delta(cap))}; head {report.head or '-'}")


@app.command("init")
def init_cmd(
    site: SiteOpt,
    key: KeyFileOpt,
    ledger: Annotated[Optional[Path], typer.Option("--ledger",
                                                   help="The ledger folder (default: HOME/ledger).")] = None,
    passphrase_file: PassOpt = None,
    epsilon: EpsOpt = None,
    delta: DeltaOpt = None,
    rho: RhoOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Configure this site once: pin its signing key, fix its ledger's location, optionally set the privacy cap.

    The configuration lives in $MARG_HOME (default ~/.config/marg), not in the working
    directory: every later export is recorded in that ledger and signed by that key.
    """
    _heavy()
    from marg.protocols.keys import load_signing_key, read_passphrase_file
    from marg.protocols.site import init_site

    sk = load_signing_key(key, read_passphrase_file(passphrase_file) if passphrase_file else None)
    if epsilon is not None or rho is not None:  # a raised cap is refused before anything is written or said
        _check_cap_not_raised(ledger, epsilon, delta, rho)
    cfg = init_site(site, key, sk, ledger)
    led = Ledger(cfg.ledger, site=cfg)
    state = led.checkpoint(sk)
    if not json_out:
        typer.echo(f"site {cfg.site!r} configured in {cfg.path}: key {short_id(cfg.key_id)} pinned, ledger "
                   f"{cfg.ledger} ({state.n} entries)")
    cap = None
    if epsilon is not None or rho is not None:
        cap = _set_cap(led, sk, cfg.site, epsilon, delta, rho, quiet=json_out)
    if json_out:
        emit_json({"site": cfg.site, "config": str(cfg.path), "key_id": cfg.key_id, "ledger": str(cfg.ledger),
                   "entries": led.state().n, "cap": None if cap is None else cap.to_dict()})


def _check_cap_not_raised(ledger: Optional[Path], epsilon: Optional[float], delta: Optional[float],
                          rho: Optional[float]) -> None:
    """Refuse (one line) a cap that would raise the one in force in the ledger this init would use."""
    from marg.protocols.ledger_format import LEDGER_FILE
    from marg.protocols.ledger_state import refuse_raised_cap
    from marg.protocols.site import DEFAULT_LEDGER, SiteConfig, site_home

    cfg = SiteConfig.load(site_home())
    folder = Path(ledger) if ledger is not None else (cfg.ledger if cfg is not None else site_home() / DEFAULT_LEDGER)
    if not (folder / LEDGER_FILE).is_file():
        return
    old = Ledger(folder, site=cfg).cap()
    refuse_raised_cap(old, new_cap(old, epsilon, delta, rho), f"ledger {folder}: this cap ")


def new_cap(old: "PrivacyCost | None", epsilon: Optional[float], delta: Optional[float],
            rho: Optional[float]) -> "PrivacyCost":
    """The cap ``marg audit init/budget`` records: the fields given; the others those of the cap
    in force (lowering ε keeps its δ), else the defaults (δ = :data:`DEFAULT_DELTA` with an ε)."""
    from marg.marginals.accounting import PrivacyCost

    if old is None:
        return PrivacyCost(epsilon=epsilon or 0.0,
                           delta=(DEFAULT_DELTA if epsilon else 0.0) if delta is None else delta,
                           rho=rho or 0.0)
    if delta is None:  # the δ in force, or the default when the cap did not set ε before
        delta = old.delta if old.epsilon > 0 or not epsilon else DEFAULT_DELTA
    return PrivacyCost(epsilon=old.epsilon if epsilon is None else epsilon, delta=delta,
                       rho=old.rho if rho is None else rho)


def _set_cap(led: "Ledger", sk: object, site: str, epsilon: Optional[float], delta: Optional[float],
             rho: Optional[float],
             quiet: bool = False) -> "PrivacyCost":
    """Record the new cap as a signed ledger entry (said in one line unless ``quiet``); the cap."""
    cap = new_cap(led.state().cap, epsilon, delta, rho)
    e = led.set_cap(cap, sk, site)
    if not quiet:
        typer.echo(f"privacy cap {cap.describe_cap()} recorded as signed ledger entry #{e['seq']} in {led.path} "
                   "(it can be lowered, never raised)")
    return cap


@app.command("budget")
def budget_cmd(
    ledger: LedgerOpt = None,
    epsilon: EpsOpt = None,
    delta: DeltaOpt = None,
    rho: RhoOpt = None,
    key: Annotated[Optional[Path], typer.Option("--key",
                                                help="The site's signing key (default: the configured one).")] = None,
    passphrase_file: PassOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Record the dataset's privacy cap in the signed ledger (or show it, with no cap given).

    Every later export is refused if it would take the composed spend past the cap; exports
    of exact counts are refused outright once a cap exists. The cap can be lowered, never
    raised; lowering changes only the fields given (``--epsilon 2.4`` keeps the δ in force).
    """
    _heavy()
    led = _open(ledger)
    if epsilon is None and rho is None and delta is None:
        state = led.state()
        spent = state.spend.as_cost(cap_delta(state.cap))
        if json_out:
            emit_json({"cap": state.cap.to_dict() if state.cap else None, "spent": spent.to_dict()})
            return
        if state.cap is None:
            typer.echo(f"no privacy cap recorded in {led.directory} (set one with --epsilon or --rho); spent "
                       f"{spent.describe()}")
        else:
            typer.echo(f"privacy cap of {led.directory}: {state.cap.describe_cap()}; spent {spent.describe()}")
        return
    from marg.protocols.keys import load_signing_key, read_passphrase_file

    if led.site is None:
        raise RefusedError(f"{led.directory} is not a configured site's ledger: run marg audit init --site NAME "
                           "--key NAME.sign.key first (a cap outside the site's configuration could be sidestepped)")
    sk = load_signing_key(key or led.site.sign_key, read_passphrase_file(passphrase_file) if passphrase_file else None)
    _set_cap(led, sk, led.site.site, epsilon, delta, rho)
