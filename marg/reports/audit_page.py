"""The ledger page: a site's release history for its privacy officer, as one HTML file.

:func:`audit_page` renders the entries of a ledger (a timeline of releases: when, to whom,
which statistics, mechanism and cost), the cumulative privacy spend against the cap as a
plot, and the verification status of the hash chain, every entry and every signature
(:meth:`marg.protocols.ledger.Ledger.verify`).
"""

from __future__ import annotations

import math
from typing import Any

from . import plots
from .html import Page, e, value


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.inf


def audit_page(ledger: Any, public_key: Any = None) -> str:
    """The HTML page of ``ledger`` (a :class:`marg.protocols.ledger.Ledger`); ``public_key`` as
    for :meth:`Ledger.verify` (default: the key copies in the ledger folder, self-attested)."""
    entries = ledger.entries()
    cap = ledger.cap()
    spent = ledger.spent()
    report = ledger.verify(public_key=public_key, allow_unsigned=True)
    sites = sorted({x["site"] for x in entries})
    page = Page(f"Release ledger — {', '.join(sites) or 'no releases'}")

    page.h2("Summary")
    status = ('<span class="ok">verified</span>' if report.ok else
              f'<span class="bad">FAILED</span>: {e(report.reason)}')
    page.dl([
        ("Ledger file", f"<code>{e(report.ledger)}</code>"),
        ("Releases", value("n_entries", len(entries))),
        ("Integrity", f'<span data-key="integrity" data-value="{"ok" if report.ok else "failed"}">{status}</span>'),
        ("Keys used to verify", e(report.key_source)),
        ("Head (hash of the last entry)", f"<code>{e(report.head or '—')}</code>"),
        ("Spent", f"ε {value('spent_epsilon', spent.epsilon)}, δ {value('spent_delta', spent.delta)}, "
                  f"ρ {value('spent_rho', spent.rho)}"),
        ("Cap", "none configured" if cap is None else
         f"ε {value('cap_epsilon', cap.epsilon)}, δ {value('cap_delta', cap.delta)}, ρ {value('cap_rho', cap.rho)}"),
    ])
    if any(math.isinf(_f(x["cost"].get("epsilon"))) for x in entries):
        page.text("∞: exact counts were released — no differential-privacy guarantee for those releases.", "note")

    page.h2("Timeline")
    bad_seq = report.first_bad_seq if not report.ok else None
    rows = []
    for x in entries:
        seq = int(x["seq"])
        if bad_seq is not None and seq >= bad_seq:
            st = '<span class="bad">not verified</span>'
        elif seq in report.unsigned:
            st = "chain ok, unsigned"
        else:
            st = '<span class="ok">chain and signature ok</span>'
        stats = x.get("statistics") or []
        names = ", ".join(s.get("name", "?") for s in stats[:6]) + (f", … ({len(stats)} in all)" if len(stats) > 6 else "")
        c = x["cost"]
        rows.append([value(f"seq:{seq}", seq), e(x.get("time", "")), e(x.get("recipient_name") or x.get("recipient") or "unsealed"),
                     value(f"n_statistics:{seq}", len(stats)), e(names), e(x.get("mechanism", "")),
                     value(f"epsilon:{seq}", _f(c.get("epsilon")), "∞" if math.isinf(_f(c.get("epsilon"))) else None),
                     value(f"delta:{seq}", _f(c.get("delta"))), value(f"rho:{seq}", _f(c.get("rho"))),
                     value(f"cumulative_epsilon:{seq}", _f(x["cumulative"].get("epsilon")),
                           "∞" if math.isinf(_f(x["cumulative"].get("epsilon"))) else None), st])
    page.table(["seq", "time (UTC)", "to", "tables", "statistics", "mechanism", "ε", "δ", "ρ", "total ε", "status"],
               rows, key="timeline")

    finite = [x for x in entries if not math.isinf(_f(x["cumulative"].get("epsilon")))]
    if finite:
        cum = [_f(x["cumulative"].get("epsilon")) for x in finite]
        page.figure(plots.spend([x.get("time", "") for x in finite], cum, cap.epsilon if cap is not None and cap.epsilon > 0
                                else None, "ε"), "cumulative privacy spend against the cap", "spend")
    page.h2("What each release contained")
    for x in entries:
        stats = x.get("statistics") or []
        seq = int(x["seq"])
        digest = str(x.get("bundle", ""))[:16]
        page.p(f"<b>Release {value('detail_seq:%d' % seq, seq)}</b> ({e(x.get('time', ''))}), bundle <code>{e(digest)}…</code>:")
        page.table(["statistic", "mechanism", "noise std"],
                   [[e(st.get("name")), e(st.get("mechanism")), value("std:%d:%s" % (seq, st.get("name")), _f(st.get("std", 0.0)))]
                    for st in stats], key="release:%d" % seq)
    return page.render()
