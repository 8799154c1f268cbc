"""A turn's steps in the Console (SPEC §7.2), on both Consoles, at 1440×900 and 390×844, light
and dark: what the assistant did shows as one card per step under its reply — one line read at
a glance, the tool, arguments and result folded under it — live and after a reload; the export
carries them; the trail shows them as rows of their own.

The server's assistant is the offline default (no model server): a turn `task: <title>` makes
one `create_task` step, done in a human's thread and refused in a tester's (R15). Lines for the
outcomes it cannot make are checked on the page's own words, and a call's started card giving
way to its ended one on frames the test adds to the thread's socket.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Locator, Page, WebSocketRoute, expect

from tests.console.pages import create_project, create_thread, messages, send, trail, unique
from tests.console.server import LiveServer, serving
from tests.console.test_accessibility import violations
from tests.console.test_chat_feel import expect_last_line_shown
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole

TITLE = "book the photographer"
TASK_TURN = f"task: {TITLE}"
# What the card says, on each side of the bus: the human's thread makes the task, the tester's
# is refused, since a test conversation creates no task (R15).
CARD_LINE = {
    "human": re.compile(rf"^Created task #\d+ · {TITLE}$"),
    "tester": re.compile(r"^Refused · a test conversation creates no task$"),
}
OUTCOME = {"human": "ok", "tester": "refused"}
EVERYWHERE = [
    pytest.param("human", DESKTOP, False, id="human-desktop-light"),
    pytest.param("tester", DESKTOP, True, id="tester-desktop-dark"),
    pytest.param("human", PHONE, True, id="human-phone-dark"),
    pytest.param("tester", PHONE, False, id="tester-phone-light"),
]


@pytest.fixture(scope="module")
def console_server(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The Console's server with its default assistant, the offline one: steps with no model."""
    with serving(tmp_path_factory.mktemp("steps"), f"mosaic_steps_{os.getpid()}") as server:
        yield server


def step_cards(page: Page) -> Locator:
    return messages(page).locator(".step")


def reply(page: Page) -> Locator:
    return messages(page).locator('[data-from="assistant"]')


def send_task_turn(page: Page, listener: str) -> None:
    """A new thread whose one turn asks for the task, answered."""
    create_project(page, unique("steps"))
    create_thread(page, unique("photographer"))
    send(page, TASK_TURN)
    expect(reply(page)).to_have_count(1)


def export(page: Page, label: str) -> str:
    page.locator("#thread-export > summary").click()
    with page.expect_download() as download:
        page.get_by_role("button", name=label).click()
    return download.value.path().read_text()


@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_task_turn_shows_one_step_card_under_its_reply_live_and_after_reload(
    open_console: OpenConsole,
    listener: str,
    viewport: dict[str, int],
    dark: bool,
) -> None:
    """`task: book the photographer` answered: one card under the reply, its line saying what
    came of the call, the tool and arguments folded under it; the newest line stays in view;
    after a reload the card is there again, from the messages API."""
    page = open_console(listener, viewport=viewport, dark=dark)
    send_task_turn(page, listener)
    card = reply(page).locator(".step")
    expect(card).to_have_count(1)
    expect(card.locator("summary")).to_have_text(CARD_LINE[listener])
    expect(card).to_have_attribute("data-outcome", OUTCOME[listener])
    expect(step_cards(page)).to_have_count(1)
    expect_last_line_shown(page)

    # Folded until asked; then the tool and its arguments as sent.
    expect(card.get_by_text("create_task", exact=True)).to_be_hidden()
    card.locator("summary").click()
    expect(card.get_by_text("create_task", exact=True)).to_be_visible()
    expect(card.locator(".step-value").nth(1)).to_contain_text(f'"title": "{TITLE}"')
    assert violations(page) == []

    page.reload()
    expect(reply(page)).to_have_count(1)
    expect(reply(page).locator(".step summary")).to_have_text([CARD_LINE[listener]])
    expect_last_line_shown(page)


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_export_lists_the_turns_steps_in_json_and_markdown(
    open_console: OpenConsole, listener: str
) -> None:
    """The JSON export carries each message's `steps`; the Markdown lists the turn's step under
    it, one line: tool, arguments, outcome, and what came of it."""
    page = open_console(listener)
    send_task_turn(page, listener)
    expect(step_cards(page)).to_have_count(1)

    rows = json.loads(export(page, "JSON (.json)"))["messages"]
    turn, answer = rows
    assert turn["body"] == TASK_TURN
    assert [(s["tool"], s["arguments"], s["outcome"]) for s in turn["steps"]] == [
        ("create_task", {"title": TITLE}, OUTCOME[listener])
    ]
    assert answer["steps"] == []

    markdown = export(page, "Markdown (.md)")
    line = next(line for line in markdown.splitlines() if line.startswith("- Step "))
    head = f'- Step `create_task` `{{"title":"{TITLE}"}}` · {OUTCOME[listener]} · '
    assert line.startswith(head), line
    assert CARD_LINE[listener].fullmatch(line.removeprefix(head)), line
    assert markdown.index(TASK_TURN) < markdown.index(line) < markdown.index("## assistant\n")


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_trail_shows_the_step_as_a_row_of_its_own(open_console: OpenConsole, listener: str) -> None:
    """The step reaches the trail as a row of kind `step`, said by the assistant."""
    page = open_console(listener)
    send_task_turn(page, listener)
    row = trail(page).locator('.trail-row[data-kind="step"]').last
    expect(row.locator(".trail-who")).to_have_text("assistant")
    expect(row.locator(".trail-text")).to_contain_text(f'create_task {{"title": "{TITLE}"}}')


def step(
    call_id: str, tool: str, outcome: str | None, result: object, **more: object
) -> dict[str, object]:
    return {
        "id": None if outcome is None else 1,
        "call_id": call_id,
        "round": 1,
        "tool": tool,
        "arguments": more.pop("arguments", {}),
        "outcome": outcome,
        "code": more.pop("code", None),
        "result": result,
        "started_at": "2026-12-04T10:00:00.123Z",
        "ended_at": None if outcome is None else "2026-12-04T10:00:00.200Z",
    }


REFUSED = {
    "error": "message-recipient-refused",
    "detail": "Not sent: the reviewer takes no messages.",
}
NOT_RUN = {"error": "unknown-tool", "detail": "There is no tool called book_venue."}
LINES = [
    (step("a", "send_message", "ok", {"message": 7, "to": "reviewer"}), "Asked reviewer"),
    (step("a2", "send_message", "ok", {"message": 8, "to": "human"}), "Sent to human"),
    (step("b", "ask_human", "ok", {"decision": 5}), "Asked the human · decision #5"),
    (step("c", "create_task", None, None), "Calling create_task…"),
    (step("d", "book_venue", "error", NOT_RUN), "Not run · There is no tool called book_venue."),
    (
        step("e", "send_message", "refused", REFUSED, code="message-recipient-refused"),
        "Refused · Not sent: the reviewer takes no messages.",
    ),
    (
        step("f", "create_task", "ok", {"task": 12, "title": "book\n the  photographer"}),
        "Created task #12 · book the photographer",
    ),
]


def test_each_outcome_reads_as_one_line(open_console: OpenConsole) -> None:
    """The line of every outcome the offline assistant cannot make, on the page's own words."""
    page = open_console("human")
    got = page.evaluate(
        """async (steps) => {
            const { stepLine } = await import("/static/console/steps.js");
            return steps.map(stepLine);
        }""",
        [given for given, _ in LINES],
    )
    assert got == [line for _, line in LINES]


def test_started_card_gives_way_to_its_ended_card_in_place(open_console: OpenConsole) -> None:
    """Live `reply.step` frames: a call's started card ("Calling …") is replaced by its ended
    one, after the turn's earlier step, never shown twice; a late start changes nothing."""
    page = open_console("human")
    sockets: list[WebSocketRoute] = []

    def through(socket: WebSocketRoute) -> None:
        socket.connect_to_server()
        sockets.append(socket)

    page.route_web_socket(re.compile(r"/ws/chat/threads/\d+/"), through)
    send_task_turn(page, "human")
    expect(step_cards(page)).to_have_count(1)
    turn = int(messages(page).locator('[data-from="human"]').get_attribute("data-id") or 0)

    def frame(given: dict[str, object]) -> None:
        sockets[-1].send(json.dumps({"type": "reply.step", "in_reply_to": turn, "step": given}))

    started = step("later", "send_message", None, None, arguments={"to": "reviewer", "body": "hi"})
    started["started_at"] = "2999-01-01T00:00:00Z"
    frame(started)
    expect(step_cards(page).locator("summary")).to_have_text(
        [CARD_LINE["human"], "Calling send_message…"]
    )
    ended = {**started, "outcome": "ok", "result": {"message": 9, "to": "reviewer"}}
    frame(ended)
    expect(step_cards(page).locator("summary")).to_have_text([CARD_LINE["human"], "Asked reviewer"])
    # Frames are read in order: once the next call shows, the late start was read before it.
    frame(started)
    last = step("last", "ask_human", None, None, arguments={"question": "which date?"})
    last["started_at"] = "2999-01-01T00:00:01Z"
    frame(last)
    expect(step_cards(page).locator("summary")).to_have_text(
        [CARD_LINE["human"], "Asked reviewer", "Calling ask_human…"]
    )


def test_cards_wait_under_the_turn_until_its_reply_shows(open_console: OpenConsole) -> None:
    """While the turn has no reply on the page, its cards sit right under it, on the
    assistant's side; when the reply lands they move under the reply. (The offline assistant
    answers at once: the test holds the reply back on the thread's socket.)"""
    page = open_console("human")
    held: list[str] = []
    hold = {"on": True}

    def holding_replies(socket: WebSocketRoute) -> None:
        server = socket.connect_to_server()

        def from_server(text: str | bytes) -> None:
            if hold["on"] and isinstance(text, str) and '"RESULT"' in text:
                held.append(text)
            else:
                socket.send(text)

        server.on_message(from_server)
        holding.append(socket)

    holding: list[WebSocketRoute] = []
    page.route_web_socket(re.compile(r"/ws/chat/threads/\d+/"), holding_replies)
    create_project(page, unique("steps"))
    create_thread(page, unique("photographer"))
    send(page, TASK_TURN)
    waiting = messages(page).locator('[data-from="human"] + .steps-holder .step summary')
    expect(waiting).to_have_text(CARD_LINE["human"])
    expect(reply(page)).to_have_count(0)

    hold["on"] = False
    for text in held:
        holding[-1].send(text)
    expect(reply(page).locator(".step summary")).to_have_text([CARD_LINE["human"]])
    expect(messages(page).locator(".steps-holder")).to_have_count(0)
    expect(step_cards(page)).to_have_count(1)
