"""Reading a report as a test does: the HTML parsed (and checked self-contained), its data-key values."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET


def parse(path) -> ET.Element:
    """The report at ``path`` parsed, after checking that it is well-formed and self-contained."""
    text = path.read_text(encoding="utf-8")
    root = ET.fromstring(text.split("\n", 1)[1])  # well-formed (after the doctype line)
    # self-contained: no script, no external resource of any kind
    assert not list(root.iter("script")) and not list(root.iter("link")) and not list(root.iter("iframe"))
    for el in root.iter():
        for attr in ("src", "href"):
            v = el.get(attr)
            assert v is None or v.startswith("data:"), (el.tag, v)
    assert not re.search(r"https?://|url\(", text)
    return root


def values(root: ET.Element) -> dict[str, str]:
    """Every element's ``data-key`` -> its ``data-value``: the numbers a report states."""
    return {el.get("data-key"): el.get("data-value") for el in root.iter() if el.get("data-key")}
