"""Replies rendered as a safe markdown subset: what renders, the raw toggle, and
hostile replies — `javascript:` and `data:` links, raw HTML, image beacons, attribute
injection — which run no script, send no request off the machine, and leave no dangerous
markup in the page."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import Locator, Page, Request, expect

from tests.console.pages import create_project, create_thread, messages, send, unique
from tests.support.console_pages import OpenConsole
from tests.support.model_servers import FakeModel

REPLY = """Here is **the plan**, in *short*:

- first step
- second step

```
print("hello")
```

See [the docs](https://example.com/docs).

| name | size |
|------|------|
| a    | 1    |
"""

# Each line tries a way in; `window.pwned` is set by any that runs.
HOSTILE = """[js link](javascript:window.pwned=1)
[data link](data:text/html;base64,PHNjcmlwdD53aW5kb3cucHduZWQ9Mjwvc2NyaXB0Pg==)
[vb link](vbscript:msgbox(1))
<img src=x onerror="window.pwned=3">
<script>window.pwned=4</script>
<a href="javascript:window.pwned=5">raw anchor</a>
<iframe src="http://evil.example/frame"></iframe>
![beacon](http://evil.example/beacon.png)
![local](/static/console/console.css?beacon)
[attr](http://evil.example/" onmouseover="window.pwned=6)
<div style="background:url(http://evil.example/bg)">styled</div>
<svg><a xlink:href="javascript:window.pwned=7">svg</a></svg>
"""


def reply_body(page: Page) -> Locator:
    return messages(page).locator('[data-from="assistant"] .body')


def open_thread_with_reply(page: Page, model: FakeModel, content: str) -> None:
    model.content = content
    create_project(page, unique("markdown"))
    create_thread(page, unique("thread"))
    send(page, unique("reply in markdown"))
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)


def test_reply_markdown_renders_subset_with_copy_links_and_raw_toggle(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """Paragraphs, emphasis, lists, a code block with a copy button, a link that opens apart
    (`rel="noopener noreferrer"`, new tab), a table; `dir="auto"`; Raw shows the text as sent."""
    page = open_console("human")
    open_thread_with_reply(page, model, REPLY)
    body = reply_body(page)
    expect(body).to_have_attribute("dir", "auto")
    expect(body.locator("strong")).to_have_text("the plan")
    expect(body.locator("em")).to_have_text("short")
    expect(body.locator("ul > li")).to_have_text(["first step", "second step"])
    expect(body.locator("pre code")).to_have_text('print("hello")\n')
    expect(body.get_by_role("button", name="Copy code")).to_be_visible()
    link = body.get_by_role("link", name="the docs")
    expect(link).to_have_attribute("href", "https://example.com/docs")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(link).to_have_attribute("target", "_blank")
    expect(body.locator("table th")).to_have_text(["name", "size"])

    raw = messages(page).get_by_role("button", name="Show the raw text")
    raw.click()
    expect(raw).to_have_attribute("aria-pressed", "true")
    expect(reply_body(page)).to_have_text(REPLY.rstrip("\n"))
    expect(reply_body(page).locator("strong")).to_have_count(0)
    raw.click()
    expect(reply_body(page).locator("strong")).to_have_text("the plan")


def test_human_turn_shows_as_typed_not_rendered(open_console: OpenConsole) -> None:
    """A person's own turn is shown as typed: markdown in it stays text, `dir="auto"`."""
    page = open_console("tester")
    create_project(page, unique("typed"))
    create_thread(page, unique("thread"))
    send(page, "**not bold** <b>nor this</b>")
    turn = messages(page).locator('[data-from="tester"] .body')
    expect(turn).to_have_text("**not bold** <b>nor this</b>")
    expect(turn).to_have_attribute("dir", "auto")
    expect(turn.locator("strong, b")).to_have_count(0)


def test_reply_hostile_markdown_runs_nothing_loads_nothing_and_leaves_no_markup(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """No script runs (no dialog, `window.pwned` unset, also after hovering and clicking the
    links), no request leaves for another host or for an image, and no image, script, frame,
    style, event attribute or `javascript:`/`data:` link is in the page."""
    page = open_console("human")
    own_host = urlsplit(page.url).hostname
    foreign: list[str] = []
    images: list[str] = []

    def watch(request: Request) -> None:
        if urlsplit(request.url).hostname != own_host:
            foreign.append(request.url)
        if request.resource_type == "image" or "beacon" in request.url:
            images.append(request.url)

    dialogs: list[str] = []
    page.on("request", watch)
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    open_thread_with_reply(page, model, HOSTILE)
    body = reply_body(page)
    expect(body).to_contain_text("raw anchor")  # shown as text, harmlessly

    for link in body.locator("a").all():
        link.hover()
        if not (link.get_attribute("href") or "").startswith("http"):
            link.click()
    body.get_by_text("styled").hover()

    assert page.evaluate("window.pwned") is None
    assert dialogs == []
    assert foreign == [] and images == []
    dangerous = "img, script, iframe, svg, style, [style], [src], object, embed"
    expect(messages(page).locator(dangerous)).to_have_count(0)
    hrefs = [link.get_attribute("href") or "" for link in body.locator("a[href]").all()]
    assert all(href.startswith(("http://", "https://")) for href in hrefs), hrefs
    with_handlers = page.evaluate(
        """() => [...document.querySelectorAll('#messages *')].filter(
            (node) => [...node.attributes].some((attribute) => attribute.name.startsWith('on'))
        ).length"""
    )
    assert with_handlers == 0
