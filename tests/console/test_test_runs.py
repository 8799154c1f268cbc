"""Test runs in the tester Console: the stored history of conversation-test runs (the tester
listener's `/api/suite-runs`), its runs with their counts, tokens and cost, a run's cases with
verdict, k/N, change against the baseline, failures shown as text, tokens and cost and the
judge's votes, and each case's threads opened in the Console, archived or not. The human
Console has no such view and never asks for it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, Request, expect

from tests.console.api import LiveApi
from tests.console.pages import create_project, messages, unique
from tests.console.server import LiveServer
from tests.console.suite_runs import (
    HOSTILE,
    INVALID_REASON,
    History,
    Spent,
    case,
    runner_thread,
    store_history,
    store_run,
    store_spent,
)
from tests.console.test_phone import small_targets
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole


@pytest.fixture
def history(tester_api: LiveApi) -> History:
    return store_history(tester_api)


def run_entry(page: Page, run: dict[str, Any]) -> Locator:
    return page.get_by_role("list", name="Test runs").get_by_role("link", name=f"Run {run['id']} ")


def at(project: int, thread: dict[str, Any]) -> re.Pattern[str]:
    """The Console's address of a thread in its project."""
    return re.compile(rf"/#project={project}&thread={thread['id']}$")


def case_item(page: Page, suite: str, name: str) -> Locator:
    return page.locator(".case").filter(has_text=f"{suite} · {name}")


def test_tester_console_lists_runs_with_counts_and_regressions(
    open_console: OpenConsole, history: History
) -> None:
    """The header's "Test runs" opens the list, newest first: each run's suites and counts in
    their verdicts' colours, and "regressed N" when a run regressed."""
    page = open_console("tester")
    page.get_by_role("link", name="Test runs").click()
    expect(page.get_by_role("heading", name="Test runs")).to_be_visible()
    expect(page.locator("#thread-pane")).to_be_hidden()
    assert page.evaluate("location.hash") == "#runs"

    second, first = run_entry(page, history.second), run_entry(page, history.first)
    expect(second).to_contain_text(history.suite)
    expect(second.locator(".count")).to_have_text(["2 pass", "1 fail"])
    expect(second.locator('.count[data-verdict="fail"]')).to_have_css("color", "rgb(179, 38, 30)")
    expect(second.locator(".regressed")).to_have_text("regressed 1")
    expect(first.locator(".count")).to_have_text(["1 pass", "1 fail"])
    expect(first.locator(".regressed")).to_have_count(0)
    ids = page.locator(".test-run-choice").evaluate_all("links => links.map((a) => +a.dataset.id)")
    assert ids.index(history.second["id"]) < ids.index(history.first["id"])


def test_run_shows_cases_with_verdict_tally_and_change(
    open_console: OpenConsole, history: History
) -> None:
    """A run compared with a baseline shows each case's verdict, k/N and change (regressed,
    fixed, new); a run without one shows no change at all."""
    page = open_console("tester")
    page.get_by_role("link", name="Test runs").click()
    run_entry(page, history.second).click()
    expect(page.get_by_role("heading", name=f"Run {history.second['id']}")).to_be_visible()
    expect(page.locator("#test-run-facts")).to_contain_text(
        f"compared with run {history.first['id']}"
    )

    greets = case_item(page, history.suite, "greets")
    expect(greets.locator(".verdict")).to_have_text("fail")
    expect(greets.locator(".tally")).to_contain_text("2/10")
    expect(greets.locator(".interval")).to_have_text("95% interval 6–51%")
    expect(greets.locator(".change")).to_have_text("regressed")
    expect(greets.locator(".change-evidence")).to_have_text("p = 0.00036 against 10/10")
    expect(greets.locator(".failure-where")).to_have_text("Repeat 1 · the conversation")
    refuses = case_item(page, history.suite, "refuses")
    expect(refuses.locator(".verdict")).to_have_text("pass")
    expect(refuses.locator(".tally")).to_contain_text("5/5")
    expect(refuses.locator(".change")).to_have_text("fixed")
    expect(refuses.locator(".change-evidence")).to_have_text("p = 0.004 against 0/5")
    expect(case_item(page, history.suite, "remembers").locator(".change")).to_have_text("new")

    page.get_by_role("link", name=f"run {history.first['id']}", exact=True).click()
    expect(page.get_by_role("heading", name=f"Run {history.first['id']}")).to_be_visible()
    expect(page.locator("#test-run-facts")).to_contain_text("no baseline")
    expect(page.locator(".case")).to_have_count(2)
    expect(page.locator(".case .change")).to_have_count(0)
    page.go_back()
    expect(page.get_by_role("heading", name=f"Run {history.second['id']}")).to_be_visible()


def test_run_shows_a_drop_within_noise_and_a_halted_end(
    open_console: OpenConsole, tester_api: LiveApi, console_server: LiveServer
) -> None:
    """3/3 → 0/3 is no significant drop (p = 0.05): the case is `same`, "within noise", its
    interval shown; a run its client halted says so, with why, in the list and the run."""
    suite = unique("noise")
    project = tester_api.create_project(unique("qa"))
    thread = runner_thread(tester_api, project, unique("answers"))
    first = store_run(tester_api, [suite], [case(suite, "answers", thread, passed=3, runs=3)])
    halted = store_run(
        tester_api,
        [suite],
        [case(suite, "answers", thread, verdict="fail", passed=0, runs=3)],
        compare=first["id"],
        halted="interrupted: the client was stopped (Ctrl-C)",
    )
    page = open_console("tester")
    page.get_by_role("link", name="Test runs").click()
    expect(run_entry(page, halted).locator(".test-run-halted")).to_have_text("halted")
    page.goto(f"{console_server.tester_url}/#run={halted['id']}")
    facts = page.locator("#test-run-facts")
    expect(facts).to_contain_text("halted")
    expect(facts).to_contain_text(": interrupted: the client was stopped (Ctrl-C)")
    expect(facts).to_contain_text(f"compared with run {first['id']} at alpha 0.05")
    answers = case_item(page, suite, "answers")
    expect(answers.locator(".interval")).to_have_text("95% interval 0–56%")
    expect(answers.locator(".change")).to_have_text("same")
    expect(answers.locator(".change-evidence")).to_have_text("within noise (p = 0.05 against 3/3)")


def test_failure_expected_and_actual_show_as_text(
    open_console: OpenConsole, history: History, console_server: LiveServer
) -> None:
    """A failure's expected and actual are the runner's text, never markup: `<b>` shows as
    written and makes no element. A case's further failures open from a disclosure."""
    page = open_console("tester")
    page.goto(f"{console_server.tester_url}/#run={history.first['id']}")
    refuses = case_item(page, history.suite, "refuses")
    expect(refuses.locator(".failure-where").first).to_have_text("Repeat 1 · turn 1")
    expect(refuses.locator(".failure-text.expected").first).to_have_text('contains "No task"')
    expect(refuses.locator(".failure-text.actual").first).to_have_text(HOSTILE)
    expect(refuses.locator(".failure-text b, .failure-text img")).to_have_count(0)

    refuses.get_by_text("1 more failure").click()
    expect(refuses.locator(".failure-text.actual")).to_have_text([HOSTILE, "Created task"])


def test_case_thread_link_opens_archived_thread_in_its_project(
    open_console: OpenConsole, history: History
) -> None:
    """A case's thread link opens that thread in the Console: its project chosen, the list
    showing archived threads (the runner archived it), the address its place; Back returns to
    the run."""
    page = open_console("tester")
    # Another project is chosen, so the thread's own is not.
    create_project(page, unique("elsewhere"))
    page.get_by_role("link", name="Test runs").click()
    run_entry(page, history.first).click()
    greets = case_item(page, history.suite, "greets")
    greets.get_by_role("link", name=f"thread {history.passed_thread['id']}").click()

    expect(page.get_by_role("heading", name=history.passed_thread["name"])).to_be_visible()
    expect(messages(page).locator('[data-from="tester"]')).to_have_count(1)
    expect(page.get_by_label("Show archived threads")).to_be_checked()
    expect(page.get_by_role("button", name="Unarchive")).to_be_visible()
    project = page.get_by_role("list", name="Projects", exact=True).locator('[aria-current="true"]')
    expect(project).to_have_attribute("data-id", str(history.project))
    expect(page).to_have_url(at(history.project, history.passed_thread))

    page.go_back()
    expect(page.get_by_role("heading", name=f"Run {history.first['id']}")).to_be_visible()


def test_thread_alone_in_address_opens_it_on_load(
    open_console: OpenConsole, history: History, console_server: LiveServer
) -> None:
    """`#thread=ID` alone, as a link names it, opens the thread in its own project on load too,
    current or archived."""
    page = open_console("tester")
    for thread in (history.failed_thread, history.passed_thread):
        page.goto(f"{console_server.tester_url}/#thread={thread['id']}")
        page.reload()
        expect(page.get_by_role("heading", name=thread["name"])).to_be_visible()
        expect(page.get_by_label("Show archived threads")).to_be_checked(
            checked=thread is history.passed_thread
        )
        expect(page).to_have_url(at(history.project, thread))


@pytest.fixture
def spent(tester_api: LiveApi) -> Spent:
    return store_spent(tester_api)


RUN_SPENT = "tokens 1,250 in, 352 out · cost $0.00645 (1 turn without usage, 1 without a price)"
# The colour of an invalid vote's word: the amber of flaky, light and dark (console.css).
WARN = {False: "rgb(154, 91, 0)", True: "rgb(240, 180, 92)"}


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_run_and_cases_tell_tokens_and_cost_and_unknown_is_never_zero(
    open_console: OpenConsole, spent: Spent, dark: bool
) -> None:
    """Each run in the list and on its page, and each case, tell their tokens and cost as the
    runner does: a priced case its amount, a case whose model has no price "cost unknown" and
    why, a case whose backend recorded no usage "tokens unknown"; the run sums what is known and
    counts the rest, never a zero in its place."""
    page = open_console("tester", dark=dark)
    page.get_by_role("link", name="Test runs").click()
    expect(run_entry(page, spent.run).locator(".spend")).to_have_text(RUN_SPENT)
    run_entry(page, spent.run).click()
    expect(page.locator("#test-run-cost")).to_have_text(RUN_SPENT)
    told = {
        "priced": "tokens 1,200 in, 345 out · cost $0.00645",
        "unpriced": "tokens 50 in, 7 out · cost unknown (1 turn without a price)",
        "judged": "tokens unknown · cost unknown (1 turn without usage)",
    }
    for name, spend in told.items():
        expect(case_item(page, spent.suite, name).locator(".case-meta .spend")).to_have_text(spend)
    # The judge graded one case only; the others have no votes to show.
    expect(page.locator("details.case-judge")).to_have_count(1)
    judged = case_item(page, spent.suite, "judged").locator("details.case-judge")
    judged.locator("summary").click()
    expect(judged.locator('.vote[data-vote="invalid"] .vote-label')).to_have_css(
        "color", WARN[dark]
    )


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_judge_votes_show_each_verdict_and_reason_under_the_turn_it_graded(
    open_console: OpenConsole, spent: Spent, viewport: dict[str, int]
) -> None:
    """A judged case says how many votes the judge cast and how many were invalid; opened from
    the keyboard, each vote shows pass, fail or invalid with its reason, as text, under the
    repeat and turn (or the whole conversation) it graded; on a phone the long reason wraps,
    nothing scrolls sideways and every control is a tap target."""
    page = open_console("tester", viewport=viewport)
    page.get_by_role("link", name="Test runs").click()
    run_entry(page, spent.run).click()
    judged = case_item(page, spent.suite, "judged").locator("details.case-judge")
    summary = judged.locator("summary")
    expect(summary).to_have_text("Judge: 4 votes, 1 invalid")
    # Drawn when opened, not before.
    expect(judged.locator(".vote")).to_have_count(0)
    summary.focus()
    page.keyboard.press("Enter")
    expect(judged.locator(".votes-where")).to_have_text(
        ["Repeat 1 · turn 1", "Repeat 1 · the conversation"]
    )
    votes = judged.locator(".vote")
    expect(votes.locator(".vote-label")).to_have_text(["pass", "invalid", "pass", "fail"])
    expect(votes.locator(".vote-reason")).to_have_text(
        ["names Paris", INVALID_REASON, "says Paris", "rude at the end"]
    )
    expect(votes.nth(1)).to_have_attribute("data-vote", "invalid")
    expect(votes.nth(3)).to_have_attribute("data-vote", "fail")
    expect(judged.locator(".vote-reason b")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    if viewport is PHONE:
        assert small_targets(page) == []


def test_older_runs_are_paged(open_console: OpenConsole, tester_api: LiveApi) -> None:
    """The list shows a page of runs; "Show older runs" adds the ones before it."""
    suite = unique("paged")
    runs = [store_run(tester_api, [suite], []) for _ in range(51)]
    page = open_console("tester")
    page.get_by_role("link", name="Test runs").click()
    expect(run_entry(page, runs[-1])).to_be_visible()
    expect(run_entry(page, runs[1])).to_be_visible()
    expect(run_entry(page, runs[0])).to_have_count(0)
    page.get_by_role("button", name="Show older runs").click()
    expect(run_entry(page, runs[0])).to_be_visible()
    expect(run_entry(page, runs[0])).to_contain_text("no cases")


def test_run_cases_are_paged_and_more_are_shown_on_asking(
    open_console: OpenConsole, tester_api: LiveApi
) -> None:
    """A run's cases come a page at a time (here two, their records near the bound of one
    answer); "Show more cases" adds the next page below them, and goes once none is left."""
    suite = unique("large")
    big = {"instance": "", "verdict": "pass", "passed_runs": 1, "runs": 1}
    records = [
        {"suite": suite, "case": f"large {n}", **big, "repeats": [{"text": "x" * 190_000}]}
        for n in range(1, 4)
    ]
    run = store_run(tester_api, [suite], records)
    page = open_console("tester")
    page.get_by_role("link", name="Test runs").click()
    run_entry(page, run).click()
    cases = page.locator("#test-run-cases > .case")
    expect(cases).to_have_count(2)
    expect(cases.locator(".case-name")).to_have_text([f"{suite} · large 1", f"{suite} · large 2"])
    page.get_by_role("button", name="Show more cases").click()
    expect(cases).to_have_count(3)
    expect(cases.nth(2).locator(".case-name")).to_have_text(f"{suite} · large 3")
    expect(page.get_by_role("button", name="Show more cases")).to_be_hidden()


def test_phone_test_runs_fill_the_screen_with_tap_targets(
    open_console: OpenConsole, history: History
) -> None:
    """On a phone the runs and a run fill the screen, every control a tap target, and
    "‹ Threads" goes back to the list."""
    page = open_console("tester", viewport=PHONE)
    page.get_by_role("link", name="Test runs").click()
    expect(run_entry(page, history.second)).to_be_visible()
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.get_by_role("tab", name="Trail")).to_be_hidden()
    assert small_targets(page) == []
    run_entry(page, history.second).click()
    expect(case_item(page, history.suite, "greets")).to_be_visible()
    assert small_targets(page) == []
    page.get_by_role("button", name="Back to the threads").click()
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.locator("#runs-pane")).to_be_hidden()


def test_human_console_has_no_test_runs_and_asks_for_none(
    open_console: OpenConsole, console_server: LiveServer, history: History
) -> None:
    """The runs are the tester listener's alone: the human Console has no control for them,
    ignores `#runs` and `#run=ID`, and never requests `/api/suite-runs`."""
    asked: list[str] = []

    def record(request: Request) -> None:
        asked.append(request.url)

    human = open_console("human")
    human.on("request", record)
    for place in ("#runs", f"#run={history.second['id']}"):
        human.goto(f"{console_server.human_url}/{place}")
        human.reload()
        expect(human.locator("#trail-status")).to_have_text("live")
        expect(human.get_by_role("link", name="Test runs")).to_have_count(0)
        expect(human.locator("#runs-pane")).to_have_count(0)
        expect(human.get_by_role("heading", name="Your threads")).to_be_visible()
    assert asked, "no request was recorded"
    assert [url for url in asked if "/api/suite-runs" in url] == []

    # The same recording sees the tester's page ask for them.
    tester = open_console("tester")
    tester.on("request", record)
    tester.get_by_role("link", name="Test runs").click()
    expect(run_entry(tester, history.second)).to_be_visible()
    assert any("/api/suite-runs" in url for url in asked)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_no_runs_says_what_a_run_is_and_how_to_make_one(
    open_console: OpenConsole, viewport: dict[str, int]
) -> None:
    """With no run stored, the list says what a test run is, shows the command that makes one
    with this listener's address as its `--url`, and names the suite files' documentation."""
    page = open_console("tester", viewport=viewport)
    page.route("**/api/suite-runs?*", lambda route: route.fulfill(json={"runs": []}))
    page.get_by_role("link", name="Test runs").click()
    empty = page.locator("#runs-empty")
    expect(empty).to_be_visible()
    expect(empty).to_contain_text("A test run is one run of conversation tests")
    origin = page.evaluate("location.origin")
    expect(empty.locator("code").first).to_have_text(
        f"mosaic-test --url {origin} examples/conversations/*.suite.toml"
    )
    expect(empty).to_contain_text("docs/suite-file.md")
    expect(page.locator("#runs-state")).to_have_text("")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
