"""The `--html` report of a conversation-test run, opened from a file in Chromium: it shows
every case, and asks nothing of any server, whatever the assistant replied."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Request

from tester.suites.client import Outcome, Reply
from tester.suites.expectations import Failure
from tester.suites.files import Case, Suite
from tester.suites.html_report import write_html
from tester.suites.judge import Vote
from tester.suites.runner import CaseReport, Plan, Repeat, TestRun, TurnRecord
from tests.support.console_pages import DESKTOP, PHONE

# Replies that would fetch something if the page rendered them instead of showing them.
HOSTILE = [
    '<img src="http://198.51.100.7/pixel.png">',
    "![chart](http://198.51.100.7/chart.png)",
    "<script>fetch('http://198.51.100.7/x')</script>",
    '<link rel="stylesheet" href="http://198.51.100.7/s.css">',
    '<iframe src="http://198.51.100.7/"></iframe>',
]


def report(name: str, reply: str, *, passed: bool) -> CaseReport:
    suite = Suite(name="report", project="qa", cases=(), file="report.suite.toml")
    case = Case(name=name, turns=(), instance=None, line=1)
    message = {"id": 2, "usage": {"prompt_tokens": 9, "completion_tokens": 4}, "model": "m"}
    outcome = Outcome(
        {"id": 1}, Reply(reply, message, seconds=1.5, first_token_seconds=0.2), "answered", None
    )
    failure = None if passed else Failure("the reply contains 'Paris'", reply)
    turn = TurnRecord(1, "hello <b>there</b>", outcome, failure, (Vote(passed, f"<i>{name}</i>"),))
    repeat = Repeat(1, thread=7, instance="assistant", turns=[turn], failure=failure)
    repeat.failed_turn = None if passed else 1
    return CaseReport(Plan(suite, case, None, 1), [repeat], "pass" if passed else "fail")


def test_html_report_opened_from_a_file_fetches_nothing(browser: Browser, tmp_path: Path) -> None:
    test_run = TestRun(
        reports=[
            report(f"case {number}", text, passed=number % 2 == 0)
            for number, text in enumerate(HOSTILE)
        ]
    )
    path = tmp_path / "report.html"
    write_html(test_run, [r.plan for r in test_run.reports], path, run_id=12, baseline=None)
    context = browser.new_context()
    page = context.new_page()
    asked: list[str] = []

    def note(request: Request) -> None:
        asked.append(request.url)

    page.on("request", note)
    try:
        page.goto(path.as_uri())
        page.wait_for_load_state("networkidle")
        text = page.text_content("body") or ""
        elements = page.evaluate("document.querySelectorAll('img, script, iframe, link').length")
    finally:
        context.close()
    assert asked == [path.as_uri()]
    assert elements == 0
    for hostile in HOSTILE:
        assert hostile in text
    assert "hello <b>there</b>" in text
    assert "judge: pass — <i>case 0</i>" in text
    assert "Conversation tests — run 12" in text
    assert "3 pass, 0 flaky, 2 fail, 0 error" in text
    assert "tokens 9 in, 4 out" in text


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_html_report_wraps_a_reply_of_one_long_line(
    browser: Browser, tmp_path: Path, viewport: dict[str, int]
) -> None:
    """A reply of 120,000 characters without a space, sent again as the turn, quoted by the
    miss and the judge, wraps inside the page: the page is no wider than the window."""
    line = "x" * 120_000
    failing = report(line, line, passed=False)
    long_case = replace(failing.plan.case, name="c" * 80)
    failing.plan = replace(failing.plan, case=long_case)
    turn = replace(failing.repeats[0].turns[0], sent=line, votes=(Vote(False, line),))
    failing.repeats[0].turns[0] = turn
    test_run = TestRun(reports=[failing, report("short", "Hello.", passed=True)])
    path = tmp_path / "report.html"
    write_html(test_run, [r.plan for r in test_run.reports], path, run_id=12, baseline=None)
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    try:
        page.goto(path.as_uri())
        widths = page.evaluate(
            "({ page: document.documentElement.scrollWidth, window: window.innerWidth })"
        )
    finally:
        context.close()
    assert widths["page"] <= widths["window"], widths
