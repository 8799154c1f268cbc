"""On both Consoles, light and dark, at 1440×900 and 390×844: just start typing (the
composer works with no thread open, its first send makes the thread), "New chat", the sign-in
form on a first visit, staff told whose Console it is, feedback beside the control that caused
it, the export, dates on older timestamps, and the phone's fixes."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Locator, Page, Request, Route, expect

from tests.console.pages import create_project, create_thread, messages, send, unique
from tests.console.server import PASSWORD, LiveServer
from tests.console.test_accessibility import violations
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole

SIZES = {"desktop": DESKTOP, "phone": PHONE}
# Feedback is "next to" its control when its box starts within this many pixels of the
# control's box (the rename conflict was once 700 px below the field).
NEAR_PX = 80

# Both Consoles, both sizes and both colour schemes, each pair of them at least once (a pairwise
# cover: four pages rather than all eight).
CONSOLES = [
    pytest.param(listener, size, dark, id=f"{listener}-{size}-{'dark' if dark else 'light'}")
    for listener, size, dark in (
        ("human", "desktop", False),
        ("human", "phone", True),
        ("tester", "desktop", True),
        ("tester", "phone", False),
    )
]


def composer(page: Page) -> Locator:
    return page.get_by_label("Message", exact=True)


def gap(page: Page, first: str, second: str) -> float:
    """The distance between two elements' boxes (0 when they touch or overlap)."""
    a = page.locator(first).bounding_box()
    b = page.locator(second).bounding_box()
    assert a is not None and b is not None, (first, second)
    dx = max(0.0, b["x"] - (a["x"] + a["width"]), a["x"] - (b["x"] + b["width"]))
    dy = max(0.0, b["y"] - (a["y"] + a["height"]), a["y"] - (b["y"] + b["height"]))
    return max(dx, dy)


def thread_of(page: Page) -> int:
    match = re.search(r"thread=(\d+)", page.url)
    assert match, page.url
    return int(match.group(1))


def new_chat(page: Page, size: str) -> None:
    page.get_by_role("button", name="New chat").click()
    expect(page.get_by_role("heading", name="New chat")).to_be_visible()
    expect(composer(page)).to_be_enabled()
    expect(composer(page)).to_be_focused()


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_text_typed_at_once_after_loading_lands_in_the_composer(
    open_console: OpenConsole, listener: str
) -> None:
    """On a wide screen the composer has the focus once the page loads (after the sign-in on
    the human's), so text typed at once is in it, and its send starts a chat."""
    page = open_console(listener)
    expect(composer(page)).to_be_focused()
    words = unique("typed at once")
    page.keyboard.type(words)
    expect(composer(page)).to_have_value(words)
    page.keyboard.press("Enter")
    expect(messages(page).locator(f'[data-from="{listener}"] .body')).to_have_text([words])


def test_phone_shows_the_list_first_and_gives_the_composer_no_focus(
    open_console: OpenConsole,
) -> None:
    """A phone shows the list first: no composer is shown, so none takes the focus (nor opens
    the on-screen keyboard)."""
    page = open_console("human", viewport=PHONE)
    expect(page.locator("#sidebar")).to_be_visible()
    expect(composer(page)).not_to_be_focused()


@pytest.mark.parametrize(("listener", "size", "dark"), CONSOLES)
def test_start_typing_with_no_thread_open_makes_thread_named_from_first_words(
    open_console: OpenConsole, listener: str, size: str, dark: bool
) -> None:
    """The composer is enabled before any thread is opened; the first send makes a thread in the
    project in view, named from the message's first words, opens it and sends there."""
    page = open_console(listener, viewport=SIZES[size], dark=dark)
    project = unique("start")
    create_project(page, project)
    if size == "phone":
        new_chat(page, size)
    expect(composer(page)).to_be_enabled()
    words = unique("plan")
    body = f"{words} the launch of the new pricing page before Friday please, in detail"
    send(page, body)
    name = f"{words} the launch of the new pricing page"
    expect(page.get_by_role("heading", name=name, exact=True)).to_be_visible()
    expect(messages(page).locator(f'[data-from="{listener}"] .body')).to_have_text([body])
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    thread = thread_of(page)
    if size == "phone":
        page.get_by_role("button", name="Back to the threads").click()
    listed = page.get_by_role("list", name="Your threads").get_by_role("button", name=name)
    expect(listed).to_be_visible()
    expect(listed).to_have_attribute("data-id", str(thread))
    projects = page.get_by_role("list", name="Projects", exact=True)
    expect(projects.get_by_role("button", name=project)).to_have_attribute("aria-current", "true")


@pytest.mark.parametrize(("listener", "size", "dark"), CONSOLES)
def test_new_chat_from_an_open_thread_starts_another_and_a_taken_name_gets_a_suffix(
    open_console: OpenConsole, listener: str, size: str, dark: bool
) -> None:
    """The "New chat" control opens the empty composer from anywhere; a name already taken in
    the project (409 `thread-exists`) is suffixed; the thread made can be renamed."""
    page = open_console(listener, viewport=SIZES[size], dark=dark)
    create_project(page, unique("again"))
    create_thread(page, "Hello there")
    new_chat(page, size)
    expect(composer(page)).to_have_value("")
    send(page, "Hello there")
    expect(page.get_by_role("heading", name="Hello there (2)", exact=True)).to_be_visible()
    new_chat(page, size)
    send(page, "Hello there")
    expect(page.get_by_role("heading", name="Hello there (3)", exact=True)).to_be_visible()
    page.get_by_role("button", name="Rename").click()
    page.get_by_label("New name of this thread").fill("Greetings")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("heading", name="Greetings", exact=True)).to_be_visible()


SENDS = re.compile(r".*/api/chat/threads/\d+/messages$")


def is_send(request: Request) -> bool:
    return request.method == "POST" and bool(SENDS.match(request.url))


def test_a_send_still_on_its_way_holds_up_no_new_chat(open_console: OpenConsole) -> None:
    """A chat's first message held on its way (a server slow to answer the send): "New chat"
    and Enter there start another chat at once, and each message lands in its own thread once
    answered. One "sending" mark for the whole page made that Enter do nothing."""
    page = open_console("human")
    create_project(page, unique("held"))
    held: list[Route] = []

    def hold_sends(route: Route) -> None:
        if is_send(route.request):
            held.append(route)
        else:
            route.continue_()

    page.route(SENDS, hold_sends)
    first, second = unique("first chat"), unique("second chat")
    with page.expect_request(is_send):
        send_without_waiting(page, first)
    expect(page.get_by_role("heading", name=first, exact=True)).to_be_visible()
    expect(page.locator("#send")).to_be_disabled()

    new_chat(page, "desktop")
    with page.expect_request(is_send):
        send_without_waiting(page, second)
    expect(page.get_by_role("heading", name=second, exact=True)).to_be_visible()
    for route in held:
        route.continue_()
    expect(messages(page).locator('[data-from="human"] .body')).to_have_text([second])
    expect(composer(page)).to_have_value("")
    page.get_by_role("list", name="Your threads").get_by_role("button", name=first).click()
    expect(messages(page).locator('[data-from="human"] .body')).to_have_text([first])


def send_without_waiting(page: Page, body: str) -> None:
    composer(page).fill(body)
    composer(page).press("Enter")


def test_start_typing_with_no_project_makes_the_default_project(
    open_console: OpenConsole,
) -> None:
    """With no project in view the thread goes to the side's default project, the tester's
    `Tester chats`, made on first use by the tester and found afterwards (never a second one)."""
    page = open_console("tester")
    # The page has chosen its project (so it chooses none while the test runs): the test then
    # takes the project out of view, as on a business with none.
    create_project(page, unique("elsewhere"))
    made = page.evaluate(
        """async () => {
            const { state } = await import("/static/console/page.js");
            const { startThread } = await import("/static/console/start.js");
            state.projectId = null;
            const first = await startThread("first words here");
            const second = await startThread("other words here");
            const { projects } = await (await fetch("/api/chat/projects?limit=500")).json();
            const named = projects.filter((p) => p.name === "Tester chats");
            return {
                first: first.project, second: second.project,
                named: named.map((p) => [p.id, p.creator]),
            };
        }"""
    )
    assert made["first"] == made["second"]
    assert made["named"] == [[made["first"], "tester"]]


def test_thread_name_from_first_words_stays_within_the_name_limit(
    open_console: OpenConsole,
) -> None:
    """Whole words while they fit (at most 8, 60 characters), never past the name limit; control
    characters become spaces; a suffix shortens the name to keep the whole within the limit."""
    page = open_console("tester", viewport=PHONE)
    names = page.evaluate(
        """async () => {
            const { nameFrom, suffixed } = await import("/static/console/start.js");
            return [
                nameFrom("one two three four five six seven eight nine ten"),
                nameFrom("  a\\tb\\n\\nc  "),
                nameFrom("x".repeat(300)),
                nameFrom("short words but a small limit", 12),
                nameFrom("😀".repeat(100), 5),
                nameFrom("   "),
                suffixed("abcdefghij", 12, 10),
            ];
        }"""
    )
    assert names == [
        "one two three four five six seven eight",
        "a b c",
        "x" * 60,
        "short words",
        "😀" * 5,
        "New chat",
        "abcde (12)",
    ]


def test_human_first_visit_shows_the_sign_in_form_and_comes_back_to_the_address(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """`/` without a session is the sign-in form, not "You are signed out"; after signing in the
    Console opens at the address asked for."""
    page = open_console("human", signed_in=False)
    page.goto(f"{console_server.human_url}/#project=999999")
    expect(page.get_by_label("Username")).to_be_visible()
    expect(page.get_by_text("You are signed out")).to_have_count(0)
    assert page.url.startswith(f"{console_server.human_url}/signin")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{console_server.human_url}/#project=999999")
    expect(page.get_by_role("button", name="New chat")).to_be_visible()


@pytest.mark.parametrize("size", SIZES)
def test_staff_on_the_human_console_is_told_whose_console_it_is(
    open_console: OpenConsole, console_server: LiveServer, size: str
) -> None:
    """A staff user who is not the business's human gets a sentence saying the Console is the
    human's, with the way to sign in as the human; nothing of the Console loads."""
    page = open_console("human", signed_in=False, viewport=SIZES[size])
    page.goto(f"{console_server.human_url}/admin/login/")
    page.fill("#id_username", "staff")
    page.fill("#id_password", PASSWORD)
    page.locator("input[type=submit]").click()
    page.wait_for_url(f"{console_server.human_url}/admin/")
    page.goto(f"{console_server.human_url}/")
    heading = page.get_by_role("heading", name="This Console is the business's human's")
    expect(heading).to_be_visible()
    expect(page.get_by_text("You are signed in as staff")).to_be_visible()
    expect(page.get_by_role("link", name="sign in as the business's human")).to_be_visible()
    expect(page.get_by_text("You are signed out")).to_be_hidden()
    expect(page.locator("#console")).to_be_hidden()
    expect(page.get_by_role("button", name="New chat")).to_have_count(0)


@pytest.mark.parametrize(("listener", "size", "dark"), CONSOLES)
def test_rename_conflict_and_archive_are_said_beside_their_controls(
    open_console: OpenConsole, listener: str, size: str, dark: bool
) -> None:
    """A rename refused `thread-exists` is said under the name field, archive's answer under the
    thread's buttons; the next success clears the error."""
    page = open_console(listener, viewport=SIZES[size], dark=dark)
    create_project(page, unique("near"))
    taken = unique("taken")
    create_thread(page, taken)
    if size == "phone":
        page.get_by_role("button", name="Back to the threads").click()
    create_thread(page, unique("mine"))
    page.get_by_role("button", name="Rename").click()
    page.get_by_label("New name of this thread").fill(taken)
    page.get_by_role("button", name="Save").click()
    error = page.locator("#rename-notice")
    expect(error).to_have_attribute("data-kind", "error")
    expect(error).to_be_visible()
    assert gap(page, "#rename-notice", "#rename-name") <= NEAR_PX
    expect(page.locator("#composer-notice")).to_have_text("")
    page.get_by_label("New name of this thread").fill(unique("free"))
    page.get_by_role("button", name="Save").click()
    expect(error).to_be_hidden()
    expect(page.locator("#actions-notice")).to_contain_text("Renamed to")
    assert gap(page, "#actions-notice", "#rename") <= NEAR_PX

    page.get_by_role("button", name="Archive").click()
    expect(page.locator("#actions-notice")).to_have_text("Archived.")
    assert gap(page, "#actions-notice", "#archive") <= NEAR_PX
    expect(page.locator("#composer-notice")).to_have_text("")


@pytest.mark.parametrize("size", SIZES)
def test_offline_send_error_is_beside_send_and_clears_on_reconnect(
    open_console: OpenConsole, size: str
) -> None:
    """A send that cannot reach the server says so under the composer, beside Send; the error
    clears once the server answers again."""
    page = open_console("tester", viewport=SIZES[size])
    create_project(page, unique("offline"))
    create_thread(page, unique("thread"))
    page.route("**/api/chat/threads/*/messages", lambda route: route.abort())
    composer(page).fill("never arrives")
    composer(page).press("Enter")
    notice = page.locator("#composer-notice")
    expect(notice).to_have_attribute("data-kind", "error", timeout=15_000)
    expect(notice).to_contain_text("did not answer")
    assert gap(page, "#composer-notice", "#send") <= NEAR_PX
    page.unroute("**/api/chat/threads/*/messages")
    page.evaluate("window.dispatchEvent(new Event('online'))")
    expect(notice).to_have_text("")


@pytest.mark.parametrize("listener", ["human", "tester"])
@pytest.mark.parametrize("size", SIZES)
def test_export_downloads_every_message_with_reply_states_as_markdown_and_json(
    open_console: OpenConsole, listener: str, size: str
) -> None:
    """The thread's every message (all pages of the API), each turn with its reply state, as a
    Markdown file and a JSON file."""
    page = open_console(listener, viewport=SIZES[size])
    create_project(page, unique("export"))
    name = unique("exported")
    create_thread(page, name)
    first, second = unique("first"), unique("second")
    send(page, first)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    send(page, second)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(2)

    files = {}
    for label in ("Markdown (.md)", "JSON (.json)"):
        page.locator("#thread-export > summary").click()
        with page.expect_download() as download:
            page.get_by_role("button", name=label).click()
        path = download.value.path()
        files[label] = (download.value.suggested_filename, path.read_text())
    markdown_name, markdown = files["Markdown (.md)"]
    json_name, text = files["JSON (.json)"]
    assert markdown_name.endswith(".md") and json_name.endswith(".json")
    assert markdown.startswith(f"# {name}\n")
    assert markdown.index(first) < markdown.index(second)
    exported = json.loads(text)
    # Plain headings, who wrote it as the thread says it; the time below each, local and
    # readable (no ISO time with microseconds anywhere).
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings == ["## You", "## assistant"] * 2, headings
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", markdown), markdown
    readable = page.evaluate(
        """(iso) => new Date(iso).toLocaleString([], {dateStyle: "medium", timeStyle: "medium"})""",
        exported["messages"][0]["created_at"],
    )
    assert f"## You\n\n*{readable}*\n\n{first}\n" in markdown, markdown
    assert exported["thread"]["name"] == name
    rows = exported["messages"]
    assert [row["body"] for row in rows if row["from_role"] == listener] == [first, second]
    assert [row["reply_state"] for row in rows if row["from_role"] == listener] == [
        "answered",
        "answered",
    ]
    assert len(rows) == 4
    expect(page.locator("#actions-notice")).to_contain_text("Exported 4 messages")
    assert gap(page, "#actions-notice", "#thread-export") <= NEAR_PX


def test_export_reads_every_page_of_a_long_thread(open_console: OpenConsole) -> None:
    """More messages than one page of the API (500) all reach the file, in order."""
    page = open_console("tester")
    create_project(page, unique("long"))
    create_thread(page, unique("long"))
    thread = thread_of(page)
    # The pages are the API's own; a stub stands in for a thread of 1,001 rows.
    page.route(
        re.compile(rf".*/api/chat/threads/{thread}/messages\?after=\d+&limit=500$"),
        lambda route: route.fulfill(json={"messages": long_page(route.request.url)}),
    )
    got = page.evaluate(
        f"""async () => {{
            const {{ allMessages }} = await import("/static/console/export.js");
            return (await allMessages({thread})).map((m) => m.id);
        }}"""
    )
    assert got == list(range(1, 1002))


def long_page(url: str) -> list[dict[str, object]]:
    after = int(re.search(r"after=(\d+)", url).group(1))  # type: ignore[union-attr]
    ids = range(after + 1, min(after + 500, 1001) + 1)
    return [{"id": i, "body": f"m{i}", "from_role": "tester", "to_role": "assistant"} for i in ids]


@pytest.mark.parametrize("size", SIZES)
def test_timestamps_before_today_show_their_date_and_today_only_the_time(
    open_console: OpenConsole, size: str
) -> None:
    page = open_console("tester", viewport=SIZES[size])
    shown = page.evaluate(
        """async () => {
            const { timeOf } = await import("/static/console/page.js");
            const today = new Date();
            const before = new Date(today.getTime() - 3 * 86400 * 1000);
            return [
                timeOf(today.toISOString()).textContent,
                timeOf(before.toISOString()).textContent,
                before.getFullYear(),
                today.toLocaleTimeString(),
            ];
        }"""
    )
    today, earlier, year, time = shown
    assert today == time
    assert str(year) in earlier and earlier != today


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_favicon_is_linked_from_every_page(
    open_console: OpenConsole, console_server: LiveServer, listener: str
) -> None:
    page = open_console(listener, signed_in=False)
    icons = [page]
    if listener == "human":
        signed_in = open_console("human")
        icons.append(signed_in)
    for shown in icons:
        href = shown.locator("link[rel=icon]").get_attribute("href")
        assert href and href.endswith(".svg")
        answer = shown.context.request.get(shown.url.split("#")[0].rsplit("/", 1)[0] + href)
        assert answer.status == 200
        assert answer.headers["content-type"].startswith("image/svg")


@pytest.mark.parametrize("dark", [False, True])
def test_phone_show_archived_is_a_checkbox_on_a_44_px_line(
    open_console: OpenConsole, dark: bool
) -> None:
    """The phone's 44 px rule drew the checkbox as an empty 44 px square: the control keeps its
    44 px target and draws a box of the usual size, ticked when checked."""
    page = open_console("human", viewport=PHONE, dark=dark)
    create_project(page, unique("archived"))
    create_thread(page, unique("thread"))
    page.get_by_role("button", name="Back to the threads").click()
    toggle = page.locator("#archived-toggle")
    expect(toggle).to_be_visible()
    box = page.locator("#show-archived").bounding_box()
    assert box and box["width"] >= 44 and box["height"] >= 44
    drawn = page.locator("#show-archived").evaluate(
        "(node) => [getComputedStyle(node).appearance, getComputedStyle(node).backgroundSize]"
    )
    assert drawn == ["none", "20px 20px"]
    unticked = page.locator("#show-archived").screenshot()
    toggle.click()
    expect(page.locator("#show-archived")).to_be_checked()
    assert page.locator("#show-archived").screenshot() != unticked


@pytest.mark.parametrize("listener", ["human", "tester"])
@pytest.mark.parametrize("dark", [False, True])
def test_phone_trail_tab_fills_the_screen_without_a_blank_band(
    open_console: OpenConsole, listener: str, dark: bool
) -> None:
    """The Trail tab's pane reaches the bottom of the screen, its log filling it (the wide
    screen's cap on the log's height left a blank band under it)."""
    page = open_console(listener, viewport=PHONE, dark=dark)
    create_project(page, unique("trail"))
    create_thread(page, unique("thread"))
    send(page, unique("a row"))
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    page.get_by_role("button", name="Back to the threads").click()
    page.get_by_role("tab", name="Trail").click()
    expect(page.locator("#trail-pane")).to_be_visible()
    pane = page.locator("#trail-pane").bounding_box()
    log = page.locator("#trail-log").bounding_box()
    assert pane and log
    assert PHONE["height"] - (pane["y"] + pane["height"]) <= 16
    assert (pane["y"] + pane["height"]) - (log["y"] + log["height"]) <= 80


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dark", [False, True])
def test_axe_new_states_have_no_serious_violations(
    open_console: OpenConsole, console_server: LiveServer, size: str, dark: bool
) -> None:
    """The new chat's empty composer, the export menu open, a rename refused beside its field,
    the phone's "Show archived", and the staff page: axe finds nothing serious or critical."""
    found = {}
    for listener in ("human", "tester"):
        page = open_console(listener, viewport=SIZES[size], dark=dark)
        create_project(page, unique("axe"))
        taken = unique("taken")
        create_thread(page, taken)
        new_chat(page, size)
        found[f"{listener} new chat"] = violations(page)
        send(page, unique("started"))
        expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
        page.locator("#thread-export > summary").click()
        expect(page.get_by_role("button", name="JSON (.json)")).to_be_visible()
        found[f"{listener} export"] = violations(page)
        page.locator("#thread-export > summary").click()
        page.get_by_role("button", name="Rename").click()
        page.get_by_label("New name of this thread").fill(taken)
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#rename-notice")).to_have_attribute("data-kind", "error")
        found[f"{listener} rename refused"] = violations(page)
        if size == "phone":
            page.get_by_role("button", name="Back to the threads").click()
            expect(page.locator("#archived-toggle")).to_be_visible()
            found[f"{listener} list"] = violations(page)
    staff = open_console("human", signed_in=False, viewport=SIZES[size], dark=dark)
    staff.goto(f"{console_server.human_url}/admin/login/")
    staff.fill("#id_username", "staff")
    staff.fill("#id_password", PASSWORD)
    staff.locator("input[type=submit]").click()
    staff.wait_for_url(f"{console_server.human_url}/admin/")
    staff.goto(f"{console_server.human_url}/")
    expect(staff.locator("#not-the-human")).to_be_visible()
    found["staff"] = violations(staff)
    assert found == {name: [] for name in found}


def test_live_server_logs_each_request_once(
    open_console: OpenConsole, console_server: LiveServer
) -> None:
    """Under `manage.py serve` (daphne) a request is one line: the chat API's names its user
    (L6), a page or a static file has the listener's own; daphne's access line is gone."""
    page = open_console("human")
    expect(page.locator("#trail-status")).to_have_text("live")
    log = console_server.log_path.read_text()
    assert '"GET /' not in log  # daphne's NCSA line: `127.0.0.1:… - - [date] "GET / …" 200`
    assert "chat GET /api/chat/projects" in log and 'user="ada"' in log
    assert "http GET /signin 200" in log
    assert log.count("http GET /static/console/console.js ") >= 1
