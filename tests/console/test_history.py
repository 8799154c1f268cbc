"""History: each thread opened is an entry, Back returns to the thread before, and editing the
address switches threads, without reloading the page."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.console.pages import (
    assert_not_reloaded,
    create_project,
    create_thread,
    mark_page,
    unique,
)
from tests.support.console_pages import OpenConsole


def place(page: Page) -> dict[str, str]:
    return dict(page.evaluate("Object.fromEntries(new URLSearchParams(location.hash.slice(1)))"))


def open_thread(page: Page, name: str) -> None:
    page.get_by_role("list", name="Your threads").get_by_role("button", name=name).click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()


def test_back_and_forward_switch_between_opened_threads(open_console: OpenConsole) -> None:
    page = open_console("tester")
    create_project(page, unique("history"))
    first, second = unique("first"), unique("second")
    create_thread(page, first)
    create_thread(page, second)
    mark_page(page)
    open_thread(page, first)
    open_thread(page, second)

    page.go_back()
    expect(page.get_by_role("heading", name=first)).to_be_visible()
    expect(page.locator("#thread-status")).to_have_text("live")
    page.go_back()
    expect(page.get_by_role("heading", name=second)).to_be_visible()
    page.go_forward()
    expect(page.get_by_role("heading", name=first)).to_be_visible()
    current = page.get_by_role("list", name="Your threads").get_by_role("button", name=first)
    expect(current).to_have_attribute("aria-current", "true")
    assert_not_reloaded(page)


def test_edit_address_switches_thread(open_console: OpenConsole) -> None:
    page = open_console("tester")
    create_project(page, unique("address"))
    first, second = unique("first"), unique("second")
    create_thread(page, first)
    at_first = place(page)
    create_thread(page, second)
    mark_page(page)
    page.evaluate(
        "hash => { location.hash = hash }",
        f"project={at_first['project']}&thread={at_first['thread']}",
    )
    expect(page.get_by_role("heading", name=first)).to_be_visible()
    expect(page.locator("#thread-status")).to_have_text("live")
    assert place(page) == at_first
    assert_not_reloaded(page)
