"""The comparison of an `--html` report, opened from a file in Chromium: the replies side by side
on a desktop and one above the other on a phone, never wider than the window whatever a reply
holds, readable in light and dark, and fetching nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Request

from tester.suites.html_report import write_html
from tests.support.comparisons import compared_run
from tests.support.console_pages import DESKTOP, PHONE

# A reply of one line without a space, and one that would fetch if rendered.
LONG = "x" * 50_000
FETCHING = '<img src="http://198.51.100.7/p.png">![p](http://198.51.100.7/q.png)'


def opened(browser: Browser, tmp_path: Path, **context: Any) -> tuple[Page, list[str]]:
    test_run, told = compared_run(LONG + FETCHING)
    path = tmp_path / "compared.html"
    plans = [report.plan for report in test_run.reports]
    write_html(test_run, plans, path, run_id=10, baseline=9, comparison=told)
    page = browser.new_context(**context).new_page()
    asked: list[str] = []

    def note(request: Request) -> None:
        asked.append(request.url)

    page.on("request", note)
    page.goto(path.as_uri())
    page.wait_for_load_state("networkidle")
    assert asked == [path.as_uri()]
    return page, asked


def first_pair_boxes(page: Page) -> dict[str, Any]:
    """Where the regression's first turn puts the baseline's side and this run's."""
    return page.evaluate(
        """() => {
          const pair = document.querySelector('.compared[data-change="regressed"] [data-turn]');
          const box = (side) => pair.querySelector(`[data-side="${side}"]`).getBoundingClientRect();
          const [before, now] = [box('before'), box('now')];
          return {before: {x: before.x, y: before.y}, now: {x: now.x, y: now.y},
                  page: document.documentElement.scrollWidth, window: innerWidth};
        }"""
    )


@pytest.mark.parametrize(
    ("viewport", "side_by_side"), [(DESKTOP, True), (PHONE, False)], ids=["desktop", "phone"]
)
def test_comparison_sides_fit_the_window(
    browser: Browser, tmp_path: Path, viewport: dict[str, int], side_by_side: bool
) -> None:
    page, _ = opened(browser, tmp_path, viewport=viewport)
    try:
        boxes = first_pair_boxes(page)
        images = page.evaluate("document.querySelectorAll('img, script').length")
    finally:
        page.context.close()
    assert boxes["page"] <= boxes["window"], boxes
    before, now = boxes["before"], boxes["now"]
    if side_by_side:
        assert before["y"] == now["y"] and before["x"] < now["x"], boxes
    else:
        assert before["x"] == now["x"] and before["y"] < now["y"], boxes
    assert images == 0


@pytest.mark.parametrize(
    ("scheme", "dark"), [("light", False), ("dark", True)], ids=["light", "dark"]
)
def test_comparison_reads_in_light_and_dark(
    browser: Browser, tmp_path: Path, scheme: str, dark: bool
) -> None:
    """A reply's bubble and its text follow the reader's scheme, text and background far
    apart in lightness; a missed reply keeps its outline in both."""
    page, _ = opened(browser, tmp_path, viewport=PHONE, color_scheme=scheme)
    try:
        colours = page.evaluate(
            """() => {
              const said = document.querySelector('.compared .said.missed');
              const style = getComputedStyle(said);
              const rgb = (c) => c.match(/[0-9.]+/g).slice(0, 3).map(Number);
              return {background: rgb(style.backgroundColor), text: rgb(style.color),
                      outline: style.outlineStyle};
            }"""
        )
    finally:
        page.context.close()

    def lightness(rgb: list[float]) -> float:
        return sum(rgb) / (3 * 255)

    background, text = lightness(colours["background"]), lightness(colours["text"])
    assert (background < 0.5) is dark and (text > 0.5) is dark, colours
    assert abs(background - text) > 0.5, colours
    assert colours["outline"] == "solid"
