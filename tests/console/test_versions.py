"""Edit, regenerate and branch in the Console (R24): a turn's versions shown one at a time with
"‹ 2/2 ›", Edit in place, Regenerate here or with another instance (a branch), and "Branch from
here"; a branch shows where it came from and the conversation it carries, set apart.

The server's business has two instances the human may talk to, `assistant` and `reviewer`,
answered by the tests' fake model, scripted per instance by its system prompt; every answer
names who wrote it, what it answers, and how many answers came before it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tester.suites.files import Suite, load_suite
from tests.console.api import LiveApi
from tests.console.assistant import WITH_REVIEWER
from tests.console.pages import create_project, create_thread, send, unique
from tests.console.server import business_server
from tests.console.test_accessibility import violations
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole
from tests.support.model_servers import FakeModel

# The Console's server with the demo business and a reviewer.
console_server = business_server("versions", WITH_REVIEWER)


def answering(model: FakeModel) -> None:
    """Each answer: "<instance> on <the last turn> #<n>", n counting every answer."""
    count = itertools.count(1)

    def text(body: dict[str, Any]) -> str:
        reviewer = body["messages"][0]["content"].startswith("You are reviewer")
        who = "reviewer" if reviewer else "assistant"
        asked = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
        return f"{who} on {asked} #{next(count)}"

    model.script = text


def own(page: Page) -> Locator:
    """The open thread's own messages the reader sees (a branch's carried part is apart)."""
    return page.locator("#messages > li.message:visible")


def turns(page: Page) -> Locator:
    return page.locator("#messages > li.message.mine:visible")


def replies(page: Page, writer: str = "assistant") -> Locator:
    return page.locator(f'#messages > li.message[data-from="{writer}"]:visible')


def carried(page: Page) -> Locator:
    return page.locator("#carried-list > li")


def asked(page: Page, body: str, writer: str = "assistant") -> None:
    """Sends `body` and waits for its answer."""
    send(page, body)
    expect(replies(page, writer).last.locator(".body")).to_contain_text(f"{writer} on {body} #")


def new_thread(page: Page, prefix: str) -> str:
    create_project(page, unique(prefix))
    name = unique("thread")
    create_thread(page, name)
    return name


@pytest.mark.parametrize(
    ("listener", "viewport"),
    [("human", DESKTOP), ("human", PHONE), ("tester", DESKTOP)],
    ids=["human-desktop", "human-phone", "tester-desktop"],
)
def test_edit_shows_the_new_version_and_pages_back_to_the_first_with_its_reply(
    open_console: OpenConsole, model: FakeModel, listener: str, viewport: dict[str, int]
) -> None:
    answering(model)
    page = open_console(listener, viewport=viewport)
    new_thread(page, "edit")
    first = unique("first")
    asked(page, first)
    turns(page).get_by_role("button", name="Edit").click()
    editor = page.get_by_label("Edit your message")
    expect(editor).to_be_focused()
    expect(editor).to_have_value(first)
    second = unique("second")
    editor.fill(second)
    editor.press("Enter")

    expect(turns(page)).to_have_count(1)
    expect(turns(page).locator(".body")).to_have_text(second)
    expect(turns(page).locator(".version-count")).to_have_text("2/2")
    expect(replies(page)).to_have_count(1)
    expect(replies(page).locator(".body")).to_contain_text(f"assistant on {second} #")
    expect(turns(page).get_by_role("button", name="Edit")).to_be_focused()

    turns(page).get_by_role("button", name="Previous version").click()
    expect(turns(page).locator(".version-count")).to_have_text("1/2")
    expect(turns(page).locator(".body")).to_have_text(first)
    expect(replies(page)).to_have_count(1)
    expect(replies(page).locator(".body")).to_contain_text(f"assistant on {first} #")
    expect(turns(page).get_by_role("button", name="Previous version")).to_be_disabled()

    turns(page).get_by_role("button", name="Next version").click()
    expect(turns(page).locator(".body")).to_have_text(second)
    expect(turns(page).locator(".version-count")).to_have_text("2/2")

    # After a reload the newest version is the one shown, the first behind the pager.
    page.reload()
    expect(turns(page).locator(".body")).to_have_text(second)
    expect(turns(page).locator(".version-count")).to_have_text("2/2")


def test_a_version_made_elsewhere_arrives_live_and_is_shown(
    open_console: OpenConsole, model: FakeModel, human_api: LiveApi
) -> None:
    """An edit made through the API while the thread is open comes over the thread's stream
    and becomes the version shown, with its reply, even when the reader had paged back."""
    answering(model)
    page = open_console("human")
    new_thread(page, "live")
    first = unique("first")
    asked(page, first)
    thread = int(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')"))
    turn = int(turns(page).get_attribute("data-id") or 0)
    second = unique("elsewhere")
    human_api.post(f"/api/chat/threads/{thread}/messages/{turn}/edit", {"body": second})
    expect(turns(page).locator(".body")).to_have_text(second)
    expect(turns(page).locator(".version-count")).to_have_text("2/2")
    expect(replies(page).locator(".body")).to_contain_text(f"assistant on {second} #")

    # Paged back to the first, the reader still sees a newer version when one arrives.
    turns(page).get_by_role("button", name="Previous version").click()
    expect(turns(page).locator(".body")).to_have_text(first)
    third = unique("third")
    human_api.post(f"/api/chat/threads/{thread}/messages/{turn}/edit", {"body": third})
    expect(turns(page).locator(".body")).to_have_text(third)
    expect(turns(page).locator(".version-count")).to_have_text("3/3")


def test_escape_cancels_an_edit_and_the_focus_returns_to_the_turn(
    open_console: OpenConsole, model: FakeModel
) -> None:
    answering(model)
    page = open_console("human")
    new_thread(page, "cancel")
    body = unique("kept")
    asked(page, body)
    turns(page).get_by_role("button", name="Edit").click()
    page.get_by_label("Edit your message").fill("never sent")
    page.get_by_label("Edit your message").press("Escape")
    expect(page.get_by_label("Edit your message")).to_have_count(0)
    expect(turns(page).locator(".body")).to_have_text(body)
    expect(turns(page).get_by_role("button", name="Edit")).to_be_focused()
    expect(turns(page).locator(".versions")).to_be_hidden()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_regenerate_shows_a_second_version_with_a_new_reply(
    open_console: OpenConsole, model: FakeModel, viewport: dict[str, int]
) -> None:
    answering(model)
    page = open_console("human", viewport=viewport)
    new_thread(page, "again")
    body = unique("question")
    asked(page, body)
    before = replies(page).locator(".body").text_content()
    replies(page).get_by_role("button", name="Regenerate", exact=True).click()
    expect(turns(page).locator(".version-count")).to_have_text("2/2")
    expect(turns(page).locator(".body")).to_have_text(body)
    expect(replies(page)).to_have_count(1)
    expect(replies(page).locator(".body")).to_contain_text(f"assistant on {body} #")
    expect(replies(page).locator(".body")).not_to_have_text(before or "")
    turns(page).get_by_role("button", name="Previous version").click()
    expect(replies(page).locator(".body")).to_have_text(before or "")


def two_turns(page: Page, model: FakeModel) -> tuple[str, str, str]:
    """A new thread with two answered turns: its name and the turns' bodies."""
    answering(model)
    source = new_thread(page, "source")
    one, two = unique("one"), unique("two")
    asked(page, one)
    asked(page, two)
    return source, one, two


def expect_branch_of(page: Page, source: str, carried_turn: str) -> None:
    """The branch of `source` is open, listed, and carries `carried_turn` and its reply."""
    expect(page.locator("#thread-title")).to_have_text(f"{source} (branch)")
    # The list learned the branch, as it learns a new chat, and marks it open.
    current = page.locator('#threads button[aria-current="true"] .thread-name')
    expect(current).to_have_text(f"{source} (branch)")
    expect(page.locator("#thread-origin")).to_have_text(f"Branched from {source}")
    expect(page.locator("#carried-heading")).to_have_text(f"From {source}")
    expect(carried(page)).to_have_count(2)
    expect(carried(page).first.locator(".body")).to_have_text(carried_turn)
    expect(carried(page).last.locator(".body")).to_contain_text(f"assistant on {carried_turn} #")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_regenerate_with_another_instance_opens_a_branch_that_carries_the_conversation(
    open_console: OpenConsole, model: FakeModel, viewport: dict[str, int]
) -> None:
    page = open_console("human", viewport=viewport)
    source, one, two = two_turns(page, model)
    reply = replies(page).last
    reply.get_by_role("button", name="Regenerate with…").click()
    expect(reply.get_by_role("button", name="Regenerate with assistant")).to_have_count(0)
    reply.get_by_role("button", name="Regenerate with reviewer").click()

    expect_branch_of(page, source, one)
    expect(turns(page).locator(".body")).to_have_text(two)
    expect(replies(page, "reviewer").locator(".body")).to_contain_text(f"reviewer on {two} #")
    expect(replies(page)).to_have_count(0)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_branch_from_here_opens_a_thread_whose_link_goes_back_to_the_source(
    open_console: OpenConsole, model: FakeModel, viewport: dict[str, int]
) -> None:
    page = open_console("human", viewport=viewport)
    source, one, two = two_turns(page, model)
    replies(page).first.get_by_role("button", name="Branch from here").click()
    expect_branch_of(page, source, one)
    expect(own(page)).to_have_count(0)
    expect(page.locator("#messages-state")).to_have_text("Continue the conversation below.")

    page.locator("#carried-heading").get_by_role("link", name=source).click()
    expect(page.locator("#thread-title")).to_have_text(source)
    expect(page.locator("#thread-origin")).to_be_hidden()
    expect(page.locator("#carried")).to_be_hidden()
    expect(turns(page).locator(".body")).to_have_text([one, two])


@pytest.mark.parametrize(
    ("viewport", "dark"), [(DESKTOP, False), (PHONE, True)], ids=["desktop-light", "phone-dark"]
)
def test_axe_finds_nothing_serious_on_versions_and_a_branch(
    open_console: OpenConsole, model: FakeModel, viewport: dict[str, int], dark: bool
) -> None:
    answering(model)
    page = open_console("human", viewport=viewport, dark=dark)
    new_thread(page, "axe")
    asked(page, unique("one"))
    replies(page).get_by_role("button", name="Regenerate", exact=True).click()
    expect(turns(page).locator(".version-count")).to_have_text("2/2")
    expect(replies(page)).to_have_count(1)
    replies(page).get_by_role("button", name="Regenerate with…").click()
    expect(replies(page).get_by_role("button", name="Regenerate with reviewer")).to_be_visible()
    assert violations(page) == []
    replies(page).get_by_role("button", name="Branch from here").click()
    expect(carried(page)).to_have_count(2)
    assert violations(page) == []


def saved_test_case(page: Page, folder: Path) -> Suite:
    """The open thread saved as a test case, loaded by the suite loader."""
    page.locator("#thread-export > summary").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Test case (.suite.toml)").click()
    saved = folder / download.value.suggested_filename
    saved.write_text(download.value.path().read_text(encoding="utf-8"), encoding="utf-8")
    return load_suite(saved)


def test_a_test_case_sends_the_conversation_as_it_reads(
    open_console: OpenConsole, model: FakeModel, tmp_path: Path
) -> None:
    """R24: a turn's newest version only, never the versions it replaced; a branch's test case
    replays the conversation it carries first."""
    page = open_console("human", viewport=DESKTOP)
    source, one, _two = two_turns(page, model)
    turns(page).last.get_by_role("button", name="Edit").click()
    edited = unique("edited")
    page.get_by_label("Edit your message").fill(edited)
    page.get_by_label("Edit your message").press("Enter")
    expect(replies(page).last.locator(".body")).to_contain_text(f"assistant on {edited} #")
    [case] = saved_test_case(page, tmp_path).cases
    assert [turn.send for turn in case.turns] == [one, edited]

    replies(page).first.get_by_role("button", name="Branch from here").click()
    expect_branch_of(page, source, one)
    third = unique("third")
    asked(page, third)
    [case] = saved_test_case(page, tmp_path).cases
    assert [turn.send for turn in case.turns] == [one, third]
