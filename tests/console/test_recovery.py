"""Recovery: a restart that ends the session shows the signed-out card at once, keeping the
draft; drafts are per thread; a thread that failed to load loads when the server is back; one
page-level offline banner."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from tests.console.pages import RECONNECT_MS, create_project, create_thread, messages, send, unique
from tests.console.server import LiveServer
from tests.support.console_pages import OpenConsole, sign_in

# The bound: the signed-out card within 5 s of the server answering again.
SIGNED_OUT_MS = 5_000
END_SESSIONS = "from django.contrib.sessions.models import Session; Session.objects.all().delete()"


def composer(page: Page) -> Locator:
    return page.get_by_label("Message", exact=True)


def open_thread(page: Page, name: str) -> None:
    page.get_by_role("list", name="Your threads").get_by_role("button", name=name).click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()


def test_restart_without_session_shows_signed_out_card_and_keeps_draft(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """The server restarts with every session gone: the refused reconnects lead to the
    signed-out card within 5 s of the restart, and the typed draft is there after signing in."""
    page = open_console("human")
    create_project(page, unique("session"))
    name = unique("draft-kept")
    create_thread(page, name)
    draft = unique("typed before the restart")
    composer(page).fill(draft)

    console_server.stop()
    expect(page.locator("#offline")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="Offline")).to_have_count(1)
    console_server.manage("shell", "-c", END_SESSIONS)
    console_server.start()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible(timeout=SIGNED_OUT_MS)
    expect(page.locator("#offline")).to_be_hidden()

    sign_in(page, console_server.human_url)
    page.get_by_role("list", name="Projects", exact=True).locator("button").last.click()
    open_thread(page, name)
    expect(composer(page)).to_have_value(draft)


def test_restart_with_session_hides_offline_banner_when_back(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """One page-level banner says the server is away while it is, and goes when it is back."""
    page = open_console("tester")
    create_project(page, unique("banner"))
    create_thread(page, unique("thread"))
    console_server.stop()
    expect(page.locator("#offline")).to_be_visible()
    console_server.start()
    expect(page.locator("#offline")).to_be_hidden(timeout=RECONNECT_MS)
    expect(page.locator("#thread-status")).to_have_text("live", timeout=RECONNECT_MS)
    expect(page.locator("#trail-status")).to_have_text("live", timeout=RECONNECT_MS)


def test_switch_thread_keeps_each_draft_and_enter_sends_only_this_one(
    open_console: OpenConsole,
) -> None:
    """A draft never follows you to another thread: each thread keeps its own, and Enter sends
    the open thread's draft in the open thread only."""
    page = open_console("tester")
    create_project(page, unique("drafts"))
    first, second = unique("first"), unique("second")
    create_thread(page, first)
    first_draft = unique("draft of the first")
    composer(page).fill(first_draft)
    create_thread(page, second)
    expect(composer(page)).to_have_value("")
    second_body = unique("sent in the second")
    send(page, second_body)
    expect(messages(page).locator('[data-from="tester"] .body')).to_have_text([second_body])

    open_thread(page, first)
    expect(composer(page)).to_have_value(first_draft)
    expect(messages(page).locator('[data-from="tester"]')).to_have_count(0)
    page.reload()
    expect(composer(page)).to_have_value(first_draft)


def test_open_thread_during_outage_loads_it_when_server_is_back(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """A thread opened while the server is away shows why, and loads once it is back."""
    page = open_console("tester")
    create_project(page, unique("outage"))
    first, second = unique("first"), unique("second")
    create_thread(page, first)
    body = unique("there before the outage")
    send(page, body)
    create_thread(page, second)

    console_server.stop()
    open_thread(page, first)
    expect(page.locator("#messages-state")).to_have_attribute("data-kind", "error")
    console_server.start()
    expect(messages(page).locator(".body").get_by_text(body, exact=True)).to_have_count(
        1, timeout=RECONNECT_MS
    )
    expect(page.locator("#thread-status")).to_have_text("live", timeout=RECONNECT_MS)
