"""The Console for daily use: the thread list in the inbox's order (a reply moves its thread to
the top as it lands), pins, a compact list with at least 8 rows at 1440×900, and the tester's
projects out of the human's way (never opened by default, never where the human's new chat
goes, folded in a group of their own)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.console.api import LiveApi
from tests.console.pages import choose_project, create_project, create_thread, send, unique
from tests.support.console_pages import DESKTOP, OpenConsole
from tests.support.model_servers import FakeModel

# Names as "New chat" makes them (a message's first words), long enough to wrap.
NAMES = [
    "Plan the launch of the spring catalogue",
    "Why did the March invoices go out twice",
    "Draft a reply to the supplier about delays",
    "Summarise the feedback from the last survey",
    "Which customers asked for a refund this week",
    "Compare the two shipping quotes we received",
    "Write the agenda for Monday's team meeting",
    "Check the stock levels for the blue mugs",
    "Translate the product page into French",
    "Ideas for the newsletter in May",
    "Reconcile the bank statement for April",
    "Prepare the onboarding notes for Sam",
]


def thread_names(page: Page) -> Locator:
    return page.get_by_role("list", name="Your threads").locator("button[data-id] .thread-name")


def thread_choice(page: Page, name: str) -> Locator:
    return page.get_by_role("list", name="Your threads").get_by_role("button", name=name)


def messages_of(api: LiveApi, thread: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = api.get(f"/api/chat/threads/{thread}/messages")["messages"]
    return messages


def test_a_reply_moves_its_thread_to_the_top_as_it_lands(
    open_console: OpenConsole, human_api: LiveApi, model: FakeModel
) -> None:
    """The list is by last activity, newest first, and follows the bus live: a turn moves its
    thread up, and so does the assistant's reply when it lands, after another thread's turn."""
    slow = unique("slow")
    landed = threading.Event()

    def answer(request: dict[str, Any]) -> str:
        if slow in str(request["messages"][-1]["content"]):
            landed.wait(20)
        return "the reply"

    model.script = answer
    project_name = unique("activity")
    project = human_api.create_project(project_name)
    names = [unique(name) for name in ("a", "b", "c")]
    ids = {name: human_api.create_thread(project, name) for name in names}
    a, b, c = names
    page = open_console("human")
    choose_project(page, project_name)
    expect(thread_names(page)).to_have_text([c, b, a])

    human_api.send(ids[a], f"{slow} question")
    expect(thread_names(page)).to_have_text([a, c, b])
    human_api.send(ids[b], "a quick one")
    expect(thread_names(page)).to_have_text([b, a, c])
    deadline = time.monotonic() + 20
    while len(messages_of(human_api, ids[b])) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(messages_of(human_api, ids[b])) == 2
    expect(thread_names(page)).to_have_text([b, a, c])

    landed.set()
    expect(thread_names(page)).to_have_text([a, b, c])
    expect(thread_choice(page, a).locator(".unread")).to_have_text("1")
    page.reload()
    expect(thread_names(page)).to_have_text([a, b, c])


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_a_pinned_thread_stays_on_top_until_unpinned(
    open_console: OpenConsole, listener: str
) -> None:
    """Pin in the thread's header keeps it above newer activity, marked, after a reload too;
    Unpin puts it back in its place by activity."""
    page = open_console(listener)
    create_project(page, unique("pins"))
    first, second, third = unique("first"), unique("second"), unique("third")
    create_thread(page, first)
    create_thread(page, second)
    expect(thread_names(page)).to_have_text([second, first])

    thread_choice(page, first).click()
    page.get_by_role("button", name="Pin", exact=True).click()
    expect(thread_names(page)).to_have_text([first, second])
    expect(thread_choice(page, first).locator(".pinned-mark")).to_have_text("pinned")
    expect(page.locator("#actions-notice")).to_have_text("Pinned to the top of the list.")
    create_thread(page, third)
    send(page, "newer activity")
    expect(thread_names(page)).to_have_text([first, third, second])
    page.reload()
    expect(thread_names(page)).to_have_text([first, third, second])

    thread_choice(page, first).click()
    page.get_by_role("button", name="Unpin", exact=True).click()
    expect(thread_names(page)).to_have_text([third, second, first])
    expect(thread_choice(page, first).locator(".pinned-mark")).to_have_count(0)


def test_the_list_shows_at_least_eight_threads_at_1440_by_900(
    open_console: OpenConsole, human_api: LiveApi, tester_api: LiveApi
) -> None:
    """A day's threads at a glance: with a dozen threads, each with a preview, beside more
    projects than their list shows and the tester's, at least 8 rows are whole on screen; a
    long name is clamped to two lines, by classes (the policy allows no inline style)."""
    for _ in range(8):
        human_api.create_project(unique("other project"))
        tester_api.create_project(unique("suite"))
    project_name = unique("daily")
    project = human_api.create_project(project_name)
    for name in NAMES[:-1]:
        human_api.send(human_api.create_thread(project, name), f"About: {name}.")
    long_name = " ".join(["a very long thread name"] * 8)
    human_api.create_thread(project, long_name)
    page = open_console("human", viewport=DESKTOP)
    choose_project(page, project_name)
    expect(thread_names(page)).to_have_count(len(NAMES))

    whole = page.evaluate(
        """() => {
            const list = document.getElementById("threads").getBoundingClientRect();
            return [...document.querySelectorAll("#threads button[data-id]")].filter((row) => {
                const box = row.getBoundingClientRect();
                return box.top >= Math.max(list.top, 0) - 0.5
                    && box.bottom <= Math.min(list.bottom, innerHeight) + 0.5;
            }).length;
        }"""
    )
    assert whole >= 8, whole
    # Replies still arriving move rows and draw them anew: the row is measured once it is still.
    page.wait_for_function(
        """(name) => {
            const node = [...document.querySelectorAll("#threads .thread-name")]
                .find((span) => span.textContent === name);
            const style = node && getComputedStyle(node);
            return style && style.webkitLineClamp === "2" && Math.round(
                node.getBoundingClientRect().height / parseFloat(style.lineHeight)) === 2;
        }""",
        arg=long_name,
    )
    assert page.locator("#threads [style]").count() == 0


def current_project(page: Page) -> Locator:
    return page.locator('#sidebar button[data-creator][aria-current="true"]')


def test_the_testers_project_is_never_the_humans_default(
    open_console: OpenConsole, human_api: LiveApi, tester_api: LiveApi
) -> None:
    """What a suite run leaves — a project of the tester's, the newest of all, with a thread in
    it — is not where a fresh sign-in opens, nor where the human's new chat goes, even with that
    project in view; it waits, tagged, in the folded "Tester projects" group."""
    mine, mine_thread = unique("mine"), unique("my thread")
    human_api.create_thread(human_api.create_project(mine), mine_thread)
    suite = unique("suite run")
    tester_api.create_thread(tester_api.create_project(suite), "case 1")

    page = open_console("human")
    expect(current_project(page)).to_have_text(mine)
    expect(thread_names(page)).to_have_text([mine_thread])
    group = page.locator("#tester-projects-group")
    expect(group).to_be_visible()
    expect(group).not_to_have_attribute("open", "")
    theirs = page.get_by_role("list", name="Tester projects").get_by_role(
        "button", name=f"{suite} tester", exact=True
    )
    expect(theirs).to_be_hidden()

    first, second = unique("a chat of my own"), unique("another chat of mine")
    page.get_by_role("button", name="New chat").click()
    send(page, first)
    expect(page.get_by_role("heading", name=first)).to_be_visible()
    expect(current_project(page)).to_have_attribute("data-creator", "human")

    group.locator("summary").click()
    theirs.click()
    expect(theirs).to_have_attribute("aria-current", "true")
    expect(page.locator("#threads-state")).to_have_text("No threads here yet. Create one below.")
    page.get_by_role("button", name="New chat").click()
    send(page, second)
    expect(page.get_by_role("heading", name=second)).to_be_visible()
    expect(current_project(page)).to_have_attribute("data-creator", "human")
    chats = {t["name"]: t["project"] for t in human_api.get("/api/chat/threads")["threads"]}
    projects = {p["id"]: p for p in human_api.get("/api/chat/projects?limit=500")["projects"]}
    for name in (first, second):
        assert projects[chats[name]]["creator"] == "human", projects[chats[name]]


def test_show_older_threads_continues_below_the_last_one_shown(
    open_console: OpenConsole, human_api: LiveApi
) -> None:
    """The list's pages follow the inbox's order: the next page starts below the last thread
    shown, the pinned thread staying first."""
    project_name = unique("many")
    project = human_api.create_project(project_name)
    names = [f"thread {i:02}" for i in range(53)]
    ids = [human_api.create_thread(project, name) for name in names]
    human_api.patch(f"/api/chat/threads/{ids[0]}", {"pinned": True})
    page = open_console("human")
    choose_project(page, project_name)
    expect(thread_names(page)).to_have_count(50)
    page.get_by_role("button", name="Show older threads").click()
    expect(thread_names(page)).to_have_text([names[0], *reversed(names[1:])])
    expect(page.get_by_role("button", name="Show older threads")).to_be_hidden()
