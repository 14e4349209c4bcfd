"""Render the HTML reports in headless Chromium at desktop and phone widths, and check them.

Run: python bench/render_reports.py [--out bench/out/screenshots]

Writes the demo's model card (its default model's), a card of each learner fitted on the demo's
summary, and its ledger page (``marg demo``), screenshots each at 1280×900 (desktop) and 390×844 (phone), and the whole
page at both widths (``*-full.png``, to look at) with Debian's ``chromium --headless --no-sandbox --disable-gpu
--screenshot``, and fails (exit 1) if a page renders blank (nearly uniform pixels) or wider
than its window, or holds a table wider than its box (a column a phone reader would have to
scroll to) (``document.documentElement.scrollWidth > innerWidth``, read from
``--dump-dom`` of a copy of the page with a one-line probe script added). tests/marg/test_render.py
runs the same check in CI.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
PROBE = ("<script>addEventListener('load',function(){document.body.setAttribute('data-overflow',"
         "String(document.documentElement.scrollWidth-innerWidth));document.body.setAttribute('data-height',"
         "String(document.documentElement.scrollHeight));var cut=[];document.querySelectorAll('table').forEach("
         "function(t){var "
         "p=t.parentElement;if(t.offsetWidth>p.clientWidth+1)cut.push(t.getAttribute('data-table')||'?')});"
         "document.body.setAttribute('data-cut',cut.join(' '))})</script>")
"""Reports the page's overflow, its height and the tables wider than their box (a column the
reader must scroll sideways to, e.g. a certificate cut off on a phone)."""
MAX_HEIGHT = 16000
"""Tallest full-page screenshot (px): the page's own height up to this."""


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def check_page(page: Path, out_dir: Path) -> list[str]:
    """Screenshots of ``page`` at every width into ``out_dir``; the problems found (empty: none)."""
    import numpy as np
    from matplotlib.image import imread

    exe = chromium()
    if exe is None:
        return ["chromium not found"]
    base = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"]
    problems = []
    with tempfile.TemporaryDirectory() as d:
        probed = Path(d) / page.name
        probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
        for name, (w, h) in WIDTHS.items():
            shot = out_dir / f"{page.stem}-{name}.png"
            _run(base + [f"--window-size={w},{h}", f"--screenshot={shot}", page.resolve().as_uri()])
            if not shot.exists():
                problems.append(f"{page.name} at {name}: no screenshot")
                continue
            img = imread(shot)
            if float(np.std(img[..., :3])) < 0.02:
                problems.append(f"{page.name} at {name}: blank ({shot})")
            dom = _run(base + [f"--window-size={w},{h}", "--virtual-time-budget=3000", "--dump-dom",
                               probed.resolve().as_uri()])
            m = re.search(r'data-overflow="(-?\d+)"', dom.stdout)
            if m is None:
                problems.append(f"{page.name} at {name}: the width probe did not run")
                continue
            if int(m.group(1)) > 0:
                problems.append(f"{page.name} at {name}: {m.group(1)} px wider than the window")
            cut = re.search(r'data-cut="([^"]*)"', dom.stdout)
            if cut is not None and cut.group(1).strip():
                problems.append(f"{page.name} at {name}: tables cut off (wider than the page, scrolled sideways): "
                                f"{cut.group(1)}")
            # the whole page at this width, to look at (the closing note names these)
            height = int(re.search(r'data-height="(\d+)"', dom.stdout).group(1))
            full = out_dir / f"{page.stem}-{name}-full.png"
            _run(base + [f"--window-size={w},{min(max(height, h), MAX_HEIGHT)}", f"--screenshot={full}",
                         page.resolve().as_uri()])
            if not full.exists():
                problems.append(f"{page.name} at {name}: no full-page screenshot")
    return problems


LEARNER_CARDS = ("mrc", "dcc", "nb", "renyi", "boost")
"""Learners whose card is rendered beside the demo's own (its ``auto`` model's) card."""


def demo_pages(res: dict, learners: tuple[str, ...] = LEARNER_CARDS) -> list[Path]:
    """The demo's two reports (its auto model's card and a ledger page), plus a card of each of
    ``learners`` fitted on the demo's summary and evaluated on north's held-out rows."""
    import marg

    pages = [*res["reports"].values()]
    for name in learners:
        model = res["models"][name] if name in res["models"] else marg.learn(res["summary"], name)
        pages.append(marg.model_card(model, res["workdir"] / "learner" / f"{name}-card.html",
                                     data=res["files"]["north"]["test"]))
    return pages


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" / "screenshots"))
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from marg.demo import run_demo

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        res = run_demo(Path(d) / "demo", echo=lambda s: None)
        problems = []
        for path in demo_pages(res):
            problems += check_page(path, out)
    for p in sorted(out.glob("*.png")):
        print(f"screenshot: {p}")
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print("every page renders, non-blank, within the window and with no table cut off, at desktop and phone widths")


if __name__ == "__main__":
    main()
