"""The ledger page: a site's release history for its privacy officer, as one HTML file.

:func:`audit_page` renders the entries of a ledger (a timeline of releases: when, to whom,
which statistics, mechanism and cost), the cumulative privacy spend against the cap as a
plot (ε, and ρ when zCDP releases or a ρ cap are recorded), every released statistic of
every entry (clique, shape, noise), and the verification status of the hash chain, every
entry and every signature (:meth:`marg.protocols.ledger.Ledger.verify`): the entries before
the first failure verified, the failing one with the reason, the ones after it unverified.
"""

from __future__ import annotations

import math
from typing import Any

from . import plots
from .html import Page, e, value

FOLD_STATISTICS = 60
"""A release of more statistics than this lists them folded (``<details>``)."""


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.inf


def audit_page(ledger: Any, public_key: Any = None) -> str:
    """The HTML page of ``ledger`` (a :class:`marg.protocols.ledger.Ledger`); ``public_key`` as
    for :meth:`Ledger.verify` (default: the key the site configuration pins; without one the
    signatures are reported unchecked). Spend and cap are those of the verified prefix."""
    from marg.marginals.accounting import PrivacyCost, Spend, cap_delta

    entries = ledger.entries()
    report = ledger.verify(public_key=public_key, allow_unsigned=True, require_key=False)
    cap = None if report.cap is None else PrivacyCost.from_dict(report.cap)
    spent = Spend.from_dict(report.spend).as_cost(cap_delta(cap))
    running = _running(entries)
    sites = sorted({x["site"] for x in entries})
    page = Page(f"Release ledger — {', '.join(sites) or 'no releases'}")
    releases = [x for x in entries if _is_release(x)]

    page.h2("Summary")
    status = ('<span class="ok">verified</span>' if report.ok else
              f'<span class="bad">FAILED</span>: {e(report.reason)}')
    page.dl([
        ("Ledger file", f"<code>{e(report.ledger)}</code>"),
        ("Releases", value("n_entries", len(releases))),
        ("Integrity", f'<span data-key="integrity" data-value="{"ok" if report.ok else "failed"}">{status}</span>'),
        ("Keys used to verify", e(report.key_source)),
        ("Head (hash of the last entry)", f"<code>{e(report.head or '—')}</code>"),
        ("Spent", f"ρ {value('spent_rho', spent.rho)} (zCDP: the releases' ρ add), converted by OpenDP to "
                  f"ε {value('spent_epsilon', spent.epsilon)} at δ {value('spent_delta', spent.delta)}; the releases' "
                  f"ε's added up would be {value('spent_epsilon_sum', _f(report.spent.get('epsilon', 0.0)))}"),
        ("Cap", "none configured" if cap is None else
         f"ε {value('cap_epsilon', cap.epsilon)}, δ {value('cap_delta', cap.delta)}, ρ {value('cap_rho', cap.rho)}"),
    ])
    if report.key_source == "ledger directory":
        page.text("The signatures were checked against the keys the ledger folder itself holds: give the site's "
                  "public key from an independent copy (marg audit verify --key) for a real audit.", "note")
    elif report.key_source == "none":
        page.text("No key was available to check the signatures with: they are unverified.", "bad")
    if report.torn_tail:
        page.text("The ledger ended in an incomplete line (a crashed write), which is ignored.", "note")
    if any(math.isinf(_f(x["cost"].get("epsilon"))) for x in releases):
        page.text("∞: exact counts were released — no differential-privacy guarantee for those releases.", "note")

    page.h2("Timeline")
    page.table(["seq", "time (UTC)", "to", "tables", "statistics", "mechanism", "ε", "δ", "ρ", "total ε", "status"],
               [_timeline_row(x, report, running) for x in entries], key="timeline")
    _spend(page, releases, cap, running)

    page.h2("What each release contained")
    for x in releases:
        _release_detail(page, x)
    return page.render()


# ------------------------------------------------------------------------------ parts
def _is_release(x: dict) -> bool:
    return x.get("kind", "release") == "release"


def _status(seq: int, report: Any) -> str:
    """The verification status of entry ``seq`` as the report establishes it."""
    if not report.ok and report.first_bad_seq is not None:
        if seq == report.first_bad_seq:
            return f'<span class="bad">FAILED</span>: {e(report.reason)}'
        if seq > report.first_bad_seq:
            return '<span class="bad">not verified</span> (follows a failed entry)'
    if seq in report.unsigned:
        return "chain ok, unsigned"
    return '<span class="ok">chain and signature ok</span>'


def _running(entries: list[dict]) -> dict[int, Any]:
    """The composed spend after each entry (``seq`` → PrivacyCost, ε at the cap then in force)."""
    from marg.errors import MargError
    from marg.marginals.accounting import PrivacyCost, Spend, cap_delta

    out, spend = {}, Spend()
    for x in entries:
        try:
            if _is_release(x):
                spend = spend.add(PrivacyCost.from_dict(x["cost"]))
            cap = PrivacyCost.from_dict(x["cap"]) if x.get("cap") else None
            out[int(x["seq"])] = spend.as_cost(cap_delta(cap))
        # a malformed entry (the report names it): no running total from there on
        except (MargError, KeyError, TypeError, ValueError):
            break
    return out


def _timeline_row(x: dict, report: Any, running: dict[int, Any]) -> list[str]:
    seq = int(x["seq"])
    st = f'<span data-key="status:{seq}" data-value="{_status_word(seq, report)}">{_status(seq, report)}</span>'
    if not _is_release(x):  # a cap entry (recorded budget), not a release
        capd = x.get("cap") or {}
        what = ("privacy cap set: " + ", ".join(f"{k} {_f(capd.get(k)):g}"
                                                for k in ("epsilon", "delta", "rho") if capd.get(k)))
        total = running.get(seq)
        return [value(f"seq:{seq}", seq), e(x.get("time", "")), "—", "0", e(what), "—", "—", "—", "—",
                e(_fmt_inf(total.epsilon) if total is not None else "—"), st]
    stats = x.get("statistics") or []
    names = ", ".join(s.get("name", "?") for s in stats[:6]) + (f", … ({len(stats)} in all)" if len(stats) > 6 else "")
    own = x.get("own_cost")
    if isinstance(own, dict):  # a shared-noise share (marginals.shared_noise): the cost shown is the study's guarantee
        names += (f" — shared noise: the cost is the study's guarantee (the secure sum, charged); this site's share "
                  f"alone: ε={_f(own.get('epsilon')):.4g}, ρ={_f(own.get('rho')):.4g}")
    c = x["cost"]
    return [value(f"seq:{seq}", seq), e(x.get("time", "")),
            e(x.get("recipient_name") or x.get("recipient") or "unsealed"),
            value(f"n_statistics:{seq}", len(stats)), e(names), e(x.get("mechanism", "")),
            value(f"epsilon:{seq}", _f(c.get("epsilon")), _inf_text(c.get("epsilon"))),
            value(f"delta:{seq}", _f(c.get("delta"))), value(f"rho:{seq}", _f(c.get("rho")), _inf_text(c.get("rho"))),
            _total_cell(seq, running), st]


def _total_cell(seq: int, running: dict[int, Any]) -> str:
    total = running.get(seq)
    if total is None:
        return "—"
    return value(f"cumulative_epsilon:{seq}", total.epsilon, "∞" if math.isinf(total.epsilon) else None)


def _status_word(seq: int, report: Any) -> str:
    html = _status(seq, report)
    return ("failed" if "FAILED" in html else "unverified" if "not verified" in html
            else "unsigned" if "unsigned" in html else "ok")


def _spend(page: Page, releases: list[dict], cap: Any, running: dict[int, Any]) -> None:
    """The cumulative (composed) spend plot(s): ε always, ρ too when zCDP is in play; exact releases noted."""
    releases = [x for x in releases if int(x["seq"]) in running]
    finite = [x for x in releases if not math.isinf(running[int(x["seq"])].epsilon)]
    if len(finite) < len(releases):
        first = next(int(x["seq"]) for x in releases if math.isinf(running[int(x["seq"])].epsilon))
        page.text(f"From release {first} on the spend is unbounded (exact counts left the site); the plot stops there.",
                  "bad")
    if not finite:
        return
    seqs = [int(x["seq"]) for x in finite]
    cap_eps = cap.epsilon if cap is not None and cap.epsilon > 0 else None
    page.figure(plots.spend(seqs, [running[s].epsilon for s in seqs], cap_eps, "ε"),
                "cumulative privacy spend (ε, composed in zCDP and converted by OpenDP) against the cap", "spend")
    rhos = [running[s].rho for s in seqs]
    if (cap is not None and cap.rho > 0) or any(r > 0 for r in rhos):
        page.figure(plots.spend(seqs, rhos, cap.rho if cap is not None and cap.rho > 0 else None, "ρ"),
                    "cumulative privacy spend (ρ, zCDP) against the cap", "spend_rho")


def _release_detail(page: Page, x: dict) -> None:
    stats = x.get("statistics") or []
    seq = int(x["seq"])
    digest = str(x.get("bundle") or "")[:16]
    extra = []
    if x.get("n_rows") is not None:
        extra.append(f"{value('n_rows:%d' % seq, int(x['n_rows']))} rows")
    if x.get("round"):
        extra.append(f"round <code>{e(x['round'])}</code>")
    page.p(f"<b>Release {value('detail_seq:%d' % seq, seq)}</b> ({e(x.get('time', ''))}) to "
           f"{e(x.get('recipient_name') or x.get('recipient') or 'nobody in particular (unsealed)')}, bundle "
           f"<code>{e(digest)}…</code>" + (", " + ", ".join(extra) if extra else "") + ":")
    rows = []
    for st in stats:
        name = st.get("name")
        shape = [int(s) for s in st.get("shape") or []]
        rows.append([e(name), e(st.get("kind", "counts")), e(" × ".join(map(str, st.get("clique") or []))),
                     value("cells:%d:%s" % (seq, name), math.prod(shape) if shape else 0,
                           " × ".join(map(str, shape)) or "—"),
                     e(st.get("mechanism")), value("std:%d:%s" % (seq, name), _f(st.get("std", 0.0)))])
    page.table(["statistic", "kind", "attributes", "shape", "mechanism", "noise std"], rows, key="release:%d" % seq,
               # cards on a phone: no column cut off
               folded=f"{len(stats)} statistics" if len(stats) > FOLD_STATISTICS else None)


def _inf_text(v: Any) -> str | None:
    return "∞" if math.isinf(_f(v)) else None


def _fmt_inf(v: float) -> str:
    return "∞" if math.isinf(v) else f"{v:g}"
