"""A tiny, escaping, well-formed HTML writer for self-contained reports.

:class:`Page` collects sections and renders an XHTML-compatible HTML5 document (every tag
closed, attributes quoted), so the result parses with an XML parser. Text and attribute
values are always escaped; images are embedded as ``data:`` URIs; there is no way to add a
script or an external resource.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any, Iterable, Sequence

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:1rem;color:#1b1f24;
line-height:1.45;max-width:76rem;margin-left:auto;margin-right:auto;box-sizing:border-box}
h1{font-size:1.5rem;margin:.2rem 0 1rem}h2{font-size:1.15rem;margin-top:1.6rem;border-bottom:1px solid #d0d7de}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:.4rem 0;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f5f7}img{max-width:100%;height:auto;display:block;margin:.5rem 0}
.note{background:#f6f8fa;border-left:4px solid #8c959f;padding:.5rem .8rem;margin:.6rem 0}
.ok{color:#116329;font-weight:600}.bad{color:#a40e26;font-weight:600}code{font-size:.85rem;word-break:break-all}
summary{cursor:pointer;margin:.4rem 0}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dt{font-weight:600}dd{margin:0;min-width:0;overflow-wrap:anywhere}
@media (max-width:600px){dl{grid-template-columns:1fr;gap:0}dd{margin-bottom:.5rem}
.scroll table{width:100%}th,td{overflow-wrap:break-word}
table.cards thead{display:none}table.cards,table.cards tbody,table.cards tr,table.cards td{
display:block;width:100%;box-sizing:border-box}
table.cards tr{border:1px solid #d0d7de;margin:.5rem 0}table.cards td{border:0;border-bottom:1px solid #eaeef2}
table.cards td{display:flex;gap:.6rem;overflow-wrap:anywhere}
table.cards td::before{content:attr(data-label);flex:0 0 6.5rem;font-weight:600;
font-size:.8rem;color:#57606a}}
"""
CARD_COLUMNS = 3
"""Tables with more columns than this show each row as a card on a phone (CSS only: each cell
says its column's header): four columns of words do not fit 390 px without breaking words."""


def fmt(v: Any) -> str:
    """A number as a report states it (4 significant decimals for floats)."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return (f"{v:.4g}" if abs(v) < 1e-3 and v != 0 else f"{v:.4f}".rstrip("0").rstrip(".") if abs(v) < 1e6
                else f"{v:.4g}")
    return str(v)


def value(key: str, v: Any, text: str | None = None) -> str:
    """A number in a ``<span data-key=… data-value=…>``: shown as ``text`` (default :func:`fmt`)."""
    raw = "" if v is None else (repr(float(v)) if isinstance(v, float) else str(v))
    return (f'<span data-key="{escape(key)}" '
            f'data-value="{escape(raw)}">{escape(text if text is not None else fmt(v))}</span>')


class Page:
    """Sections of a report, rendered by :meth:`render`."""

    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = []

    def h2(self, text: str) -> None:
        self.parts.append(f"<h2>{escape(text)}</h2>")

    def p(self, html_text: str, cls: str | None = None) -> None:
        """A paragraph of already-escaped HTML (build it with :func:`escape` and :func:`value`)."""
        self.parts.append(f'<p class="{cls}">{html_text}</p>' if cls else f"<p>{html_text}</p>")

    def text(self, text: str, cls: str | None = None) -> None:
        self.p(escape(text), cls)

    def dl(self, items: Iterable[tuple[str, str]]) -> None:
        """A definition list: (term text, already-escaped HTML)."""
        body = "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in items)
        self.parts.append(f"<dl>{body}</dl>")

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[str]], key: str | None = None,
              folded: str | None = None, cards: bool | None = None) -> None:
        """A table; cells are already-escaped HTML. ``folded``: show it closed under this summary
        line (an HTML ``<details>`` element: no script). ``cards``: each row a card on a phone
        (default: tables of more than :data:`CARD_COLUMNS` columns); else it scrolls sideways."""
        head = "".join(f"<th>{escape(h)}</th>" for h in headers)
        labels = [f' data-label="{escape(h)}"' for h in headers]
        body = "".join("<tr>" + "".join(f"<td{labels[k] if k < len(labels) else ''}>{c}</td>" for k, c in enumerate(r))
                       + "</tr>" for r in rows)
        attr = ((f' data-table="{escape(key)}"' if key else "")
                + (' class="cards"' if (len(headers) > CARD_COLUMNS if cards is None else cards) else ""))
        html = f'<div class="scroll"><table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
        self.parts.append(f"<details><summary>{escape(folded)}</summary>{html}</details>" if folded else html)

    def figure(self, png: bytes, alt: str, key: str) -> None:
        data = base64.b64encode(png).decode("ascii")
        self.parts.append(f'<img data-plot="{escape(key)}" alt="{escape(alt)}" src="data:image/png;base64,{data}"/>')

    def render(self) -> str:
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8"/>'
            '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
            f"<title>{escape(self.title)}</title><style>{CSS}</style></head>"
            f"<body><h1>{escape(self.title)}</h1>{''.join(self.parts)}</body></html>\n"
        )


def e(text: Any) -> str:
    """Escape any value for HTML text."""
    return escape(str(text))
