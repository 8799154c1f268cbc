"""How a reply is going, in the thread (SPEC §7.1): working with a ticking clock, the reply
streaming in, Stop for this thread only, turns marked stopped / failed / retrying, Regenerate."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Locator, Page, expect

from tests.console.pages import create_project, create_thread, messages, send, unique
from tests.support.console_pages import OpenConsole
from tests.support.model_servers import FakeModel

# Seconds between two streamed words: a reply of LONG_WORDS words takes a while to write.
SLOW_CHUNK_SECONDS = 0.4
LONG_WORDS = 60


def slow_reply(model: FakeModel) -> list[str]:
    words = [f"word{n}" for n in range(LONG_WORDS)]
    model.content = " ".join(words)
    model.chunk_delay = SLOW_CHUNK_SECONDS
    return words


def turn(page: Page, body: str) -> Locator:
    return messages(page).locator(".message", has=page.locator(".body", has_text=body))


def open_new_thread(page: Page, prefix: str) -> None:
    create_project(page, unique(prefix))
    create_thread(page, unique("thread"))


def send_in_new_thread(page: Page, prefix: str) -> tuple[Locator, str]:
    """A turn sent in a new thread: its message, and its mark."""
    open_new_thread(page, prefix)
    body = unique(prefix)
    send(page, body)
    return turn(page, body), body


def test_send_slow_reply_shows_working_clock_and_streamed_draft(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """While the model writes, the thread says "assistant is working… 0:0N" (ticking) and
    the reply streams in; when it is stored the draft gives way to the one reply."""
    words = slow_reply(model)
    model.chunk_delay = 0.1
    page = open_console("human")
    open_new_thread(page, "working")
    send(page, unique("write slowly"))

    run = page.locator("#run-text")
    expect(run).to_have_text(re.compile(r"^assistant is working… 0:0\d$"))
    first = run.text_content()
    expect(run).not_to_have_text(first or "", timeout=5_000)  # the clock ticks
    draft = messages(page).locator(".message.draft .body")
    expect(draft).to_contain_text("word0 word1")
    model.chunk_delay = 0.0  # seen streaming: the rest of the reply comes at once
    expect(messages(page).locator('[data-from="assistant"] .body')).to_have_text(
        " ".join(words), timeout=30_000
    )
    expect(messages(page).locator(".message.draft")).to_have_count(0)
    expect(page.locator("#run-state")).to_be_hidden()


def test_stop_sends_open_thread_and_marks_turn_stopped_then_regenerate_answers(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """Stop stops this thread only (`{"thread": ID}`); the turn is marked stopped, and its
    Regenerate asks it again as its second version (R24), which is answered; the stopped one
    stays behind the pager."""
    slow_reply(model)
    page = open_console("human")
    open_new_thread(page, "stop")
    thread = int(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')"))
    body = unique("stop me")
    send(page, body)
    expect(messages(page).locator(".message.draft .body")).to_contain_text("word0")

    with page.expect_request("**/api/chat/stop") as stopping:
        page.get_by_role("button", name="Stop", exact=True).click()
    assert json.loads(stopping.value.post_data or "{}") == {"thread": thread}
    expect(turn(page, body).locator(".turn-state")).to_contain_text("Stopped")
    expect(page.locator("#run-state")).to_be_hidden()
    expect(messages(page).locator(".message.draft")).to_have_count(0)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(0)

    model.chunk_delay = 0.0
    model.content = "answered at last"
    turn(page, body).get_by_role("button", name="Regenerate", exact=True).click()
    shown = messages(page).locator('[data-from="human"]:visible')
    expect(shown.locator(".body")).to_have_text([body])
    expect(shown.locator(".version-count")).to_have_text("2/2")
    expect(messages(page).locator('[data-from="assistant"] .body')).to_have_text(
        ["answered at last"]
    )
    shown.get_by_role("button", name="Previous version").click()
    expect(shown.locator(".turn-state")).to_contain_text("Stopped")
    expect(messages(page).locator('[data-from="assistant"]:visible')).to_have_count(0)


def test_send_refused_by_model_marks_turn_failed_with_sentence(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """A permanent failure marks the turn failed with the failure's sentence and a Regenerate."""
    model.status = 400
    model.error_message = "this model does not exist"
    page = open_console("tester")
    sent, _ = send_in_new_thread(page, "failed")
    mark = sent.locator(".turn-state")
    expect(mark).to_have_attribute("data-state", "failed")
    expect(mark).to_contain_text(re.compile("^Failed: .+"))
    expect(mark.get_by_role("button", name="Regenerate", exact=True)).to_be_visible()
    expect(page.locator("#run-state")).to_be_hidden()


def test_send_to_unavailable_model_shows_next_attempt_then_answer(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """A transient failure shows the turn retrying, with when the next attempt is; once the
    model answers, the reply lands and the mark goes."""
    model.status = 503
    page = open_console("human")
    sent, _ = send_in_new_thread(page, "retrying")
    mark = sent.locator(".turn-state")
    expect(mark).to_have_attribute("data-state", "retrying")
    expect(mark).to_contain_text(re.compile(r"next attempt at .+ \(in 0:0\d\)|next attempt now"))
    expect(page.locator("#run-text")).to_contain_text("assistant is retrying…")
    model.status = 200
    model.content = "back again"
    expect(messages(page).locator('[data-from="assistant"] .body')).to_have_text(
        ["back again"], timeout=30_000
    )
    expect(mark).to_be_hidden()
