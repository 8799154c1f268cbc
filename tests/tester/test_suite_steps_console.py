"""The tester Console's Test runs view shows a stored case's steps (the tool calls each turn
made), in Debian's Chromium driven by Playwright, after a real `testassistant` run against a
`manage.py serve` with the offline backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.console.browser import launched, require_browser
from tests.support.served import Served
from tests.support.suite_runs import run_testassistant, write_suite
from tests.tester.test_suite_steps_live import BOOKED, STEP


@pytest.fixture
def browser() -> Iterator[Browser]:
    with launched(require_browser()) as started:
        yield started


def test_test_run_shows_a_cases_steps_when_opened(
    suite_server: Served, browser: Browser, tmp_path: Path
) -> None:
    ran = run_testassistant(write_suite(tmp_path, BOOKED), "--url", suite_server.url, "--json")
    run_id = ran.json_lines()[-1]["summary"]["run"]
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{suite_server.url}/#run={run_id}")

    case = page.locator(".case").filter(has_text="steps · refused as a test conversation")
    steps = case.locator("details.case-steps")
    expect(steps.locator("summary")).to_have_text("Steps: 1 call in 1 turn")
    # Drawn when opened, not before.
    expect(steps.locator(".step")).to_have_count(0)
    steps.locator("summary").click()
    expect(steps.locator(".steps-where")).to_have_text("Repeat 1 · turn 1")
    expect(steps.locator(".step")).to_have_text(STEP)
    expect(steps.locator(".step")).to_have_attribute("data-outcome", "refused")
    # The failing case shows its steps too, beside the failure naming the call.
    failed = page.locator(".case").filter(has_text="steps · expects it created")
    expect(failed.locator(".failure-text.expected")).to_contain_text(
        "only calls among: create_task with outcome ok"
    )
    expect(failed.locator("details.case-steps summary")).to_have_text("Steps: 1 call in 1 turn")
    page.close()
    assert errors == []
