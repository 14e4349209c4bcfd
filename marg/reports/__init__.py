"""Human-readable reports: a model card (``marg report``) and a ledger page (``marg audit show --html``).

Both are one self-contained HTML file: inline CSS, plots embedded as PNG data URIs (drawn by
matplotlib), no script and no external resource. Every number a report states sits in an
element with a ``data-key`` attribute, so tests (and scripts) can read it back.
"""
