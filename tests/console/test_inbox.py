"""The inbox in the Console: unread marks kept by the server, the tab title counting
them, and rename and archive of one's own threads on both sides."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.console.api import LiveApi
from tests.console.pages import create_project, create_thread, messages, unique
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer
from tests.support.console_pages import OpenConsole
from tests.support.model_servers import FakeModel


def thread_choice(page: Page, name: str) -> Locator:
    return page.get_by_role("list", name="Your threads").get_by_role("button", name=name)


def unread_in_title(page: Page) -> int:
    """The unread count the tab's title leads with, "(N) …"; 0 when it has none."""
    counted = re.match(r"^\((\d+)\) ", page.title())
    return int(counted.group(1)) if counted else 0


def title_counting(unread: int) -> re.Pattern[str]:
    """A title that leads with `unread` as its count, or with none when it is 0."""
    return re.compile(rf"^\({unread}\) " if unread else r"^[^(]")


def test_reply_in_other_thread_shows_unread_until_opened(
    open_console: OpenConsole, console_server: LiveServer, model: FakeModel
) -> None:
    """A reply in a thread that is not open marks it unread (count, tab title); opening it
    reads it, and the mark stays read after a reload (kept by the server)."""
    model.content = unique("the reply")
    page = open_console("human")
    create_project(page, unique("unread"))
    first, second = unique("first"), unique("second")
    create_thread(page, first)
    thread = int(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')"))
    create_thread(page, second)
    # The live server is shared: replies of earlier tests' threads may be unread already.
    before = unread_in_title(page)

    api = LiveApi(console_server.human_url)
    api.sign_in(HUMAN_USERNAME, PASSWORD)
    api.send(thread, unique("sent elsewhere"))
    api.close()
    unread = thread_choice(page, first).locator(".unread")
    expect(unread).to_have_text("1")
    expect(page).to_have_title(title_counting(before + 1))
    page.reload()
    expect(thread_choice(page, first).locator(".unread")).to_have_text("1")
    expect(thread_choice(page, first).locator(".thread-preview")).to_have_text(model.content)

    thread_choice(page, first).click()
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    expect(thread_choice(page, first).locator(".unread")).to_have_count(0)
    expect(page).to_have_title(title_counting(before))
    page.reload()
    expect(thread_choice(page, first)).to_be_visible()
    expect(thread_choice(page, first).locator(".unread")).to_have_count(0)


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_rename_and_archive_own_thread(open_console: OpenConsole, listener: str) -> None:
    """Both sides rename and archive their own threads: the title and list follow, an archived
    thread leaves the list and comes back from "Show archived threads"."""
    page = open_console(listener)
    create_project(page, unique("inbox"))
    name, renamed = unique("before"), unique("after")
    create_thread(page, name)

    page.get_by_role("button", name="Rename").click()
    page.get_by_label("New name of this thread").fill(renamed)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name=renamed)).to_be_visible()
    expect(thread_choice(page, renamed)).to_be_visible()
    expect(thread_choice(page, name)).to_have_count(0)

    page.get_by_role("button", name="Archive").click()
    expect(thread_choice(page, renamed)).to_have_count(0)
    page.get_by_label("Show archived threads").check()
    expect(thread_choice(page, renamed)).to_be_visible()
    thread_choice(page, renamed).click()
    page.get_by_role("button", name="Unarchive").click()
    expect(thread_choice(page, renamed)).to_have_count(0)
    page.get_by_label("Show archived threads").uncheck()
    expect(thread_choice(page, renamed)).to_be_visible()
