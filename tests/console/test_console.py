"""The Console in a real browser, against the real server (SPEC §8, §10 B1)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.console.api import LiveApi
from tests.console.pages import (
    RECONNECT_MS,
    assert_not_reloaded,
    choose_project,
    create_project,
    create_thread,
    mark_page,
    messages,
    send,
    trail_rows,
    unique,
)
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer
from tests.support.console_pages import OpenConsole


def test_b1_tester_console_shows_banner_and_sends_with_reply(open_console: OpenConsole) -> None:
    """B1: on the tester Console the banner is present, the composer is enabled, and a send
    shows the message and the assistant's reply; there is no sign-in or sign-out."""
    page = open_console("tester")
    banner = page.locator("#tester-banner")
    expect(banner).to_contain_text("every change here is recorded as tester")
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    create_project(page, unique("b1-tester"))
    create_thread(page, unique("probe"))

    composer = page.get_by_label("Message", exact=True)
    expect(composer).to_be_enabled(timeout=2_000)
    body = unique("does the assistant answer the tester")
    send(page, body)

    expect(messages(page).locator('[data-from="tester"] .body')).to_have_text([body])
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    expect(messages(page).locator('[data-from="assistant"] .writer')).to_have_text("assistant")
    expect(messages(page).locator('[data-from="tester"] .writer')).to_have_text("You")


def test_b1_human_console_leaves_tester_thread_out_and_trails_it_live(
    open_console: OpenConsole,
) -> None:
    """B1: on the human Console the tester's thread is absent from the list, and its traffic
    appears, labelled `tester to assistant: …`, in the live trail without reload."""
    project, thread = unique("b1-shared"), unique("tester-only")
    tester = open_console("tester")
    create_project(tester, project)
    create_thread(tester, thread)

    human = open_console("human")
    expect(human.locator("#trail-status")).to_have_text("live")
    mark_page(human)
    choose_project(human, project)
    expect(human.locator("#threads-state")).to_have_text(re.compile("No threads"))
    human.get_by_label("Search all projects").fill(thread)
    expect(human.locator("#search-state")).to_have_text("No thread matches.")

    body = unique("tester turn")
    send(tester, body)
    expect(messages(tester).locator('[data-from="assistant"]')).to_have_count(1)

    tester_row = trail_rows(human, f"tester to assistant: {body}")
    expect(tester_row).to_have_count(1)
    expect(tester_row.locator(".trail-who")).to_have_text("tester to assistant")
    expect(tester_row.locator(".trail-via")).to_have_text("via Console")
    expect(tester_row.locator(".trail-tag")).to_have_text("tester")
    reply = tester_row.locator("xpath=following-sibling::li").locator(".trail-who")
    expect(reply.filter(has_text=re.compile("^assistant to tester$"))).to_have_count(1)
    expect(human.get_by_role("list", name="Your threads").get_by_role("button")).to_have_count(0)
    assert_not_reloaded(human)


def test_human_console_send_shows_reply_without_reload(open_console: OpenConsole) -> None:
    """A message sent on the human Console shows, with the assistant's reply, without reload;
    Shift+Enter makes a line break and Enter sends."""
    page = open_console("human")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.locator("#tester-banner")).to_have_count(0)
    create_project(page, unique("human"))
    create_thread(page, unique("plan"))
    mark_page(page)

    first, second = unique("hello"), "second line"
    composer = page.get_by_label("Message", exact=True)
    composer.type(first)
    composer.press("Shift+Enter")
    composer.type(second)
    expect(composer).to_have_value(f"{first}\n{second}")
    composer.press("Enter")

    expect(messages(page).locator('[data-from="human"] .body')).to_have_text([f"{first}\n{second}"])
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    expect(trail_rows(page, f"human to assistant: {first}\n{second}")).to_have_count(1)
    assert_not_reloaded(page)


def test_human_console_signed_out_shows_sign_in_link(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """Signing out ends at the sign-in page; the Console without a session is the sign-in form
    (never "You are signed out" on a first visit)."""
    page = open_console("human")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{console_server.human_url}/signin")
    page.goto(f"{console_server.human_url}/")
    page.wait_for_url(f"{console_server.human_url}/signin")
    expect(page.get_by_label("Username")).to_be_visible()
    expect(page.get_by_role("log", name="Trail")).to_be_hidden()


def test_human_console_signed_out_elsewhere_closes_to_sign_in_link(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """A session ended in another tab closes the live sockets (4401): the open Console stops
    reconnecting and offers the sign-in link, without reload."""
    page = open_console("human")
    expect(page.locator("#trail-status")).to_have_text("live")
    mark_page(page)
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.context.request.post(
        f"{console_server.human_url}/api/auth/logout",
        data="{}",
        headers={
            "Origin": console_server.human_url,
            "Sec-Fetch-Site": "same-origin",
            "Content-Type": "application/json",
            "X-CSRFToken": token,
        },
    )
    assert answer.status == 200, answer.text()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    expect(page.locator("#trail-status")).to_have_text("signed out")
    assert_not_reloaded(page)


def test_console_reconnects_after_server_restart_and_shows_each_row_once(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """After the server closes the sockets, the Console reconnects after its last ids and shows
    every row sent meanwhile, none twice (SPEC §6: the database is the record)."""
    page = open_console("human")
    create_project(page, unique("restart"))
    create_thread(page, unique("resume"))
    before = unique("before the restart")
    send(page, before)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    mark_page(page)

    api = LiveApi(console_server.human_url)
    api.sign_in(HUMAN_USERNAME, PASSWORD)
    thread = int(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')"))

    console_server.stop()
    expect(page.locator("#trail-status")).to_have_text("reconnecting…")
    expect(page.locator("#thread-status")).to_have_text("reconnecting…")
    console_server.start()
    # Sent at once, while the Console is most likely still waiting out its back-off.
    meanwhile = [unique(f"meanwhile {n}") for n in range(3)]
    for body in meanwhile:
        api.send(thread, body)
    api.close()

    expect(page.locator("#trail-status")).to_have_text("live", timeout=RECONNECT_MS)
    expect(page.locator("#thread-status")).to_have_text("live", timeout=RECONNECT_MS)
    for body in [before, *meanwhile]:
        expect(trail_rows(page, f"human to assistant: {body}")).to_have_count(1)
        expect(messages(page).locator(".body").get_by_text(body, exact=True)).to_have_count(1)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(4)
    for log in ("#trail", "#messages"):
        ids = page.eval_on_selector_all(f"{log} > li", "items => items.map(i => i.dataset.id)")
        assert len(ids) == len(set(ids)), f"{log} shows a row twice: {ids}"
    assert_not_reloaded(page)
