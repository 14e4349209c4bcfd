"""The reports render in headless Chromium at desktop and phone widths: not blank, not wider than the window."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("render_reports", ROOT / "bench" / "render_reports.py")
render = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render)

pytestmark = pytest.mark.xdist_group("chromium")  # one headless Chromium at a time under pytest -n


@pytest.mark.slow
def test_reports_render_in_chromium(tmp_path):
    if render.chromium() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from marg.demo import run_demo

    res = run_demo(tmp_path / "demo", echo=lambda s: None)
    problems = []
    pages = render.demo_pages(res)
    for path in pages:
        problems += render.check_page(path, tmp_path)
    assert not problems, problems
    assert len(list(tmp_path.glob("*.png"))) == 4 * len(pages)  # window and whole page, desktop and phone


def test_the_width_probe_catches_a_page_wider_than_the_window(tmp_path):
    if render.chromium() is None:
        pytest.skip("chromium is not installed")
    wide = tmp_path / "wide.html"
    wide.write_text('<!DOCTYPE html><html><body><div '
                    'style="width:3000px;height:50px;background:#000">x</div></body></html>')
    problems = render.check_page(wide, tmp_path)
    assert any("wider than the window" in p for p in problems)


def test_the_probe_catches_a_table_cut_off_on_a_phone(tmp_path):
    """Issue 26: on a phone the card's certificate column was cut off (its table scrolled sideways)."""
    if render.chromium() is None:
        pytest.skip("chromium is not installed")
    from marg.reports.html import Page

    page = Page("t")
    page.table(["candidate", "parameters", "score (the choice's criterion)", "certificate"],
               [["renyi", "defaults", "0.5166", "0.574 (W(h))"]], key="auto", cards=False)  # the old card's layout
    cut = tmp_path / "cut.html"
    cut.write_text(page.render().replace("<style>", "<style>th,td{white-space:nowrap}"), encoding="utf-8")
    assert any("tables cut off" in p and "auto" in p for p in render.check_page(cut, tmp_path))
    page = Page("t")
    page.table(["candidate", "parameters", "score (the choice's criterion)", "certificate"],
               [["renyi", "defaults", "0.5166", "0.574 (W(h))"]], key="auto")  # as the card now lays it out
    ok = tmp_path / "ok.html"
    ok.write_text(page.render(), encoding="utf-8")
    assert not render.check_page(ok, tmp_path)
