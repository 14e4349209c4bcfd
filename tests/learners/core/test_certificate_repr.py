"""``print(dcc.certificate_)`` is one short line (issue 37, item 7): the bound, its kind and coverage,
and the box summarised — the old dataclass repr printed every cell bound (about 5,000 characters on
breast-w); the box stays whole in ``.box`` and ``record()``."""

from __future__ import annotations

import marg
from marg.marginals.draft import draft_codebook
from marg.marginals.sources import open_source
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import plan_cliques


def test_certificate_prints_short_with_details_on_demand(datasets):
    path = datasets / "breast-w" / "breast-w.tsv.gz"
    cb = draft_codebook(path, "target")
    with open_source(path) as src:
        tables, _ = src.count(cb, plan_cliques(cb, "all"))
    dcc = marg.DCC(greedy=True, max_edges=2).fit(Summary(cb, tables))
    cert = dcc.certificate_
    text = str(cert)
    assert text == repr(cert) and "\n" not in text and len(text) < 200, text
    assert text.startswith(f"Certificate(value={cert.value:.4f}, kind='W(h)', coverage=0.95") and "see .box>" in text
    assert len(cert.box) > 0 and len(repr(cert.box)) > 1000  # the details are all there, on demand
    assert cert.record()["box"] == [dict(t) for t in cert.box]
