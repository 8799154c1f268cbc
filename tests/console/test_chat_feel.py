"""The thread as a chat, on both Consoles, at 1440×900 and 390×844, light and dark.

- Scrolling: the reader's own send always shows it; a reply landing or streaming while the
  reader is at the bottom keeps the last line of the newest message fully on screen, above the
  composer; scrolled up, the view stays and a "New messages ↓" button takes the reader down;
  opening or reloading a thread shows its last line.
- Stop keeps what was written: the stopped turn's partial reply stays in the thread, marked
  stopped, after a reload too.
- Esc in the composer stops this thread's reply; Esc closes the rename form.
- Thread states: "Archived"; an address naming no thread of the reader's says "Not found" or
  "Not yours" with the composer disabled, loaded or reached by changing the address.

Positions are read from bounding boxes. Slow cases are slow by construction (the model's
`chunk_delay`), never by sleeping: a reply streams a line at a time for longer than any check
made while it streams, and once those checks are done the test lets it finish at once.
"""

from __future__ import annotations

import contextlib
import json
import time

import pytest
from playwright.sync_api import FloatRect, Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.console.api import LiveApi
from tests.console.pages import create_project, create_thread, messages, send, unique
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer
from tests.support.console_pages import DESKTOP, PHONE, TIMEOUT_MS, OpenConsole
from tests.support.model_servers import FakeModel

# A reply long enough to fill the log several times over at either size.
LONG_REPLY = "\n\n".join(
    f"Paragraph {n} of a long answer, with a few more words." for n in range(24)
)
# A streamed reply: this many lines, one chunk each, LINE_SECONDS apart (18 s), unless the test
# lets it finish sooner (`finish_stream`). It never pauses: the server stores a draft at most
# every 0.1 s and the page is told of the stored ones, so a stream held still could leave the
# page a draft behind for good, where a stream that goes on brings the next one.
STREAM_LINES = 120
LINE_SECONDS = 0.15
# Long enough that a stop always lands mid-reply: the whole reply would take a minute.
STOPPED_LINES = 400
# Rounding of layout boxes (sub-pixel positions).
SLACK_PX = 1.5

SIZES = [
    pytest.param(DESKTOP, False, id="desktop-light"),
    pytest.param(PHONE, True, id="phone-dark"),
]
EVERYWHERE = [
    pytest.param("human", DESKTOP, False, id="human-desktop-light"),
    pytest.param("tester", DESKTOP, True, id="tester-desktop-dark"),
    pytest.param("human", PHONE, True, id="human-phone-dark"),
    pytest.param("tester", PHONE, False, id="tester-phone-light"),
]


def thread_id(page: Page) -> int:
    return int(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')"))


def log(page: Page) -> Locator:
    return messages(page)


def last_item(page: Page) -> Locator:
    """The newest message the reader can see: a row the thread keeps hidden is no line of it."""
    return page.locator("#messages > li:visible").last


def box(locator: Locator) -> FloatRect:
    found = locator.bounding_box()
    assert found is not None, locator
    return found


def last_line_shown(page: Page) -> bool:
    """The newest message's last line is fully on screen: inside the log's box, inside the
    viewport, and above the composer, which is on screen too."""
    item, scroller, composer = box(last_item(page)), box(log(page)), box(page.locator("#composer"))
    height = page.viewport_size["height"] if page.viewport_size else 0
    bottom = item["y"] + item["height"]
    return (
        bottom <= scroller["y"] + scroller["height"] + SLACK_PX
        and bottom <= height + SLACK_PX
        and bottom <= composer["y"] + SLACK_PX
        and bottom > scroller["y"]
        and composer["y"] + composer["height"] <= height + SLACK_PX
    )


def geometry(page: Page) -> dict[str, object]:
    """What the assertion above read, for its failure message."""
    return {
        "item": last_item(page).bounding_box(),
        "log": log(page).bounding_box(),
        "composer": page.locator("#composer").bounding_box(),
        "viewport": page.viewport_size,
        "scroll": log(page).evaluate("(l) => [l.scrollTop, l.scrollHeight, l.clientHeight]"),
    }


def expect_last_line_shown(page: Page) -> None:
    """Polls (layout settles within a frame or two of a change), then asserts with the boxes."""
    with contextlib.suppress(PlaywrightTimeoutError):
        page.wait_for_function(
            """() => {
                const item = [...document.querySelectorAll('#messages > li')]
                    .filter((row) => row.getClientRects().length).pop();
                const log = document.getElementById('messages-log').getBoundingClientRect();
                const composer = document.getElementById('composer').getBoundingClientRect();
                if (!item) return false;
                const bottom = item.getBoundingClientRect().bottom;
                return bottom <= Math.min(log.bottom, innerHeight, composer.top) + 1.5
                    && bottom > log.top && composer.bottom <= innerHeight + 1.5;
            }""",
            timeout=TIMEOUT_MS,
        )
    assert last_line_shown(page), geometry(page)


def human_api(server: LiveServer) -> LiveApi:
    api = LiveApi(server.human_url)
    api.sign_in(HUMAN_USERNAME, PASSWORD)
    return api


def api_for(listener: str, server: LiveServer) -> LiveApi:
    return human_api(server) if listener == "human" else LiveApi(server.tester_url)


def long_thread(api: LiveApi, model: FakeModel, turns: int = 3) -> int:
    """A thread of `turns` answered turns with long replies, made through the API."""
    model.content = LONG_REPLY
    project = api.create_project(unique("feel"))
    thread = api.create_thread(project, unique("long"))
    for n in range(turns):
        turn = api.send(thread, unique(f"turn {n}"))
        wait_answered(api, thread, turn)
    return thread


def wait_answered(api: LiveApi, thread: int, turn: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rows = api.get(f"/api/chat/threads/{thread}/messages?after={turn - 1}")["messages"]
        if any(row["in_reply_to"] == turn and row["class"] == "RESULT" for row in rows):
            return
        time.sleep(0.05)
    raise AssertionError(f"turn {turn} was not answered")


def open_thread(page: Page, thread: int) -> None:
    page.evaluate(f"location.hash = '#thread={thread}'")
    expect(page.locator("#thread-status")).to_have_text("live")


def stream_slowly(model: FakeModel, lines: int = STREAM_LINES, delay: float = LINE_SECONDS) -> str:
    """The next reply streams `lines` lines, a line a chunk, `delay` seconds apart; its text."""
    shown = [f"streamed line {n}" for n in range(lines)]
    pieces = [f"{line}\n\n" for line in shown[:-1]] + shown[-1:]
    model.pieces = pieces
    model.content = "".join(pieces)
    model.chunk_delay = delay
    return model.content


def finish_stream(model: FakeModel) -> None:
    """The reply streaming now sends the rest of its lines at once; the replies after it come
    whole."""
    model.chunk_delay = 0.0
    model.pieces = None


# --- 1. scrolling like a chat ----------------------------------------------------------------


@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_open_send_stream_and_land_keep_last_line_in_view(
    open_console: OpenConsole,
    console_server: LiveServer,
    model: FakeModel,
    listener: str,
    viewport: dict[str, int],
    dark: bool,
) -> None:
    """Opening and reloading a long thread shows its last line; the reader's own send shows
    it; a reply streaming in and then landing stays in view to its last line."""
    api = api_for(listener, console_server)
    thread = long_thread(api, model)
    page = open_console(listener, viewport=viewport, dark=dark)
    open_thread(page, thread)
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(3)
    expect_last_line_shown(page)
    page.reload()
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(3)
    expect_last_line_shown(page)

    text = stream_slowly(model)
    body = unique("my turn")
    send(page, body)
    expect(last_item(page)).to_contain_text(body)
    expect_last_line_shown(page)
    draft = log(page).locator(".message.draft")
    expect(draft).to_contain_text("streamed line 12")
    expect_last_line_shown(page)
    finish_stream(model)
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(4, timeout=30_000)
    expect(last_item(page)).to_contain_text(text.split("\n\n")[-1])
    expect_last_line_shown(page)
    api.close()


# The phone's height once an on-screen keyboard takes the lower part of the screen.
KEYBOARD_UP = {"width": PHONE["width"], "height": 480}
KEYBOARD_LOG_PX = 120


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_phone_keyboard_taking_room_keeps_composer_and_last_line_in_view(
    open_console: OpenConsole, console_server: LiveServer, model: FakeModel, listener: str
) -> None:
    """The page follows the visible height (an on-screen keyboard resizes it): the composer
    stays on screen and the newest line above it, while the keyboard is up and after."""
    api = api_for(listener, console_server)
    thread = long_thread(api, model, turns=1)
    page = open_console(listener, viewport=PHONE)
    open_thread(page, thread)
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(1)
    page.get_by_label("Message", exact=True).focus()
    page.set_viewport_size(KEYBOARD_UP)
    expect_last_line_shown(page)
    # The conversation keeps the room: a few lines at least, however tall the bars above.
    assert box(log(page))["height"] >= KEYBOARD_LOG_PX, geometry(page)
    page.set_viewport_size(PHONE)
    expect_last_line_shown(page)
    api.close()


def scroll_log_to_top(page: Page) -> None:
    """Scrolls as a reader does, and returns once the page has had the scroll event: until then
    it still follows the newest line, and what lands next would take the view down."""
    log(page).evaluate(
        """(node) => new Promise((done) => {
            if (node.scrollTop === 0) return done();
            node.addEventListener("scroll", () => done(), { once: true });
            node.scrollTop = 0;
        })"""
    )


@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_scrolled_up_reader_stays_put_and_new_messages_button_takes_them_down(
    open_console: OpenConsole,
    console_server: LiveServer,
    model: FakeModel,
    listener: str,
    viewport: dict[str, int],
    dark: bool,
) -> None:
    """Scrolled up, a reply streaming and landing moves nothing: "New messages ↓" appears and
    takes the reader down to the last line; the reader's own send always shows it."""
    api = api_for(listener, console_server)
    thread = long_thread(api, model, turns=2)
    page = open_console(listener, viewport=viewport, dark=dark)
    open_thread(page, thread)
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(2)
    jump = page.get_by_role("button", name="New messages ↓")
    expect(jump).to_be_hidden()

    scroll_log_to_top(page)
    model.content = LONG_REPLY
    model.chunk_delay = 0.01
    api.send(thread, unique("from elsewhere"))  # another tab of the same reader
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(3, timeout=30_000)
    expect(jump).to_be_visible()
    assert log(page).evaluate("(node) => node.scrollTop") == 0
    assert not last_line_shown(page)
    jump.click()
    expect(jump).to_be_hidden()
    expect_last_line_shown(page)

    scroll_log_to_top(page)
    model.chunk_delay = 0.0
    body = unique("mine again")
    send(page, body)
    expect(log(page).locator(".message.mine").last).to_contain_text(body)
    expect_last_line_shown(page)
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(4, timeout=30_000)
    expect_last_line_shown(page)
    expect(jump).to_be_hidden()
    api.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_new_messages_shows_only_for_a_row_that_arrived_below_the_view(
    open_console: OpenConsole, human_api: LiveApi, model: FakeModel, viewport: dict[str, int]
) -> None:
    """A reply streamed and landed while the reader was at the bottom; the reader copies it and
    scrolls up. Nothing arrived below (Copy saying "Copied" and back is no message), so no
    "New messages ↓"; a message that then arrives below the view shows it."""
    api = human_api
    thread = long_thread(api, model, turns=2)
    page = open_console("human", viewport=viewport)
    open_thread(page, thread)
    jump = page.get_by_role("button", name="New messages ↓")
    stream_slowly(model, lines=12, delay=0.05)
    send(page, unique("at the bottom"))
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(3, timeout=30_000)
    expect(page.locator("#run-state")).to_be_hidden()
    expect_last_line_shown(page)

    copy = (
        log(page)
        .locator('[data-from="assistant"]')
        .last.get_by_role("button", name="Copy the whole answer")
    )
    copy.click()
    expect(copy).not_to_have_text("Copy")
    scroll_log_to_top(page)
    expect(copy).to_have_text("Copy")  # back after its two seconds, scrolled up
    expect(jump).to_be_hidden()

    model.chunk_delay = 0.0
    api.send(thread, unique("from elsewhere"))
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(4, timeout=30_000)
    expect(jump).to_be_visible()


# --- 2 and 3. stop keeps what was written; Esc -----------------------------------------------


@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_esc_stops_this_thread_and_partial_reply_stays_marked_after_reload(
    open_console: OpenConsole,
    model: FakeModel,
    listener: str,
    viewport: dict[str, int],
    dark: bool,
) -> None:
    """Esc in the composer stops this thread's reply (`{"thread": ID}`); what had streamed
    stays in the thread after the turn, marked stopped, with no reply; a reload shows the same."""
    page = open_console(listener, viewport=viewport, dark=dark)
    create_project(page, unique("stop"))
    create_thread(page, unique("thread"))
    thread = thread_id(page)
    stream_slowly(model, lines=STOPPED_LINES)
    body = unique("write slowly")
    send(page, body)
    expect(log(page).locator(".message.draft .body")).to_contain_text("streamed line 2")

    composer = page.get_by_label("Message", exact=True)
    with page.expect_request("**/api/chat/stop") as stopping:
        composer.press("Escape")
    assert json.loads(stopping.value.post_data or "{}") == {"thread": thread}
    partial = log(page).locator(".message.partial")
    expect(partial).to_have_count(1)
    expect(partial.locator(".meta")).to_have_text("assistant · stopped")
    expect(partial.locator(".body")).to_contain_text("streamed line 2")
    mark = log(page).locator(".message.mine .turn-state")
    expect(mark).to_have_attribute("data-state", "stopped")
    expect(mark).to_contain_text("Stopped")
    expect(log(page).locator(".message.draft")).to_have_count(0)
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(0)
    expect(page.locator("#run-state")).to_be_hidden()
    expect_last_line_shown(page)
    kept = partial.locator(".body").inner_text()

    page.reload()
    expect(page.locator("#thread-status")).to_have_text("live")
    partial = log(page).locator(".message.partial")
    expect(partial).to_have_count(1)
    expect(partial.locator(".meta")).to_have_text("assistant · stopped")
    assert partial.locator(".body").inner_text() == kept
    expect(log(page).locator(".message.mine .turn-state")).to_have_attribute(
        "data-state", "stopped"
    )
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(0)
    expect_last_line_shown(page)

    # The next turn lands after the stopped one, and its partial stays where it was.
    finish_stream(model)
    model.content = "answered"
    send(page, unique("next"))
    expect(log(page).locator('[data-from="assistant"] .body')).to_have_text(["answered"])
    order = (
        log(page)
        .locator("#messages > li")
        .evaluate_all(
            "(all) => all.map((i) => i.classList.contains('partial') ? 'partial' : i.dataset.from)"
        )
    )
    assert order == [listener, "partial", listener, "assistant"]


@pytest.mark.parametrize(("viewport", "dark"), SIZES)
def test_esc_with_nothing_owed_sends_no_stop_and_esc_closes_rename(
    open_console: OpenConsole, model: FakeModel, viewport: dict[str, int], dark: bool
) -> None:
    """Esc in the composer with no reply owed stops nothing; Esc in the rename form closes it
    and gives the focus back to Rename."""
    page = open_console("human", viewport=viewport, dark=dark)
    create_project(page, unique("esc"))
    create_thread(page, unique("thread"))
    send(page, unique("hello"))
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(1)
    stops: list[str] = []
    page.on("request", lambda asked: stops.append(asked.url) if "/chat/stop" in asked.url else None)
    page.get_by_label("Message", exact=True).press("Escape")
    page.get_by_role("button", name="Rename").click()
    name = page.get_by_label("New name of this thread")
    expect(name).to_be_focused()
    name.press("Escape")
    expect(page.locator("#rename-form")).to_be_hidden()
    expect(page.get_by_role("button", name="Rename")).to_be_focused()
    assert stops == []


# --- 4. thread states ------------------------------------------------------------------------


def expect_unavailable(page: Page, badge: str) -> None:
    expect(page.locator("#thread-badge")).to_have_text(badge)
    expect(page.locator("#thread-badge")).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_be_disabled()
    expect(page.get_by_role("button", name="Send")).to_be_disabled()
    expect(page.locator("#messages-state")).to_be_visible()


@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_address_of_no_thread_or_the_other_sides_says_so_with_composer_disabled(
    open_console: OpenConsole,
    console_server: LiveServer,
    listener: str,
    viewport: dict[str, int],
    dark: bool,
) -> None:
    """A thread address that names nothing says "Not found", one of the other side's thread
    "Not yours" — loaded, or reached by editing the address — and nothing can be written;
    opening a thread of one's own again writes as before."""
    other = "tester" if listener == "human" else "human"
    other_api = api_for(other, console_server)
    theirs = other_api.create_thread(other_api.create_project(unique("theirs")), unique("theirs"))
    other_api.close()
    page = open_console(listener, viewport=viewport, dark=dark)
    create_project(page, unique("states"))
    create_thread(page, unique("mine"))
    mine = thread_id(page)
    base = console_server.human_url if listener == "human" else console_server.tester_url

    page.evaluate("location.hash = '#thread=999999999'")
    expect_unavailable(page, "Not found")
    expect(page.locator("#thread-title")).to_have_text("Thread not found")
    page.evaluate(f"location.hash = '#thread={theirs}'")
    expect_unavailable(page, "Not yours")
    expect(page.locator("#thread-title")).to_have_text("Not your thread")

    page.goto(f"{base}/#thread=999999999")
    expect_unavailable(page, "Not found")
    page.goto(f"{base}/#thread={theirs}")
    page.reload()
    expect_unavailable(page, "Not yours")

    page.evaluate(f"location.hash = '#thread={mine}'")
    expect(page.locator("#thread-status")).to_have_text("live")
    expect(page.locator("#thread-badge")).to_be_hidden()
    expect(page.get_by_label("Message", exact=True)).to_be_enabled()


@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_archived_thread_shows_archived_badge(
    open_console: OpenConsole, listener: str, viewport: dict[str, int], dark: bool
) -> None:
    """Archiving the open thread shows "Archived" beside its title, and opening it again by
    its address does too; unarchiving takes the badge away."""
    page = open_console(listener, viewport=viewport, dark=dark)
    create_project(page, unique("badge"))
    create_thread(page, unique("thread"))
    thread = thread_id(page)
    badge = page.locator("#thread-badge")
    expect(badge).to_be_hidden()
    page.get_by_role("button", name="Archive", exact=True).click()
    expect(badge).to_have_text("Archived")
    expect(badge).to_be_visible()
    page.reload()
    open_thread(page, thread)
    expect(badge).to_have_text("Archived")
    page.get_by_role("button", name="Unarchive", exact=True).click()
    expect(badge).to_be_hidden()


# --- accessibility of the views above --------------------------------------------------------


@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_axe_new_messages_partial_reply_and_thread_states_have_no_serious_violations(
    open_console: OpenConsole,
    console_server: LiveServer,
    model: FakeModel,
    listener: str,
    viewport: dict[str, int],
    dark: bool,
) -> None:
    """axe-core (as test_accessibility.py runs it) with "New messages ↓" shown; with a stopped
    partial reply and the "Archived" badge; and on a thread address that names no thread."""
    from tests.console.test_accessibility import violations

    api = api_for(listener, console_server)
    thread = long_thread(api, model, turns=1)
    page = open_console(listener, viewport=viewport, dark=dark)
    open_thread(page, thread)
    expect(log(page).locator('[data-from="assistant"]')).to_have_count(1)
    scroll_log_to_top(page)
    api.send(thread, unique("from elsewhere"))
    jump = page.get_by_role("button", name="New messages ↓")
    expect(jump).to_be_visible(timeout=30_000)
    found = {"new messages": violations(page)}
    jump.click()

    expect(log(page).locator('[data-from="assistant"]')).to_have_count(2, timeout=30_000)
    stream_slowly(model, lines=STOPPED_LINES)
    send(page, unique("write slowly"))
    expect(log(page).locator(".message.draft .body")).to_contain_text("streamed line 1")
    page.get_by_label("Message", exact=True).press("Escape")
    expect(log(page).locator(".message.partial")).to_have_count(1)
    page.get_by_role("button", name="Archive", exact=True).click()
    expect(page.locator("#thread-badge")).to_have_text("Archived")
    found["partial and archived"] = violations(page)

    page.evaluate("location.hash = '#thread=999999999'")
    expect_unavailable(page, "Not found")
    found["not found"] = violations(page)
    assert found == {name: [] for name in found}
    api.close()
