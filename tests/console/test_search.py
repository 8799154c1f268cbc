"""Search everywhere on the Console: the box finds the reader's threads and messages in every
project, and a message found opens its thread at that message, however old (SPEC §8)."""

from __future__ import annotations

import re

from playwright.sync_api import Locator, Page, Route, expect

from tests.console.api import LiveApi
from tests.console.pages import assert_not_reloaded, create_project, mark_page, messages, unique
from tests.console.test_accessibility import violations
from tests.support.console_pages import PHONE, OpenConsole

# More turns after the one found than the thread's first page shows (thread.js, 50 messages).
LATER_TURNS = 55


def search_hits(page: Page, kind: str) -> Locator:
    """The hits of one kind ("Threads", "Messages") in the search results. Scoped to the
    results: the project's own list, "Your threads", shares the word, and until the results
    come it is the one shown (and it steps aside as they come)."""
    results = page.get_by_role("region", name="Search results")
    return results.get_by_role("list", name=kind, exact=True).get_by_role("button")


def test_search_hit_in_another_project_opens_its_thread_at_the_message(
    open_console: OpenConsole, human_api: LiveApi
) -> None:
    """A term found in an old message of a thread in a project other than the one shown: the
    hit names the project and thread and marks the term; chosen from the keyboard, it opens that
    project and thread with the message in view and marked; Esc clears the search and the
    project's own threads come back. axe finds nothing serious in the results."""
    word = unique("heron")
    far, thread = unique("far"), unique("old notes")
    thread_id = human_api.create_thread(human_api.create_project(far), thread)
    found = human_api.send(thread_id, f"the {word} nests by the river")
    for i in range(LATER_TURNS):
        human_api.send(thread_id, f"later turn {i}")
    page = open_console("human")
    create_project(page, unique("near"))
    mark_page(page)

    box = page.get_by_label("Search all projects")
    box.fill(word.upper())
    results = page.get_by_role("region", name="Search results")
    hit = results.get_by_role("list", name="Messages").get_by_role("button")
    expect(hit).to_have_count(1)
    expect(hit.locator(".hit-project")).to_have_text(far)
    expect(hit.locator(".hit-thread")).to_have_text(thread)
    expect(hit.locator(".hit-from")).to_have_text("You")
    expect(hit.locator("mark")).to_have_text(word)
    expect(hit.locator(".hit-snippet")).to_have_text(f"the {word} nests by the river")
    expect(results.get_by_role("list", name="Threads")).to_be_hidden()
    expect(page.get_by_role("list", name="Your threads")).to_be_hidden()
    assert violations(page) == []

    box.press("ArrowDown")
    expect(hit).to_be_focused()
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name=thread)).to_be_visible()
    shown = messages(page).locator(f'li[data-id="{found}"]')
    expect(shown).to_have_class(re.compile(r"\bfound\b"))
    expect(shown).to_be_in_viewport()
    expect(shown).to_be_focused()
    projects = page.get_by_role("list", name="Projects", exact=True)
    expect(projects.get_by_role("button", name=far)).to_have_attribute("aria-current", "true")

    box.press("Escape")
    expect(box).to_have_value("")
    expect(results).to_be_hidden()
    listed = page.get_by_role("list", name="Your threads").get_by_role("button", name=thread)
    expect(listed).to_have_attribute("aria-current", "true")
    assert_not_reloaded(page)


def test_search_lists_matching_threads_of_every_project_and_says_when_none_match(
    open_console: OpenConsole, tester_api: LiveApi
) -> None:
    """A thread found by its name, in a project not shown, opens there; a term found nowhere
    says so."""
    word = unique("egret")
    far, thread = unique("far"), f"plans for the {word}"
    tester_api.create_thread(tester_api.create_project(far), thread)
    page = open_console("tester")
    create_project(page, unique("near"))

    box = page.get_by_label("Search all projects")
    box.fill(word)
    hit = search_hits(page, "Threads")
    expect(hit).to_have_count(1)
    expect(hit.locator("mark")).to_have_text(word)
    expect(hit.locator(".hit-project")).to_have_text(far)
    hit.click()
    expect(page.get_by_role("heading", name=thread)).to_be_visible()

    box.fill(unique("nowhere"))
    expect(page.locator("#search-state")).to_have_text("No thread matches.")
    expect(search_hits(page, "Threads")).to_have_count(0)


def test_search_hit_on_a_phone_shows_the_conversation_at_the_message(
    open_console: OpenConsole, human_api: LiveApi
) -> None:
    """On a phone the results are in the list's view; a message chosen there opens the
    conversation's own view with the message in it, marked."""
    word = unique("ibis")
    thread = unique("phone notes")
    thread_id = human_api.create_thread(human_api.create_project(unique("far")), thread)
    found = human_api.send(thread_id, f"an {word} on the shore")
    human_api.send(thread_id, "a later turn")
    page = open_console("human", viewport=PHONE)

    page.get_by_label("Search all projects").fill(word)
    page.get_by_role("list", name="Messages").get_by_role("button").click()

    expect(page.get_by_role("heading", name=thread)).to_be_visible()
    shown = messages(page).locator(f'li[data-id="{found}"]')
    expect(shown).to_have_class(re.compile(r"\bfound\b"))
    expect(shown).to_be_in_viewport()
    assert violations(page) == []


def test_typing_in_the_search_box_while_a_thread_loads_keeps_the_focus_there(
    open_console: OpenConsole, tester_api: LiveApi
) -> None:
    """A thread opened from a hit takes the focus to its composer once it has loaded, unless the
    reader is typing in the search box by then: what is typed stays there, none of it lands in
    the composer. The thread's load is held until the reader has typed."""
    word = unique("plover")
    thread = f"notes on the {word}"
    tester_api.create_thread(tester_api.create_project(unique("far")), thread)
    page = open_console("tester")
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route("**/api/chat/threads/*/messages*", hold)

    box = page.get_by_label("Search all projects")
    box.fill(word)
    hit = search_hits(page, "Threads")
    expect(hit).to_have_count(1)
    with page.expect_request(lambda request: "/messages" in request.url):
        hit.click()
    expect(page.get_by_role("heading", name=thread)).to_be_visible()
    box.fill(unique("nowhere"))
    for route in held:
        route.continue_()
    page.unroute("**/api/chat/threads/*/messages*")
    expect(page.locator("#search-state")).to_have_text("No thread matches.")
    expect(box).to_be_focused()
    expect(page.get_by_label("Message", exact=True)).to_have_value("")
