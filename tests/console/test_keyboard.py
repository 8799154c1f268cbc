"""The keyboard on both Consoles, at 1440×900 and 390×844: the skip link to the conversation is
the first focusable element; the focus goes back to the thread after a rename and an archive; the
shortcuts list opens with ? (outside a text field) or Ctrl+/, closes with Esc, and has no serious
axe violation, light or dark."""

from __future__ import annotations

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.console.pages import create_project, create_thread, unique
from tests.console.test_accessibility import violations
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole

SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]


def composer(page: Page) -> Locator:
    return page.get_by_label("Message", exact=True)


def open_a_thread(page: Page) -> str:
    create_project(page, unique("keys"))
    name = unique("keys")
    create_thread(page, name)
    return name


def focus_nothing(page: Page) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur()")
    expect(page.locator("body")).to_be_focused()


@pytest.mark.parametrize("viewport", SIZES)
@pytest.mark.parametrize("listener", ["human", "tester"])
def test_skip_link_is_first_and_takes_the_focus_to_the_conversation(
    open_console: OpenConsole, listener: str, viewport: dict[str, int]
) -> None:
    page = open_console(listener, viewport=viewport)
    open_a_thread(page)
    address = page.url
    first = page.evaluate(
        """() => document.querySelector(
            'a[href], button, input, textarea, select, summary, [tabindex]:not([tabindex="-1"])'
        ).textContent"""
    )
    assert first == "Skip to the conversation"
    # From the top of the page (a click there is where the keyboard goes on from), back by one.
    page.get_by_role("heading", name="Mosaic bus").click()
    page.keyboard.press("Shift+Tab")
    skip = page.get_by_role("link", name="Skip to the conversation")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(composer(page)).to_be_focused()
    assert page.url == address


@pytest.mark.parametrize("viewport", SIZES)
def test_focus_goes_back_to_the_thread_after_rename_and_archive(
    open_console: OpenConsole, viewport: dict[str, int]
) -> None:
    page = open_console("human", viewport=viewport)
    open_a_thread(page)
    page.get_by_role("button", name="Rename").click()
    renamed = unique("renamed")
    page.get_by_label("New name of this thread").fill(renamed)
    page.get_by_label("New name of this thread").press("Enter")
    expect(page.get_by_role("heading", name=renamed)).to_be_visible()
    expect(composer(page)).to_be_focused()

    page.get_by_role("button", name="Archive").click()
    expect(page.locator("#thread-badge")).to_have_text("Archived")
    expect(composer(page)).to_be_focused()


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
@pytest.mark.parametrize("viewport", SIZES)
def test_shortcuts_list_opens_with_question_mark_or_ctrl_slash_and_closes_with_escape(
    open_console: OpenConsole, viewport: dict[str, int], dark: bool
) -> None:
    page = open_console("human", viewport=viewport, dark=dark)
    open_a_thread(page)
    shortcuts = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(shortcuts).to_be_hidden()

    # In the composer ? is text, and Ctrl+/ opens the list.
    composer(page).press("?")
    expect(composer(page)).to_have_value("?")
    expect(shortcuts).to_be_hidden()
    composer(page).press("Control+/")
    expect(shortcuts).to_be_visible()
    for shortcut in ("Send", "New line", "Stop the reply", "Open the focused project or thread"):
        expect(shortcuts).to_contain_text(shortcut)
    assert violations(page) == []
    page.keyboard.press("Escape")
    expect(shortcuts).to_be_hidden()
    expect(composer(page)).to_be_focused()

    # Outside a text field, ? opens it.
    focus_nothing(page)
    page.keyboard.press("?")
    expect(shortcuts).to_be_visible()
    page.keyboard.press("Escape")
    expect(shortcuts).to_be_hidden()
