"""The Console on a phone (390×844, below 700 px): the thread list and the conversation are
separate views with a back button, the thread's title and composer stay on screen, the trail is
behind a tab, and every control is a tap target of at least 44 × 44 px."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.console.pages import create_project, create_thread, messages, send, trail, unique
from tests.support.console_pages import PHONE, OpenConsole
from tests.support.model_servers import FakeModel

TAP_PX = 44
# A reply's task list shows disabled checkboxes: read-only marks, not controls to tap. A link in a
# reply's text is an inline target, sized by the line it sits in (WCAG 2.2, 2.5.8's exception).
CONTROLS = (
    "button, a[href]:not(.markdown a), input:not([type=checkbox]:disabled), textarea, select,"
    " [role='tab']"
)


def small_targets(page: Page) -> list[str]:
    """Each visible control smaller than a tap target, named with its size."""
    found: list[str] = page.evaluate(
        """([selector, least]) => [...document.querySelectorAll(selector)]
            .filter((node) => node.checkVisibility() && node.getClientRects().length)
            .map((node) => [node, node.getBoundingClientRect()])
            .filter(([, box]) => box.width < least || box.height < least)
            .map(([node, box]) =>
                `${node.tagName} ${node.id || node.textContent.trim().slice(0, 30)}: ` +
                `${Math.round(box.width)}x${Math.round(box.height)}`)""",
        [CONTROLS, TAP_PX],
    )
    return found


def in_view(page: Page, selector: str) -> bool:
    box = page.locator(selector).bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"]


def test_phone_list_and_conversation_are_separate_views_with_back(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """Opening a thread shows the conversation alone; Back returns to the list; the trail is a
    tab; the title and the composer stay on screen however long the thread is."""
    model.content = "\n\n".join(f"paragraph {n} of a long reply" for n in range(30))
    page = open_console("human", viewport=PHONE)
    expect(page.locator("#trail-pane")).to_be_hidden()
    page.get_by_role("tab", name="Trail").click()
    expect(page.locator("#trail-pane")).to_be_visible()
    expect(page.locator("#sidebar")).to_be_hidden()
    page.get_by_role("tab", name="Threads").click()

    create_project(page, unique("phone"))
    name = unique("thread")
    create_thread(page, name)
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.get_by_role("tab", name="Trail")).to_be_hidden()
    for n in range(2):
        send(page, unique(f"turn {n}"))
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(2)
    page.get_by_label("Message", exact=True).focus()
    assert in_view(page, "#thread-title") and in_view(page, "#composer-body")
    assert page.evaluate("document.scrollingElement.scrollHeight") <= PHONE["height"]

    page.get_by_role("button", name="Back to the threads").click()
    expect(page.locator("#thread-pane")).to_be_hidden()
    thread = page.get_by_role("list", name="Your threads").get_by_role("button", name=name)
    expect(thread).to_be_visible()
    thread.click()
    expect(page.locator("#thread-pane")).to_be_visible()
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(2)


def test_phone_controls_are_tap_targets_of_44_px(
    open_console: OpenConsole, model: FakeModel
) -> None:
    """Every visible control, in every view (sign-in, list, trail, conversation with a rendered
    reply, a task list's read-only checkboxes and a link in the text in both), measures at least
    44 × 44 px."""
    model.content = (
        "the plan, from [the notes](https://notes.example/plan):\n\n- [x] freeze\n- [ ] publish"
    )
    page = open_console("human", viewport=PHONE, signed_in=False)
    assert small_targets(page) == []
    page.close()
    page = open_console("tester", viewport=PHONE)
    create_project(page, unique("taps"))
    assert small_targets(page) == []
    page.get_by_role("tab", name="Trail").click()
    assert small_targets(page) == []
    page.get_by_role("tab", name="Threads").click()
    create_thread(page, unique("thread"))
    send(page, unique("a turn"))
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    expect(messages(page).locator('[data-from="assistant"] input[type=checkbox]')).to_have_count(2)
    expect(messages(page).get_by_role("link", name="the notes")).to_be_visible()
    assert small_targets(page) == []
    page.get_by_role("button", name="Back to the threads").click()
    page.get_by_role("tab", name="Trail").click()
    expect(trail(page).locator("input[type=checkbox]").first).to_be_visible()
    expect(trail(page).get_by_role("link", name="the notes").first).to_be_visible()
    assert small_targets(page) == []
