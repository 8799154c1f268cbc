"""A reply's details, the thread's token total, the trail folded to a rail, the trail's bodies
rendered, and a thread saved as a test case — on the Console at 1440×900 and 390×844.

The server's assistant answers through the tests' model server, which names its model and
reports 11 prompt and 2 completion tokens for every reply (`FakeModel.usage`): the details and
the totals are checked against those. Positions are read from bounding boxes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from tester.suites.files import load_suite
from tests.console.api import LiveApi
from tests.console.assistant import MODEL_NAME
from tests.console.pages import create_project, create_thread, messages, send, trail, unique
from tests.console.test_accessibility import violations
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole
from tests.support.model_servers import FakeModel

SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
# The tests' model server's usage of every reply.
PROMPT_TOKENS, COMPLETION_TOKENS = 11, 2
SECONDS = re.compile(r"^\d+\.\d{1,2} s$")


def replies(page: Page) -> Locator:
    return messages(page).locator('[data-class="RESULT"]')


def answered_turn(page: Page, body: str, count: int) -> None:
    send(page, body)
    expect(replies(page)).to_have_count(count)


def details_of(reply: Locator) -> dict[str, str]:
    rows = reply.locator(".reply-details .reply-detail")
    return dict(
        zip(rows.locator("dt").all_inner_texts(), rows.locator("dd").all_inner_texts(), strict=True)
    )


@pytest.mark.parametrize(
    ("viewport", "dark"),
    [
        pytest.param(DESKTOP, False, id="desktop-light"),
        pytest.param(PHONE, True, id="phone-dark"),
    ],
)
def test_reply_details_unfold_with_model_tokens_and_timing_and_thread_shows_its_total(
    open_console: OpenConsole, viewport: dict[str, int], dark: bool
) -> None:
    page = open_console("human", viewport=viewport, dark=dark)
    create_project(page, unique("details"))
    create_thread(page, unique("details"))
    answered_turn(page, unique("first"), 1)
    reply = replies(page).first
    toggle = reply.get_by_role("button", name="Details")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(reply.locator(".reply-details")).to_be_hidden()

    # From the keyboard: the button is reached and unfolds with Enter.
    toggle.focus()
    page.keyboard.press("Enter")
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(reply.locator(".reply-details")).to_be_visible()
    shown = details_of(reply)
    assert shown["Instance"] == "assistant"
    assert shown["Model"] == MODEL_NAME
    assert (shown["Prompt tokens"], shown["Completion tokens"]) == (
        str(PROMPT_TOKENS),
        str(COMPLETION_TOKENS),
    )
    assert SECONDS.match(shown["Duration"]), shown
    assert SECONDS.match(shown["Time to first token"]), shown
    assert shown["Finish reason"] == "stop"
    assert violations(page) == []

    # The thread's total beside its title, again as each reply arrives.
    usage = page.locator("#thread-usage")
    expect(usage).to_have_text(f"{PROMPT_TOKENS + COMPLETION_TOKENS} tokens")
    answered_turn(page, unique("second"), 2)
    expect(usage).to_have_text(f"{2 * (PROMPT_TOKENS + COMPLETION_TOKENS)} tokens")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(reply.locator(".reply-details")).to_be_hidden()

    page.reload()
    expect(replies(page)).to_have_count(2)
    expect(usage).to_have_text(f"{2 * (PROMPT_TOKENS + COMPLETION_TOKENS)} tokens")


def turn_of_tester(api: LiveApi, body: str) -> None:
    thread = api.create_thread(api.create_project(unique("trail")), unique("trail"))
    api.send(thread, body)


@pytest.mark.parametrize("viewport", SIZES)
def test_trail_bodies_show_as_the_thread_shows_them(
    open_console: OpenConsole, tester_api: LiveApi, model: FakeModel, viewport: dict[str, int]
) -> None:
    """A reply in the trail is the thread's sanitised markdown; a person's turn stays as typed,
    as the thread shows it."""
    page = open_console("tester", viewport=viewport)
    word, typed = unique("bold"), unique("typed")
    model.content = f"a **{word}** word and `code` <b>tag</b>"
    turn_of_tester(tester_api, f"my **{typed}** turn")
    if viewport == PHONE:
        page.get_by_role("tab", name="Trail").click()
    reply = trail(page).locator(".trail-row", has_text=word).first
    expect(reply).to_be_visible()
    text = reply.locator(".trail-text")
    expect(text.locator("strong")).to_have_text(word)
    expect(text.locator("code")).to_have_text("code")
    expect(text).not_to_contain_text("**")
    # Raw HTML stays text, as in the thread (the sanitiser's own rule).
    expect(text.locator("b")).to_have_count(0)
    expect(text).to_contain_text("<b>tag</b>")
    turn = trail(page).locator(".trail-row", has_text=typed).first.locator(".trail-text")
    expect(turn).to_have_text(f"my **{typed}** turn")
    expect(turn.locator("strong")).to_have_count(0)


@pytest.mark.parametrize(
    ("listener", "viewport"),
    [
        pytest.param("human", DESKTOP, id="human-desktop"),
        pytest.param("tester", PHONE, id="tester-phone"),
    ],
)
def test_thread_saves_as_a_test_case_the_suite_loader_reads(
    open_console: OpenConsole, listener: str, viewport: dict[str, int], tmp_path: Path
) -> None:
    """Each of the owner's messages is a `send`; each reply a commented-out expectation. The
    file loads as it is (a reply within 30 s expected), and with its expectations uncommented."""
    page = open_console(listener, viewport=viewport)
    project, name = unique("suite project"), unique("suite case")
    create_project(page, project)
    create_thread(page, name)
    first = 'say "hi" \\ back\nand a second line ✓'
    second = unique("second")
    answered_turn(page, first, 1)
    answered_turn(page, second, 2)

    page.locator("#thread-export > summary").click()
    with page.expect_download() as download:
        page.get_by_role("button", name="Test case (.suite.toml)").click()
    assert download.value.suggested_filename.endswith(".suite.toml")
    text = download.value.path().read_text(encoding="utf-8")
    saved = tmp_path / download.value.suggested_filename
    saved.write_text(text, encoding="utf-8")

    suite = load_suite(saved)
    assert (suite.name, suite.project) == (name, project)
    [case] = suite.cases
    assert (case.name, case.instance) == (name, "assistant")
    assert [turn.send for turn in case.turns] == [first, second]
    assert all(turn.expect.contains == () for turn in case.turns)
    assert text.count("# expect = {") == 2, text

    # Each expectation, kept, is a real one of the suite file's keys.
    kept = saved.with_name("kept.suite.toml")
    kept.write_text(text.replace("# expect = {", "expect = {"), encoding="utf-8")
    expected = load_suite(kept).cases[0].turns
    assert [turn.expect.contains for turn in expected] == [("model reply",)] * 2
    assert [(turn.expect.model, turn.expect.finish_reason) for turn in expected] == [
        (MODEL_NAME, "stop")
    ] * 2
    expect(page.locator("#actions-notice")).to_contain_text(".suite.toml")
