"""Replies drawn as chat pages draw markdown, on both Consoles, light and dark, at
1440×900 and 390×844: headings larger than the text, tables that scroll sideways and never break
a word, read-only task checkboxes (and no other input), highlighted code under a bar with its
language and a Copy that covers none of it, a copy of the whole answer, and images shown as
links that load nothing."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Locator, Page, Request, expect

from tests.console.pages import create_project, create_thread, messages, send, unique
from tests.support.console_pages import DESKTOP, PHONE, OpenConsole
from tests.support.model_servers import FakeModel

# Words long enough that a phone's column cannot hold them unbroken.
WIDE_TABLE = "".join(
    "| " + " | ".join(row) + " |\n"
    for row in (
        ("Region", "Owner", "Responsibilities", "Infrastructure", "Availability"),
        ("---",) * 5,
        (
            "Internationalization",
            "Counterrevolutionaries",
            "Electroencephalography",
            "Telecommunications",
            "Uncharacteristically",
        ),
        (
            "Pacific Northwest coastline",
            "Administrators",
            "Interoperability",
            "Decentralization",
            "Indistinguishable",
        ),
    )
)

NO_ALT = "https://images.example/no-alt.png"
DATA = "data:image/png;base64,AAAA"

CODE = 'def greet(name):\n    return f"hello {name}"  # a comment\n'

REPLY = f"""# Plan of the week

## What changes

### Details

Some text between the headings.

{WIDE_TABLE}
- [ ] write the tests
- [x] read the issue
- a plain item

```python
{CODE}```

```
no language here
```

See ![A diagram of the bus](http://images.example/diagram.png) and ![]({NO_ALT}).
Also [![badge](http://images.example/badge.svg)](https://example.com/home) and ![inline]({DATA}).
"""

# Ways an <input> other than the task list's checkbox might get in; only two checkboxes may come.
SMUGGLED_INPUTS = """<input type="text" value="typed">
<input type="checkbox" onclick="window.pwned=1">
- [ ] <input type="text" value="in a task">
- [x] [a task link](https://example.com/task)
- \\[ ] escaped, so not a task
[ ] not in a list, so not a task

| [ ] | <input type=password> |
|---|---|
| [x] | x |
"""

VIEWS = [
    pytest.param(DESKTOP, False, "human", id="desktop-light-human"),
    pytest.param(DESKTOP, True, "tester", id="desktop-dark-tester"),
    pytest.param(PHONE, False, "tester", id="phone-light-tester"),
    pytest.param(PHONE, True, "human", id="phone-dark-human"),
]


def reply_body(page: Page) -> Locator:
    return messages(page).locator('[data-from="assistant"] .body')


def open_thread_with_reply(page: Page, model: FakeModel, content: str) -> None:
    model.content = content
    create_project(page, unique("render"))
    create_thread(page, unique("thread"))
    send(page, unique("reply in markdown"))
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)


def broken_words(table: Locator) -> list[str]:
    """Each word of each cell whose DOM Range draws on more than one line."""
    broken: list[str] = table.evaluate(
        """(root) => {
            const broken = [];
            for (const cell of root.querySelectorAll('th, td')) {
                const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
                for (let text = walker.nextNode(); text; text = walker.nextNode()) {
                    for (const word of text.data.matchAll(/\\S+/g)) {
                        const range = document.createRange();
                        range.setStart(text, word.index);
                        range.setEnd(text, word.index + word[0].length);
                        const rects = [...range.getClientRects()].filter((r) => r.width > 0);
                        const lines = new Set(rects.map((r) => Math.round(r.top)));
                        if (rects.length === 0 || lines.size > 1) broken.push(word[0]);
                    }
                }
            }
            return broken;
        }"""
    )
    return broken


def overlaps(box: Any, others: list[dict[str, float]]) -> bool:
    return any(
        box["x"] < other["x"] + other["width"]
        and other["x"] < box["x"] + box["width"]
        and box["y"] < other["y"] + other["height"]
        and other["y"] < box["y"] + box["height"]
        for other in others
    )


def text_boxes(code: Locator) -> list[dict[str, float]]:
    """Where the code's characters are drawn: a Range over all of its text."""
    boxes: list[dict[str, float]] = code.evaluate(
        """(node) => {
            const range = document.createRange();
            range.selectNodeContents(node);
            return [...range.getClientRects()].filter((r) => r.width > 0)
                .map((r) => ({x: r.x, y: r.y, width: r.width, height: r.height}));
        }"""
    )
    return boxes


def style(locator: Locator, name: str) -> Any:
    return locator.evaluate(f"(node) => getComputedStyle(node)['{name}']")


def px(locator: Locator, name: str) -> float:
    return float(style(locator, name).removesuffix("px"))


@pytest.mark.parametrize(("viewport", "dark", "listener"), VIEWS)
def test_reply_headings_tables_tasks_and_code_render_as_chat_pages_do(
    open_console: OpenConsole,
    model: FakeModel,
    viewport: dict[str, int],
    dark: bool,
    listener: str,
) -> None:
    """Headings larger than the text, largest first, not capitalised; a wide table scrolls in its
    frame and every word of every cell is on one line (DOM Range per word); the task list is two
    disabled checkboxes named by their task, no bullet; code is highlighted (token spans) under a
    bar with its language ("text" when none) whose Copy covers none of the code's text."""
    page = open_console(listener, viewport=viewport, dark=dark)
    open_thread_with_reply(page, model, REPLY)
    body = reply_body(page)

    text = px(body.locator("p").first, "fontSize")
    sizes = [px(body.locator(tag), "fontSize") for tag in ("h1", "h2", "h3")]
    assert sizes[0] > sizes[1] > sizes[2] > text, (sizes, text)
    assert style(body.locator("h2"), "textTransform") == "none"

    table = body.locator("table")
    expect(table.locator("th")).to_have_count(5)
    assert broken_words(table) == []
    frame = body.locator(".table-wrap")
    if viewport == PHONE:
        assert frame.evaluate("(node) => node.scrollWidth > node.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    bubble = messages(page).locator('[data-from="assistant"]').bounding_box()
    log = messages(page).bounding_box()
    assert bubble and log and bubble["x"] + bubble["width"] <= log["x"] + log["width"] + 1

    boxes = body.get_by_role("checkbox")
    expect(boxes).to_have_count(2)
    expect(body.get_by_role("checkbox", name="write the tests")).not_to_be_checked()
    expect(body.get_by_role("checkbox", name="read the issue")).to_be_checked()
    for checkbox in boxes.all():
        expect(checkbox).to_be_disabled()
    assert style(body.locator("li.task").first, "listStyleType") == "none"
    expect(body.locator("li:not(.task)")).to_have_text(["a plain item"])

    blocks = body.locator(".code-block")
    expect(blocks).to_have_count(2)
    expect(blocks.locator(".code-language")).to_have_text(["python", "text"])
    python = blocks.first.locator("code")
    expect(python).to_have_text(CODE)
    expect(python.locator("span.hljs-keyword").first).to_have_text("def")
    expect(python.locator("span.hljs-string")).not_to_have_count(0)
    expect(python.locator("span.hljs-comment")).to_have_text("# a comment")
    expect(blocks.nth(1).locator("code span")).to_have_count(0)
    for block in blocks.all():
        copy = block.get_by_role("button", name="Copy code")
        expect(copy).to_be_visible()
        box = copy.bounding_box()
        assert box and not overlaps(box, text_boxes(block.locator("code")))


@pytest.mark.parametrize(("viewport", "dark", "listener"), VIEWS)
def test_reply_images_show_as_links_and_load_nothing(
    open_console: OpenConsole,
    model: FakeModel,
    viewport: dict[str, int],
    dark: bool,
    listener: str,
) -> None:
    """An image is a link named by its alt text (its address when it has none), with no "!"
    left; inside a link it is that link's text; a `data:` one keeps no href; no request leaves
    for it and no <img> is in the page."""
    page = open_console(listener, viewport=viewport, dark=dark)
    own_host = urlsplit(page.url).hostname
    requested: list[str] = []

    def watch(request: Request) -> None:
        if urlsplit(request.url).hostname != own_host or request.resource_type == "image":
            requested.append(request.url)

    page.on("request", watch)
    open_thread_with_reply(page, model, REPLY)
    body = reply_body(page)
    diagram = body.get_by_role("link", name="A diagram of the bus")
    expect(diagram).to_have_attribute("href", "http://images.example/diagram.png")
    expect(diagram).to_have_attribute("rel", "noopener noreferrer")
    no_alt = body.get_by_role("link", name="https://images.example/no-alt.png")
    expect(no_alt).to_have_attribute("href", "https://images.example/no-alt.png")
    expect(body.get_by_role("link", name="badge")).to_have_attribute(
        "href", "https://example.com/home"
    )
    assert body.get_by_text("inline", exact=True).get_attribute("href") is None
    paragraph = body.locator("p").filter(has_text="See ")
    expect(paragraph).to_have_text(
        "See A diagram of the bus and https://images.example/no-alt.png.\nAlso badge and inline."
    )
    assert "!" not in paragraph.inner_text()
    expect(messages(page).locator("img, picture, svg, [src]")).to_have_count(0)
    page.wait_for_load_state("networkidle")
    assert requested == []


@pytest.mark.parametrize(("viewport", "dark", "listener"), VIEWS)
def test_reply_copy_buttons_put_the_answer_and_the_code_on_the_clipboard(
    open_console: OpenConsole,
    model: FakeModel,
    viewport: dict[str, int],
    dark: bool,
    listener: str,
) -> None:
    """The whole answer's Copy puts the reply's markdown as sent on the clipboard, also while
    Raw shows it; a code block's Copy puts that block's code; on a phone both are 44 px taps."""
    page = open_console(listener, viewport=viewport, dark=dark)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_thread_with_reply(page, model, REPLY)
    reply = messages(page).locator('[data-from="assistant"]')

    whole = reply.get_by_role("button", name="Copy the whole answer")
    if viewport == PHONE:
        for control in (whole, reply.get_by_role("button", name="Copy code").first):
            box = control.bounding_box()
            assert box and box["width"] >= 44 and box["height"] >= 44, box
    whole.click()
    expect(whole).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == REPLY

    reply.locator(".code-block").first.get_by_role("button", name="Copy code").click()
    assert page.evaluate("navigator.clipboard.readText()") == CODE

    reply.get_by_role("button", name="Show the raw text").click()
    page.evaluate("navigator.clipboard.writeText('')")
    whole.click()
    assert page.evaluate("navigator.clipboard.readText()") == REPLY


def test_reply_task_list_admits_no_other_input(open_console: OpenConsole, model: FakeModel) -> None:
    """Only a list item's leading `[ ]`/`[x]` becomes a checkbox, disabled; raw inputs, escaped
    or out-of-list brackets, and a table's brackets stay text; nothing runs."""
    page = open_console("human", viewport=PHONE)
    open_thread_with_reply(page, model, SMUGGLED_INPUTS)
    body = reply_body(page)
    expect(body).to_contain_text('<input type="text" value="in a task">')
    inputs = messages(page).locator("input")
    expect(inputs).to_have_count(2)
    for box in inputs.all():
        expect(box).to_have_attribute("type", "checkbox")
        expect(box).to_be_disabled()
        assert box.evaluate("(node) => node.getAttributeNames().sort()") in (
            ["aria-label", "disabled", "type"],
            ["aria-label", "checked", "disabled", "type"],
        )
    expect(body).to_contain_text("[ ] escaped, so not a task")
    expect(body).to_contain_text("[ ] not in a list, so not a task")
    expect(body.locator("td").first).to_have_text("[x]")
    expect(body.get_by_role("link", name="a task link")).to_have_attribute(
        "href", "https://example.com/task"
    )
    for box in inputs.all():
        box.click(force=True)
    expect(body.get_by_role("checkbox", checked=True)).to_have_count(1)
    assert page.evaluate("window.pwned") is None


ALIGNED_TABLE = (
    "| left | centre | right | none |\n|:---|:---:|---:|---|\n"
    "| a long left cell | a long centre cell | a long right cell | a long plain cell |\n"
    "| l | c | r | n |\n"
)


@pytest.mark.parametrize("listener", ["human", "tester"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_reply_table_columns_keep_their_alignment_under_the_policy(
    open_console: OpenConsole, model: FakeModel, viewport: dict[str, int], listener: str
) -> None:
    """A table's column alignment comes from classes, not an inline `style` the
    Content-Security-Policy refuses: each cell of an aligned column is aligned, streamed and
    landed, with no `style` attribute in the reply and no violation reported (`open_console`
    fails the test on one)."""
    model.chunk_delay = 0.02
    page = open_console(listener, viewport=viewport)
    violations: list[str] = []
    page.on("console", lambda message: message.type == "error" and violations.append(message.text))
    open_thread_with_reply(page, model, ALIGNED_TABLE)
    table = reply_body(page).locator("table")
    for cells in (table.locator("th"), table.locator("tr").last.locator("td")):
        expect(cells).to_have_count(4)
        aligned = [style(cells.nth(n), "textAlign") for n in range(4)]
        assert aligned[:3] == ["left", "center", "right"], aligned
        assert aligned[3] in ("start", "left"), aligned
    expect(cells.nth(1)).to_have_class("align-center")
    expect(messages(page).locator("[style]")).to_have_count(0)
    assert violations == []
