"""axe-core on the sign-in page, both Consoles (the tester's test runs and the trail's states
too) and the admin's pages, light and dark, at both viewports: no serious or critical violation,
and nothing outside a landmark; and the focus ring of a list's control is drawn in
full."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.console.api import LiveApi
from tests.console.pages import (
    create_project,
    create_thread,
    messages,
    send,
    sign_in_admin,
    trail_rows,
    unique,
)
from tests.console.server import LiveServer
from tests.console.suite_runs import store_history, store_spent
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole
from tests.support.model_servers import FakeModel

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
BLOCKING = ("serious", "critical")
# Moderate, but named by the issue: content outside every landmark (the tester banner was).
ALSO_BLOCKING = ("region",)
# Each kind of rendered markdown: a heading, lists, a task list, plain and highlighted
# code, a table, an image shown as a link.
REPLY = (
    "## A **reply** with a list:\n\n- one\n- two\n\n* [ ] a task\n* [x] a done task\n\n"
    '```\ncode\n```\n\n```python\ndef f(x):\n    return "s" + 1  # c\n```\n\n'
    "| a | b |\n|---|---|\n| 1 | 2 |\n\n![an image](https://images.example/i.png)"
)


def violations(page: Page) -> list[dict[str, Any]]:
    """axe's serious and critical violations on the page as it is now, each with its nodes."""
    if not page.evaluate("typeof window.axe === 'object'"):
        # Evaluated through the browser's own channel, not added as a `<script>`: the pages'
        # Content-Security-Policy refuses inline scripts, and a refusal fails the test.
        page.evaluate(AXE.read_text(encoding="utf-8"))
    found: list[dict[str, Any]] = page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
            .map((v) => ({
                id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')),
            }))"""
    )
    return [v for v in found if v["impact"] in BLOCKING or v["id"] in ALSO_BLOCKING]


def console_with_turns(page: Page, model: FakeModel) -> None:
    """A thread with a rendered reply and a failed turn: every kind of row on screen."""
    model.content = REPLY
    create_project(page, unique("axe"))
    create_thread(page, unique("thread"))
    send(page, unique("a turn"))
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    model.status = 400
    send(page, unique("a failing turn"))
    expect(messages(page).locator('.turn-state[data-state="failed"]')).to_have_count(1)


VIEWS = [
    pytest.param(DESKTOP, False, id="desktop-light"),
    pytest.param(DESKTOP, True, id="desktop-dark"),
    pytest.param(PHONE, False, id="phone-light"),
    pytest.param(PHONE, True, id="phone-dark"),
]


@pytest.mark.parametrize(("viewport", "dark"), VIEWS)
def test_axe_signin_and_both_consoles_have_no_serious_violations(
    open_console: OpenConsole, model: FakeModel, viewport: dict[str, int], dark: bool
) -> None:
    """Sign-in, the human Console and the tester Console (with the trail on the phone), with
    messages, a rendered reply and a failed turn on screen."""
    signin = open_console("human", viewport=viewport, dark=dark, signed_in=False)
    assert violations(signin) == []
    found = {}
    for listener in ("human", "tester"):
        page = open_console(listener, viewport=viewport, dark=dark)
        console_with_turns(page, model)
        model.status = 200
        found[listener] = violations(page)
        if viewport == PHONE:
            page.get_by_role("button", name="Back to the threads").click()
            page.get_by_role("tab", name="Trail").click()
            found[f"{listener} trail"] = violations(page)
    assert found == {name: [] for name in found}


@pytest.mark.parametrize(("viewport", "dark"), VIEWS)
def test_axe_test_runs_have_no_serious_violations(
    open_console: OpenConsole, tester_api: LiveApi, viewport: dict[str, int], dark: bool
) -> None:
    """The tester Console's test runs: the list; a run compared with a baseline (regressed,
    fixed, new), its comparison shown and a regressed case's replies opened; a run with
    failures and thread links on screen, a further failure opened; a run's and its cases'
    tokens and cost, and a judged case's votes opened."""
    history = store_history(tester_api)
    page = open_console("tester", viewport=viewport, dark=dark)
    page.get_by_role("link", name="Test runs").click()
    run = page.locator(f'.test-run-choice[data-id="{history.second["id"]}"]')
    expect(run).to_be_visible()
    found = {"runs": violations(page)}
    run.click()
    expect(page.locator(".case .change")).to_have_count(3)
    expect(page.locator("#compared-cases .compared")).to_have_count(3)
    page.locator("#compared-cases .compared").first.get_by_text("Replies side by side").click()
    expect(page.locator(".reply-repeat")).to_have_count(2)
    found["compared run"] = violations(page)
    page.get_by_role("link", name=f"run {history.first['id']}", exact=True).click()
    page.get_by_text("1 more failure").click()
    expect(page.locator(".failure")).to_have_count(2)
    found["run"] = violations(page)
    spent = store_spent(tester_api)
    page.goto(f"{page.url.split('#')[0]}#run={spent.run['id']}")
    page.locator("details.case-judge summary").click()
    expect(page.locator(".vote")).to_have_count(4)
    found["costs and votes"] = violations(page)
    assert found == {name: [] for name in found}


@pytest.mark.parametrize(("viewport", "dark"), VIEWS)
def test_axe_trail_states_have_no_serious_violations(
    open_console: OpenConsole, tester_api: LiveApi, viewport: dict[str, int], dark: bool
) -> None:
    """The human's trail with a tester row whose long body is opened with "more",
    claims and leases shown, filtered to the tester's rows; on a wide screen, folded away."""
    body = "\n".join(f"line {n} of a long tester turn" for n in range(12)) + unique(" ")
    thread = tester_api.create_thread(tester_api.create_project(unique("axe")), unique("trail"))
    tester_api.send(thread, body)
    page = open_console("human", viewport=viewport, dark=dark)
    if viewport == PHONE:
        page.get_by_role("tab", name="Trail").click()
    row = trail_rows(page, f"tester to assistant: {body}")
    row.get_by_role("button", name="more").click()
    page.get_by_label("Claims and leases").check()
    page.get_by_role("group", name="Show in the trail").get_by_role(
        "button", name="Tester only"
    ).click()
    found = {"trail": violations(page)}
    if viewport == DESKTOP:
        page.get_by_role("button", name="Hide trail").click()
        found["folded"] = violations(page)
    assert found == {name: [] for name in found}


# The admin's pages (every view, the admin's too), each read-only record of a turn.
ADMIN_PAGES = (
    "/admin/",
    "/admin/broker/trailrow/",
    "/admin/broker/trailrow/{row}/change/",
    "/admin/broker/message/",
    "/admin/broker/message/{message}/change/",
    "/admin/broker/thread/",
    "/admin/broker/thread/{thread}/change/",
    "/admin/broker/instance/",
    "/admin/broker/instance/usage/",
)


@pytest.mark.parametrize(("viewport", "dark"), VIEWS)
def test_axe_admin_pages_have_no_serious_violations(
    open_console: OpenConsole,
    console_server: LiveServer,
    tester_api: LiveApi,
    viewport: dict[str, int],
    dark: bool,
) -> None:
    """The admin's sign-in, index, and the lists and pages of trail rows, messages, threads (its
    messages inline) and instances (with the reply usage), after a turn with a long body."""
    body = "\n".join(f"line {n} of a long turn " * 4 for n in range(12)) + unique(" ")
    thread = tester_api.create_thread(tester_api.create_project(unique("axe")), unique("admin"))
    message = tester_api.send(thread, body)
    rows = tester_api.get("/api/trail?limit=500")["rows"]
    row = next(row["id"] for row in rows if row["text"].endswith(body))
    page = open_console("human", viewport=viewport, dark=dark, signed_in=False)
    page.goto(f"{console_server.human_url}/admin/login/")
    found = {"login": violations(page)}
    sign_in_admin(page, console_server.human_url)
    for path in ADMIN_PAGES:
        page.goto(console_server.human_url + path.format(row=row, message=message, thread=thread))
        found[path] = violations(page)
    assert found == {name: [] for name in found}


def test_focus_ring_on_list_control_is_not_clipped(open_console: OpenConsole) -> None:
    """WCAG 2.4.7: a focused thread in the scrolled list shows its whole ring, not a sliver —
    the ring lies inside the list's scroll box."""
    page = open_console("tester")
    create_project(page, unique("focus"))
    create_thread(page, unique("thread"))
    choice = page.get_by_role("list", name="Your threads").get_by_role("button").first
    choice.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    inside: bool = choice.evaluate(
        """(node) => {
            const style = getComputedStyle(node);
            const ring = parseFloat(style.outlineWidth) + parseFloat(style.outlineOffset);
            const box = node.getBoundingClientRect();
            const list = node.closest('ul').getBoundingClientRect();
            return style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2 &&
                box.left - ring >= list.left && box.right + ring <= list.right &&
                box.top - ring >= list.top && box.bottom + ring <= list.bottom;
        }"""
    )
    assert inside
