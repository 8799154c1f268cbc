"""The trail as a person reads it, on both Consoles at 1440×900 and 390×844: rows in
plain words, the thread's ("You to assistant"), tester rows marked as the tester's and their threads
never linked on the human's trail; a filter (all, messages, the tester's); bookkeeping (claims and
leases) only when asked; long bodies clamped with "more"; folded to a rail on a wide screen,
remembered. And the admin's text columns: readable, one line; a thread's messages inline inside
the page. Positions and visibility are read from the DOM and bounding boxes, never screenshots."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.console.api import LiveApi
from tests.console.pages import (
    create_project,
    create_thread,
    messages,
    send,
    sign_in_admin,
    trail,
    trail_rows,
    unique,
)
from tests.console.server import LiveServer
from tests.console.test_accessibility import violations
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole
from tests.support.model_servers import FakeModel

SIZES = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]

# How many lines the trail shows of a body before "more".
CLAMP_LINES = 4
# The folded trail's rail: 2.5rem at the Console's 15 px root, and a pixel of rounding.
RAIL_PX = 38.5


def box(locator: Locator) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not laid out"
    return found


def thread_in_address(page: Page) -> int:
    return int(page.evaluate("new URLSearchParams(location.hash.slice(1)).get('thread')"))


def show_trail(page: Page, viewport: dict[str, int]) -> None:
    """The trail on screen: on a phone, behind its tab (from the list)."""
    if viewport == PHONE:
        back = page.get_by_role("button", name="Back to the threads")
        if back.is_visible():
            back.click()
        page.get_by_role("tab", name="Trail").click()
    expect(trail(page)).to_be_visible()


def long_body() -> str:
    """A body of twenty lines, the last one unique: the trail shows a few of them."""
    lines = [f"line {n} of a long turn that goes on and on" for n in range(1, 20)]
    return "\n".join([*lines, unique("line 20 of a long turn")])


def turn_of_tester(api: LiveApi, body: str) -> tuple[int, str]:
    """A turn of the tester's in a thread of its own, through its API; the thread's id and name."""
    name = unique("tester-thread")
    thread = api.create_thread(api.create_project(unique("tester-project")), name)
    api.send(thread, body)
    return thread, name


def inside_horizontally(inner: Locator, outer: Locator) -> bool:
    a, b = box(inner), box(outer)
    return a["x"] >= b["x"] - 1 and a["x"] + a["width"] <= b["x"] + b["width"] + 1


# --- labels ----------------------------------------------------------------------------------


def test_trail_names_senders_plainly_and_keeps_tester_threads_unlinked(
    open_console: OpenConsole, model: FakeModel, human_api: LiveApi, tester_api: LiveApi
) -> None:
    """The human's own turn reads "You to assistant" (via Console), its reply "assistant to
    you", a rename "You renamed the thread “a” to “b”"; no "human · human-cli". The tester's turn is
    marked "tester", and its thread named as the tester's without a link; the stored text (R16)
    stays on each row."""
    model.content = unique("the answer")
    page = open_console("human")
    create_project(page, unique("labels"))
    name, renamed = unique("mine"), unique("renamed")
    create_thread(page, name)
    thread = thread_in_address(page)
    body = unique("a turn")
    send(page, body)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    human_api.patch(f"/api/chat/threads/{thread}", {"name": renamed})
    tester_body = unique("tester turn")
    _, tester_thread = turn_of_tester(tester_api, tester_body)

    turn = trail_rows(page, f"human to assistant: {body}")
    expect(turn.locator(".trail-who")).to_have_text("You to assistant")
    expect(turn.locator(".trail-via")).to_have_text("via Console")
    expect(turn).not_to_contain_text("human-cli")
    expect(turn.locator(".trail-text")).to_have_text(body)
    expect(turn.get_by_role("link", name=name)).to_have_attribute("href", f"#thread={thread}")
    reply = trail_rows(page, f"assistant to human: {model.content}", thread=name)
    expect(reply.locator(".trail-who")).to_have_text("assistant to you")
    rename = trail(page).locator(".trail-row[data-kind='thread.renamed']", has_text=renamed)
    expect(rename.locator(".trail-who")).to_have_text("You")
    expect(rename.locator(".trail-text")).to_have_text(
        f"renamed the thread “{name}” to “{renamed}”"
    )
    expect(rename.get_by_role("link", name=renamed)).to_have_attribute("href", f"#thread={thread}")

    theirs = trail_rows(page, f"tester to assistant: {tester_body}")
    expect(theirs.locator(".trail-who")).to_have_text("tester to assistant")
    expect(theirs.locator(".trail-via")).to_have_text("via API")
    expect(theirs.locator(".trail-tag")).to_have_text("tester")
    expect(theirs).to_have_class(re.compile(r"\bby-tester\b"))
    expect(theirs.locator(".trail-in")).to_have_text(f"in the tester's thread {tester_thread}")
    expect(theirs.get_by_role("link")).to_have_count(0)
    tester_reply = trail_rows(page, f"assistant to tester: {model.content}", thread=tester_thread)
    expect(tester_reply.locator(".trail-tag")).to_have_text("tester")
    expect(tester_reply.get_by_role("link")).to_have_count(0)

    # The tester's own trail: its rows, its threads linked, nothing of the human's.
    tester = open_console("tester")
    mine = trail_rows(tester, f"tester to assistant: {tester_body}")
    expect(mine.locator(".trail-who")).to_have_text("You to assistant")
    expect(mine.locator(".trail-via")).to_have_text("via API")
    expect(mine.get_by_role("link", name=tester_thread)).to_have_attribute(
        "href", re.compile(r"^#thread=\d+$")
    )
    expect(trail_rows(tester, f"human to assistant: {body}")).to_have_count(0)


@pytest.mark.parametrize("viewport", SIZES)
@pytest.mark.parametrize("listener", ["human", "tester"])
def test_thread_and_trail_say_you_and_the_instance_never_human_to_assistant(
    open_console: OpenConsole, model: FakeModel, tester_api: LiveApi, listener: str, viewport: dict
) -> None:
    """The reader's own bubble says "You", the reply's the instance's name; the trail says the
    same words ("You to assistant", "assistant to you"), never the stored ends ("human to
    assistant", "ada"). On the human's trail the tester's traffic stays the tester's (R16)."""
    model.content = unique("the answer")
    page = open_console(listener, viewport=viewport)
    create_project(page, unique("words"))
    name = unique("words")
    create_thread(page, name)
    body = unique("a turn")
    send(page, body)
    mine = messages(page).locator(f'[data-from="{listener}"]')
    expect(mine.locator(".writer")).to_have_text(["You"])
    reply = messages(page).locator('[data-from="assistant"]')
    expect(reply.locator(".writer")).to_have_text(["assistant"])
    expect(messages(page).locator(".meta", has_text=re.compile(r"\bto\b"))).to_have_count(0)
    tester_body = unique("tester turn")
    if listener == "human":
        turn_of_tester(tester_api, tester_body)

    show_trail(page, viewport)
    turn = trail_rows(page, f"{listener} to assistant: {body}")
    expect(turn.locator(".trail-who")).to_have_text("You to assistant")
    answer = trail_rows(page, f"assistant to {listener}: {model.content}", thread=name)
    expect(answer.locator(".trail-who")).to_have_text("assistant to you")
    expect(trail(page).locator(".trail-who", has_text=re.compile(r"human|ada"))).to_have_count(0)
    if listener == "human":
        theirs = trail_rows(page, f"tester to assistant: {tester_body}")
        expect(theirs.locator(".trail-who")).to_have_text("tester to assistant")
        expect(theirs.locator(".trail-tag")).to_have_text("tester")


# --- filter and bookkeeping ------------------------------------------------------------------


@pytest.mark.parametrize("viewport", SIZES)
def test_trail_filters_rows_and_shows_bookkeeping_only_when_asked(
    open_console: OpenConsole,
    model: FakeModel,
    human_api: LiveApi,
    tester_api: LiveApi,
    viewport: dict[str, int],
) -> None:
    """All shows turns, replies and the rename, not the claims; Messages leaves the rename out;
    Tester only shows the tester's turn and reply alone; "Claims and leases" shows each run's
    claim row folded into its reply. Every row shown lies inside the trail."""
    model.content = unique("the answer")
    page = open_console("human", viewport=viewport)
    create_project(page, unique("filter"))
    name = unique("mine")
    create_thread(page, name)
    thread = thread_in_address(page)
    body, tester_body = unique("a turn"), unique("tester turn")
    send(page, body)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    renamed = unique("renamed")
    human_api.patch(f"/api/chat/threads/{thread}", {"name": renamed})
    _, tester_thread = turn_of_tester(tester_api, tester_body)
    show_trail(page, viewport)

    turn = trail_rows(page, f"human to assistant: {body}")
    theirs = trail_rows(page, f"tester to assistant: {tester_body}")
    tester_reply = trail_rows(page, f"assistant to tester: {model.content}", thread=tester_thread)
    rename = trail(page).locator(".trail-row[data-kind='thread.renamed']", has_text=renamed)
    claims = trail(page).locator(".trail-row[data-kind='claim.ended']")
    folded = tester_reply.locator("details.folded")
    expect(folded).to_have_count(1)

    def shown(*rows: Locator) -> None:
        for row in rows:
            expect(row).to_be_visible()
            assert inside_horizontally(row, trail(page))

    filters = page.get_by_role("group", name="Show in the trail")

    def pressed(name: str) -> None:
        choice = filters.get_by_role("button", name=name)
        choice.click()
        expect(choice).to_have_attribute("aria-pressed", "true")

    # All, bookkeeping hidden: every claim row and every fold out of sight.
    expect(page.get_by_role("button", name="All")).to_have_attribute("aria-pressed", "true")
    shown(turn, theirs, tester_reply, rename)
    expect(claims.first).to_be_attached()
    for index in range(claims.count()):
        expect(claims.nth(index)).to_be_hidden()
    expect(folded).to_be_hidden()

    pressed("Messages")
    shown(turn, theirs, tester_reply)
    expect(rename).to_be_hidden()

    pressed("Tester only")
    shown(theirs, tester_reply)
    expect(turn).to_be_hidden()
    expect(rename).to_be_hidden()

    page.get_by_label("Claims and leases").check()
    shown(folded)
    expect(folded.locator("summary")).to_have_text("1 more row of this run")
    folded.locator("summary").click()
    expect(folded.locator("li")).to_have_text(re.compile(r"^assistant: claim of \S+ ended"))

    pressed("All")
    shown(turn, theirs, tester_reply, rename)
    page.get_by_label("Claims and leases").uncheck()
    expect(folded).to_be_hidden()


def test_tester_trail_offers_no_tester_only_filter(open_console: OpenConsole) -> None:
    """Every row of the tester's trail is the tester's (R20): its filter is All and Messages."""
    page = open_console("tester")
    group = page.get_by_role("group", name="Show in the trail")
    expect(group.get_by_role("button")).to_have_text(["All", "Messages"])


# --- long bodies -----------------------------------------------------------------------------


@pytest.mark.parametrize("viewport", SIZES)
def test_trail_clamps_long_body_to_a_few_lines_with_more(
    open_console: OpenConsole, tester_api: LiveApi, viewport: dict[str, int]
) -> None:
    """A twenty-line body shows four lines and "more"; "more" shows all of it and becomes
    "less"; a one-line body has no "more"."""
    page = open_console("tester", viewport=viewport)
    short, body = unique("short"), long_body()
    turn_of_tester(tester_api, body)
    turn_of_tester(tester_api, short)
    show_trail(page, viewport)

    long_row = trail_rows(page, f"tester to assistant: {body}")
    text = long_row.locator(".trail-text")
    more = long_row.get_by_role("button", name="more")
    expect(more).to_be_visible()
    line: float = text.evaluate("(node) => parseFloat(getComputedStyle(node).lineHeight)")
    clamped = box(text)["height"]
    assert clamped <= CLAMP_LINES * line + 2, (clamped, line)
    assert inside_horizontally(more, trail(page))

    more.click()
    less = long_row.get_by_role("button", name="less")
    expect(less).to_have_attribute("aria-expanded", "true")
    whole = box(text)["height"]
    assert whole >= 20 * line - 2, (whole, line)
    assert text.evaluate("(node) => node.scrollHeight <= node.clientHeight + 1")
    less.click()
    expect(long_row.get_by_role("button", name="more")).to_be_visible()
    assert abs(box(text)["height"] - clamped) < 1

    short_row = trail_rows(page, f"tester to assistant: {short}")
    expect(short_row.locator(".trail-text")).to_be_visible()
    expect(short_row.locator(".trail-more")).to_be_hidden()


# --- folded away -----------------------------------------------------------------------------


def shown_rows(page: Page) -> int:
    """The trail's rows the current view shows (folded bookkeeping and filtered rows aside)."""
    return int(
        page.evaluate(
            """() => [...document.querySelectorAll("#trail > .trail-row")]
                .filter((row) => !row.hidden && !row.classList.contains("filtered")).length"""
        )
    )


def unseen(page: Page) -> int:
    """The count the rail's badge shows."""
    return int(page.locator("#trail-unseen").inner_text().split()[0])


def test_trail_folds_to_a_rail_counting_new_rows_and_stays_so_after_reload(
    open_console: OpenConsole, tester_api: LiveApi, model: FakeModel
) -> None:
    """ "Hide trail" folds the trail to a narrow rail, its one control the upright "Show trail"
    button, and gives its room to the thread: no empty column. Rows that arrive while folded are
    counted on the rail; unfolding clears the count. A reload keeps it folded; "Show trail"
    brings it back, and that is kept too."""
    page = open_console("tester")
    create_project(page, unique("fold"))
    create_thread(page, unique("thread"))
    pane, thread = page.locator("#trail-pane"), page.locator("#thread-pane")
    open_width = box(thread)["width"]

    page.get_by_role("button", name="Hide trail").click()
    expect(trail(page)).to_be_hidden()
    toggle = page.get_by_role("button", name="Show trail")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(toggle).to_have_text("Show trail")
    badge = page.locator("#trail-unseen")
    expect(badge).to_be_hidden()
    assert box(pane)["width"] <= RAIL_PX
    assert box(thread)["width"] > open_width + 200
    console = box(page.locator("#console"))
    assert console["x"] + console["width"] - 20 < box(pane)["x"] + box(pane)["width"]
    assert box(pane)["x"] + box(pane)["width"] <= DESKTOP["width"]
    assert box(pane)["x"] >= box(thread)["x"] + box(thread)["width"]
    assert box(toggle)["height"] > 200  # the whole rail is the button
    before = shown_rows(page)

    body = unique("while folded")
    turn_of_tester(tester_api, body)
    # The turn and its reply reach the folded trail (out of the accessibility tree); each row
    # shown counts.
    rows = page.locator("#trail > .trail-row")
    expect(rows.filter(has_text=body)).to_have_count(1)
    expect(rows.filter(has_text=model.content or "")).not_to_have_count(0)
    expect(badge).to_have_text(re.compile(rf"^{shown_rows(page) - before} new rows?$"))
    count = unseen(page)
    assert count >= 1
    named = re.compile(rf"^Show trail {count} new rows?$")
    expect(page.get_by_role("button", name=named)).to_be_visible()
    turn_of_tester(tester_api, unique("another"))
    expect(badge).not_to_have_text(re.compile(rf"^{count} "))
    assert unseen(page) > count
    assert violations(page) == []

    page.reload()
    expect(page.get_by_role("button", name="Show trail")).to_be_visible()
    expect(trail(page)).to_be_hidden()
    page.get_by_role("button", name="Show trail").click()
    expect(trail(page)).to_be_visible()
    expect(badge).to_be_hidden()
    page.reload()
    expect(page.get_by_role("button", name="Hide trail")).to_have_attribute("aria-expanded", "true")
    expect(trail(page)).to_be_visible()
    page.get_by_role("button", name="Hide trail").click()
    expect(badge).to_be_hidden()
    expect(page.locator("#trail-toggle")).to_have_accessible_name("Show trail")


def test_trail_on_phone_is_a_tab_and_never_folded(open_console: OpenConsole) -> None:
    """On a phone the trail has its tab; a fold kept from a wide screen does not hide it."""
    page = open_console("tester", viewport=PHONE)
    page.evaluate("localStorage.setItem('mosaic.trail.open', 'false')")
    page.reload()
    expect(page.locator("#trail-toggle")).to_be_hidden()
    page.get_by_role("tab", name="Trail").click()
    expect(trail(page)).to_be_visible()
    expect(page.get_by_role("group", name="Show in the trail")).to_be_visible()
    assert inside_horizontally(trail(page), page.locator("#trail-pane"))


# --- admin -----------------------------------------------------------------------------------


def trail_row_of(api: LiveApi, body: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = api.get("/api/trail?limit=500")["rows"]
    return next(row for row in reversed(rows) if row["text"].endswith(body))


@pytest.mark.parametrize("viewport", SIZES)
def test_admin_lists_show_text_first_line_in_readable_column_and_record_shows_all(
    open_console: OpenConsole,
    console_server: LiveServer,
    tester_api: LiveApi,
    viewport: dict[str, int],
) -> None:
    """The trail's TEXT and the messages' BODY columns are at least 16em wide and one line high,
    showing the first line cut; the row's own page shows every line; a thread's messages inline
    stays inside the page, scrolling in its own box."""
    body = long_body()
    thread, _ = turn_of_tester(tester_api, body)
    row = trail_row_of(tester_api, body)
    page = open_console("human", viewport=viewport, signed_in=False)
    sign_in_admin(page, console_server.human_url)

    def one_readable_line(cell: Locator) -> None:
        preview = cell.locator(".preview")
        expect(preview).to_have_text(re.compile(r"line 1 of a long turn .*…$"))
        size: float = preview.evaluate("(node) => parseFloat(getComputedStyle(node).fontSize)")
        line: float = preview.evaluate("(node) => parseFloat(getComputedStyle(node).lineHeight)")
        assert box(cell)["width"] >= 16 * size
        assert box(preview)["height"] <= line + 1

    page.goto(f"{console_server.human_url}/admin/broker/trailrow/{row['id']}/change/")
    expect(page.locator(".field-text .readonly")).to_contain_text(body.splitlines()[-1])
    page.goto(f"{console_server.human_url}/admin/broker/trailrow/?thread__id__exact={thread}")
    one_readable_line(
        page.locator("#result_list td.field-text_preview", has_text="tester to assistant: line 1")
    )

    page.goto(f"{console_server.human_url}/admin/broker/message/?thread__id__exact={thread}")
    turn = page.locator("#result_list td.field-body_preview", has_text="line 1 of a long turn")
    one_readable_line(turn)
    if viewport == DESKTOP:
        # A message's body reads whole on screen at 1440×900, without scrolling the list.
        size = turn.evaluate("(node) => parseFloat(getComputedStyle(node).fontSize)")
        assert box(turn)["width"] >= 24 * size
        assert box(turn)["x"] + box(turn)["width"] <= viewport["width"]
    turn.locator("xpath=..").get_by_role("link").first.click()
    expect(page.locator(".field-body .readonly")).to_contain_text(body.splitlines()[-1])

    page.goto(f"{console_server.human_url}/admin/broker/thread/{thread}/change/")
    inline = page.get_by_role("region", name="Messages")
    expect(inline).to_be_visible()
    assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    edge = box(inline)
    assert edge["x"] >= 0 and edge["x"] + edge["width"] <= viewport["width"]
    body_cell = inline.locator("td.field-body").first
    size = body_cell.evaluate("(node) => parseFloat(getComputedStyle(node).fontSize)")
    assert box(body_cell)["width"] >= 16 * size
    # Whatever does not fit is reached by scrolling the box itself.
    inline.evaluate("(node) => { node.scrollLeft = node.scrollWidth }")
    last = inline.locator("th").last
    assert inside_horizontally(last, inline)
