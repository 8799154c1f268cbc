"""What the browser tests do on a Console page, as a person would."""

from __future__ import annotations

import uuid

from playwright.sync_api import Locator, Page, expect

# After a restart the Console waits out its back-off (at most 10 s) before it reconnects.
RECONNECT_MS = 25_000


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def messages(page: Page) -> Locator:
    return page.get_by_role("log", name="Messages")


def trail(page: Page) -> Locator:
    return page.get_by_role("log", name="Trail")


def trail_rows(page: Page, text: str) -> Locator:
    return trail(page).locator(".trail-text").get_by_text(text, exact=True)


def create_project(page: Page, name: str) -> None:
    page.get_by_label("New project").fill(name)
    page.get_by_role("button", name="Create project").click()
    chosen = page.get_by_role("list", name="Projects", exact=True).get_by_role("button", name=name)
    expect(chosen).to_have_attribute("aria-current", "true")


def choose_project(page: Page, name: str) -> None:
    page.get_by_role("list", name="Projects", exact=True).get_by_role("button", name=name).click()


def create_thread(page: Page, name: str) -> None:
    page.get_by_label("New thread").fill(name)
    page.get_by_role("button", name="Create thread").click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(page.locator("#thread-status")).to_have_text("live")


def send(page: Page, body: str) -> None:
    composer = page.get_by_label("Message", exact=True)
    composer.fill(body)
    composer.press("Enter")
    expect(composer).to_have_value("")


def mark_page(page: Page) -> None:
    """A mark that a reload would wipe out."""
    page.evaluate("window.notReloaded = true")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.notReloaded === true")
