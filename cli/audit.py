"""``marg audit``: what left this site — show the release ledger, verify its integrity.

Thin commands over :class:`protocols.ledger.Ledger`. ``show`` lists every release (when,
to whom, which statistics, privacy cost, running total against the cap); ``verify`` checks
the hash chain, every signature, the running totals and, given the bundle files, that each
released file has its entry — exit 1 naming the first bad entry.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marg.errors import InputError, RefusedError

from .app import sub_app
from .common import JsonOpt, emit_json, err

DEFAULT_LEDGER_DIR = "marg-ledger"  # protocols.ledger.DEFAULT_LEDGER_DIR, without importing it for --help


def _heavy() -> None:
    """Import the ledger (cryptography, numpy) on first use, not at ``marg --help``."""
    global PrivacyCost, short_id, Ledger, SEAL_MAGIC
    from marg.marginals.privacy import PrivacyCost
    from marg.protocols.keys import short_id
    from marg.protocols.ledger import Ledger
    from marg.protocols.sealing import SEAL_MAGIC



app = sub_app("The site's release ledger: what left, when, to whom, at what privacy cost.")

LedgerOpt = Annotated[Path, typer.Option("--ledger", help="The site's ledger folder.")]


def _fmt(x: Any) -> str:
    if x == "inf" or (isinstance(x, float) and math.isinf(x)):
        return "inf"
    return f"{float(x):.4g}"


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
    ledger: LedgerOpt = Path(DEFAULT_LEDGER_DIR),
    json_out: JsonOpt = False,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write the history as a readable page (HTML, no network resources).")] = None,
) -> None:
    """List every release recorded in the ledger, with its privacy cost and the running total."""
    _heavy()
    led = Ledger(ledger)
    if not led.directory.is_dir():
        raise InputError(f"no ledger directory at {str(led.directory)!r}")
    if html is not None:
        from marg._util import atomic_write_bytes
        from marg.reports.audit_page import audit_page

        atomic_write_bytes(html, audit_page(led).encode("utf-8"))
        err(f"wrote {html}: the ledger's release history")
    entries = led.entries()
    cap = led.cap()
    spent = led.spent()
    report = led.verify(allow_unsigned=True)
    if json_out:
        emit_json(
            {
                "ledger": str(led.path),
                "entries": entries,
                "n_entries": len(entries),
                "spent": spent.to_dict(),
                "cap": cap.to_dict() if cap is not None else None,
                "head": report.head,
                "integrity": {"ok": report.ok, "reason": report.reason, "key_source": report.key_source,
                              "unsigned": report.unsigned, "torn_tail": report.torn_tail},
            }
        )
        return
    sites = sorted({e["site"] for e in entries})
    typer.echo(f"Ledger {led.path}: {len(entries)} release(s) by site {', '.join(map(repr, sites)) or '-'}")
    typer.echo(f"Budget cap: {cap.describe() if cap is not None else 'none configured (budget.json)'}")
    if entries:
        hdr = f"{'seq':>4}  {'time (UTC)':<25} {'to':<16} {'statistics':<44} {'mechanism':<9} {'ε':>8} {'δ':>8} {'ρ':>8}  {'total ε/cap':>13} {'total ρ/cap':>13}"
        typer.echo(hdr)
        for e in entries:
            cost, cum = e["cost"], e["cumulative"]
            typer.echo(
                f"{e['seq']:>4}  {e['time']:<25} {_to(e):<16} "
                f"{_stats_words(e['statistics']):<44} {e['mechanism']:<9} {_fmt(cost['epsilon']):>8} "
                f"{_fmt(cost['delta']):>8} {_fmt(cost['rho']):>8}  "
                f"{_pair(cum, e['cap'], 'epsilon'):>13} {_pair(cum, e['cap'], 'rho'):>13}"
            )
    if any(e["cost"].get("epsilon") == "inf" for e in entries):
        typer.echo("inf = exact counts were released: no differential-privacy guarantee for those releases.")
    typer.echo(f"Spent so far: {spent.describe()}")
    if cap is not None:
        typer.echo(f"Remaining: {_remaining(cap, spent)}")
    status = "verified" if report.ok else f"FAILED ({report.reason})"
    if report.unsigned:
        status += f"; {len(report.unsigned)} unsigned entr{'y' if len(report.unsigned) == 1 else 'ies'}"
    typer.echo(f"Integrity: {status}; keys: {report.key_source}; head {report.head or '-'}")
    if report.torn_tail:
        typer.echo("Note: the ledger ended in an incomplete line (ignored); see `marg audit verify`.")


def _to(e: dict) -> str:
    if not e.get("recipient"):
        return "unsealed"
    name = e.get("recipient_name")
    return f"{name[:7]}:{e['recipient'][:8]}" if name else short_id(e["recipient"])


def _pair(cum: dict, cap: dict | None, field: str) -> str:
    t = _fmt(cum.get(field, 0.0))
    if cap is None:
        return t
    cv = getattr(PrivacyCost.from_dict(cap), field)
    return f"{t}/{_fmt(cv)}" if cv > 0 else t


def _remaining(cap: PrivacyCost, spent: PrivacyCost) -> str:
    parts = []
    if cap.epsilon > 0:
        parts.append(f"ε {_fmt(max(0.0, cap.epsilon - spent.epsilon))}")
        parts.append(f"δ {_fmt(max(0.0, cap.delta - spent.delta))}")
    if cap.rho > 0:
        parts.append(f"ρ {_fmt(max(0.0, cap.rho - spent.rho))}")
    return ", ".join(parts)


@app.command("verify")
def verify_cmd(
    ledger: LedgerOpt = Path(DEFAULT_LEDGER_DIR),
    bundles: Annotated[
        Optional[list[Path]],
        typer.Option("--bundles", help="Released bundle files (or folders of them) that must each have an entry; repeatable."),
    ] = None,
    key: Annotated[
        Optional[Path],
        typer.Option("--key", help="The site's public signing key (.sign.pub), from an independent copy. "
                     "Default: the copies kept in the ledger folder (self-attested)."),
    ] = None,
    allow_unsigned: Annotated[bool, typer.Option("--allow-unsigned", help="Accept entries without signature.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Check the hash chain, every signature, the running totals and the bundle files; exit 1 on the first bad entry."""
    _heavy()
    led = Ledger(ledger)
    report = led.verify(bundle_paths=_expand_bundles(bundles or []) or None, public_key=key, allow_unsigned=allow_unsigned)
    if json_out:
        emit_json(report.to_dict())
        if not report.ok:
            err(f"marg: error: {report.message()}")
            raise typer.Exit(code=RefusedError.exit_code)
        return
    if not report.ok:
        raise RefusedError(report.message())
    typer.echo(report.message())
    typer.echo(f"signatures checked with keys from: {report.key_source}"
               + (" (pass --key with an independent copy of the site key for a real audit)" if report.key_source != "given" else ""))
    if report.bundles:
        typer.echo(f"{len(report.bundles)} bundle file(s) matched their entries: "
                   + ", ".join(f"{Path(b['path']).name}→#{b['seq']}" for b in report.bundles))
    typer.echo(f"spent: {PrivacyCost.from_dict(report.spent).describe()}; head {report.head or '-'}")


@app.command("budget")
def budget_cmd(
    ledger: LedgerOpt = Path(DEFAULT_LEDGER_DIR),
    epsilon: Annotated[Optional[float], typer.Option("--epsilon", help="Cap on the total ε of all exports of this dataset.")] = None,
    delta: Annotated[float, typer.Option(help="Cap on the total δ (0: pure-DP releases only, unless --rho is set).")] = 0.0,
    rho: Annotated[Optional[float], typer.Option("--rho", help="Cap on the total ρ (zCDP) of all exports.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Configure the dataset's privacy budget cap, once (or show it, with no cap given).

    Every later `marg export --ledger DIR` is refused if it would take the total spend past
    the cap; exports of exact counts are refused outright once a cap exists.
    """
    _heavy()
    from marg.marginals.privacy import read_budget, write_budget

    if epsilon is None and rho is None:
        cap = read_budget(ledger)
        spent = Ledger(ledger).spent() if (ledger / "ledger.jsonl").exists() else PrivacyCost.zero()
        if json_out:
            emit_json({"cap": cap.to_dict() if cap else None, "spent": spent.to_dict()})
            return
        if cap is None:
            typer.echo(f"no privacy budget configured in {ledger} (set one with --epsilon or --rho)")
        else:
            typer.echo(f"privacy budget of {ledger}: cap {cap.describe()}; spent {spent.describe()}")
        return
    cap = PrivacyCost(epsilon=epsilon or 0.0, delta=delta, rho=rho or 0.0)
    ledger.mkdir(parents=True, exist_ok=True)
    path = write_budget(ledger, cap)
    if json_out:
        emit_json({"cap": cap.to_dict(), "path": str(path)})
        return
    typer.echo(f"privacy budget cap {cap.describe()} configured in {path} (it cannot be raised later)")
