"""What the browser tests do on a Console page, as a person would."""

from __future__ import annotations

import uuid

from playwright.sync_api import Locator, Page, expect

from tests.console.server import PASSWORD

# After a restart the Console waits out its back-off (at most 10 s) before it reconnects.
RECONNECT_MS = 25_000
# The demo's staff superuser (`manage.py setupdemo`), signed in with the demo password.
STAFF_USERNAME = "staff"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def messages(page: Page) -> Locator:
    return page.get_by_role("log", name="Messages")


def trail(page: Page) -> Locator:
    return page.get_by_role("log", name="Trail")


def css_string(text: str) -> str:
    """`text` as a quoted CSS string, for an attribute selector."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\a ")
    return f'"{escaped}"'


def trail_rows(page: Page, text: str, *, thread: str | None = None) -> Locator:
    """The trail's rows whose stored text is `text` (R16's label and the body, as the API
    sends it: the row keeps it in `data-text`, and shows it in plain words); with `thread`, only
    those in the thread of that name. The live server is shared by the package's tests, and a run
    a test before left waiting on the model answers with whatever the model says next: a reply's
    text alone does not tell whose it is."""
    rows = trail(page).locator(f".trail-row[data-text={css_string(text)}]")
    if thread is None:
        return rows
    return rows.filter(has=page.locator(".trail-in").get_by_text(thread, exact=True))


def sign_in_admin(page: Page, human_url: str) -> None:
    """Into Django's admin on the human listener, as the demo's staff superuser."""
    page.goto(f"{human_url}/admin/login/")
    page.get_by_label("Username").fill(STAFF_USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{human_url}/admin/")


def create_project(page: Page, name: str) -> None:
    page.get_by_label("New project").fill(name)
    page.get_by_role("button", name="Create project").click()
    chosen = page.get_by_role("list", name="Projects", exact=True).get_by_role("button", name=name)
    expect(chosen).to_have_attribute("aria-current", "true")


def choose_project(page: Page, name: str) -> None:
    """Picks a project in the list; on the human's Console a project the tester made is in the
    folded "Tester projects" group, unfolded first."""
    choice = page.locator("#projects, #tester-projects").get_by_role(
        "button", name=name, include_hidden=True
    )
    expect(choice).to_have_count(1)
    if choice.is_hidden():
        page.locator("#tester-projects-group summary").click()
    choice.click()


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
