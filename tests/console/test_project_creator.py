"""The human's project list says, in words, which projects the tester created — a
tester's `launch` beside the human's own never passes as the human's."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.console.api import LiveApi
from tests.console.pages import unique
from tests.console.test_accessibility import violations
from tests.support.console_pages import OpenConsole


def test_human_console_project_list_tags_the_testers_project(
    open_console: OpenConsole, tester_api: LiveApi
) -> None:
    name = unique("launch")
    tester_api.create_project(f"{name} (tester)")
    human = open_console("human")
    projects = human.get_by_role("list", name="Projects", exact=True)
    # The human's own project, made on the page, carries no tag.
    human.get_by_label("New project").fill(name)
    human.get_by_role("button", name="Create project").click()
    mine = projects.get_by_role("button", name=name, exact=True)
    expect(mine).to_have_attribute("aria-current", "true")
    expect(mine.locator(".tester-tag")).to_have_count(0)

    theirs = projects.get_by_role("button", name=f"{name} (tester) tester", exact=True)
    expect(theirs.locator(".tester-tag")).to_have_text("tester")
    expect(theirs).to_have_attribute("data-creator", "tester")


def test_tester_console_project_list_has_no_tags(
    open_console: OpenConsole, tester_api: LiveApi
) -> None:
    """The tester's side shows every project untagged, as its trail leaves its own rows
    untagged: the tag is for the human."""
    name = unique("probe")
    tester_api.create_project(name)
    tester = open_console("tester")
    projects = tester.get_by_role("list", name="Projects", exact=True)
    expect(projects.get_by_role("button", name=name, exact=True)).to_be_visible()
    expect(projects.locator(".tester-tag")).to_have_count(0)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_human_console_tester_tag_is_accessible_chosen_or_not(
    open_console: OpenConsole, tester_api: LiveApi, dark: bool
) -> None:
    """axe finds no serious violation with the tag on a chosen project and an unchosen one."""
    chosen, other = unique("tagged"), unique("tagged")
    tester_api.create_project(chosen)
    tester_api.create_project(other)
    human = open_console("human", dark=dark)
    projects = human.get_by_role("list", name="Projects", exact=True)
    projects.get_by_role("button", name=f"{chosen} tester", exact=True).click()
    expect(projects.get_by_role("button", name=f"{chosen} tester", exact=True)).to_have_attribute(
        "aria-current", "true"
    )
    expect(projects.get_by_role("button", name=f"{other} tester", exact=True)).to_be_visible()
    assert violations(human) == []
