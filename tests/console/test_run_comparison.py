"""A test run compared with another in the tester Console: its baseline at once, or an earlier
run chosen; the cases in the order a reviewer reads them (regressed, fixed, …, the same ones
folded last), each with the other run's k/N → this run's and its p-value; and a regressed
case's replies side by side, turn by turn, as text: two columns on a wide screen, stacked and
labelled within a phone's width."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.console.api import LiveApi
from tests.console.server import LiveServer
from tests.console.suite_runs import HOSTILE_REPLY, Compared, store_compared, store_run
from tests.console.test_phone import small_targets
from tests.support.console_pages import PHONE, OpenConsole
from tests.support.model_servers import FakeModel


@pytest.fixture
def compared(tester_api: LiveApi, model: FakeModel) -> Compared:
    return store_compared(tester_api, model)


def open_run(page: Page, server: LiveServer, run: dict[str, Any]) -> None:
    page.goto(f"{server.tester_url}/#run={run['id']}")
    expect(page.get_by_role("heading", name=f"Run {run['id']}", exact=True)).to_be_visible()


def compared_case(page: Page, name: str) -> Locator:
    return page.locator("#comparison .compared").filter(has_text=f" · {name}")


def open_replies(page: Page, name: str) -> Locator:
    """The case's replies opened; the turns shown."""
    row = compared_case(page, name)
    row.get_by_text("Replies side by side").click()
    turns = row.locator(".reply-turn")
    expect(turns).to_have_count(1)
    return row


def test_run_compared_with_its_baseline_lists_regressions_first_and_replies_side_by_side(
    open_console: OpenConsole, console_server: LiveServer, compared: Compared
) -> None:
    """Against its baseline at once: greets (regressed) before refuses (fixed), each with the
    baseline's k/N → this run's and its p-value; thanks folded among "1 case the same". The
    regressed case's replies: the sent text once, then the baseline's reply on the left and
    this run's on the right, markup shown as text."""
    page = open_console("tester")
    open_run(page, console_server, compared.second)
    expect(page.get_by_label("Compare with")).to_have_value(str(compared.first["id"]))
    expect(page.locator("#comparison-title")).to_have_text(
        f"Run {compared.second['id']} against run {compared.first['id']}, its baseline"
    )
    rows = page.locator("#compared-cases > .compared")
    expect(rows.locator(".case-name")).to_have_text(
        [f"{compared.suite} · greets", f"{compared.suite} · refuses"]
    )
    expect(rows.locator(".change")).to_have_text(["regressed", "fixed"])
    greets, refuses = compared_case(page, "greets"), compared_case(page, "refuses")
    expect(greets.locator(".compared-tally")).to_have_text(re.compile(r"^10/10 → .*2/10$"))
    expect(greets.locator(".change-evidence")).to_have_text("p = 0.00036")
    expect(refuses.locator(".compared-tally")).to_have_text(re.compile(r"^0/5 → .*5/5$"))
    expect(refuses.locator(".change-evidence")).to_have_text("p = 0.004")
    expect(greets).to_have_css("border-left-color", "rgb(179, 38, 30)")

    same = page.locator("#compared-same")
    expect(same.locator("summary")).to_have_text("1 case the same")
    expect(same.locator(".compared")).to_have_count(0)
    same.locator("summary").click()
    expect(same.locator(".compared .case-name")).to_have_text(f"{compared.suite} · thanks")
    expect(same.locator(".change")).to_have_text("same")

    row = open_replies(page, "greets")
    turn = row.locator(".reply-turn")
    expect(turn.locator(".reply-text.sent")).to_have_text("hello")
    other, mine = turn.locator(".reply-side").nth(0), turn.locator(".reply-side").nth(1)
    expect(other.locator(".reply-side-label")).to_have_text(f"Run {compared.first['id']}")
    expect(other.locator(".reply-text.reply")).to_have_text(compared.old_greeting)
    expect(mine.locator(".reply-side-label")).to_have_text(
        f"Run {compared.second['id']} (this run)"
    )
    expect(mine.locator(".reply-text.reply")).to_have_text(HOSTILE_REPLY)
    expect(row.locator(".replies img")).to_have_count(0)
    expect(row.locator(".reply-repeat")).to_have_text(
        [
            re.compile(rf"^Run {compared.first['id']}: repeat 1, passed · in thread \d+$"),
            re.compile(rf"^Run {compared.second['id']} \(this run\): repeat 1, failed · in "),
        ]
    )
    left, right = other.bounding_box(), mine.bounding_box()
    assert left is not None and right is not None
    assert left["x"] + left["width"] <= right["x"], (left, right)
    assert abs(left["y"] - right["y"]) < 1, (left, right)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_phone_replies_are_stacked_labelled_and_within_the_screen(
    open_console: OpenConsole, console_server: LiveServer, compared: Compared
) -> None:
    """At a phone's width, dark: the baseline's reply above this run's, each labelled with its
    run, nothing wider than the screen, every control a tap target."""
    page = open_console("tester", viewport=PHONE, dark=True)
    open_run(page, console_server, compared.second)
    expect(page.locator("#compared-cases .change")).to_have_text(["regressed", "fixed"])
    expect(compared_case(page, "greets")).to_have_css("border-left-color", "rgb(255, 138, 128)")
    assert small_targets(page) == []
    row = open_replies(page, "greets")
    sides = row.locator(".reply-side")
    expect(sides.locator(".reply-side-label")).to_have_text(
        [f"Run {compared.first['id']}", f"Run {compared.second['id']} (this run)"]
    )
    expect(sides.nth(1).locator(".reply-text.reply")).to_have_text(HOSTILE_REPLY)
    above, below = sides.nth(0).bounding_box(), sides.nth(1).bounding_box()
    assert above is not None and below is not None
    assert above["y"] + above["height"] <= below["y"], (above, below)
    for box in (above, below):
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    pane = "document.getElementById('runs-pane')"
    assert page.evaluate(f"{pane}.scrollWidth <= {pane}.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert small_targets(page) == []


def test_run_without_baseline_is_compared_with_the_earlier_run_chosen(
    open_console: OpenConsole, console_server: LiveServer, tester_api: LiveApi, compared: Compared
) -> None:
    """No baseline: nothing is compared until asked; the earlier runs are offered newest first,
    the newest of the same suites chosen; Compare asks the server, whose rule finds greets
    regressed and refuses fixed against the run chosen, as against a baseline."""
    records = tester_api.get(f"/api/suite-runs/{compared.second['id']}?limit=500")["cases"]
    keys = ("suite", "case", "instance", "verdict", "passed_runs", "runs", "threads")
    unrelated = store_run(tester_api, [f"{compared.suite} other"], [])
    again = store_run(
        tester_api, [compared.suite], [{key: r[key] for key in keys} for r in records]
    )
    page = open_console("tester")
    open_run(page, console_server, again)
    choice = page.get_by_label("Compare with")
    expect(choice).to_have_value(str(compared.second["id"]))
    expect(choice.locator("option").first).to_have_text(re.compile(rf"^Run {unrelated['id']} · "))
    expect(page.locator("#comparison-state")).to_have_text(
        "No baseline: choose an earlier run and compare."
    )
    expect(page.locator("#comparison-result")).to_be_hidden()

    choice.select_option(str(compared.first["id"]))
    page.get_by_role("button", name="Compare", exact=True).press("Enter")
    expect(page.locator("#comparison-title")).to_have_text(
        f"Run {again['id']} against run {compared.first['id']}"
    )
    expect(page.locator("#compared-cases .change")).to_have_text(["regressed", "fixed"])
    expect(compared_case(page, "greets").locator(".change-evidence")).to_have_text("p = 0.00036")
