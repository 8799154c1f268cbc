"""The human's project list says, in words, which projects the tester created — a
tester's `launch` beside the human's own never passes as the human's — and keeps them apart, in
a folded "Tester projects" group under the human's own."""

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

    expect(projects.get_by_role("button", name=f"{name} (tester) tester")).to_have_count(0)
    tester_projects = human.get_by_role("list", name="Tester projects", exact=True)
    theirs = tester_projects.get_by_role("button", name=f"{name} (tester) tester", exact=True)
    expect(theirs).to_be_hidden()
    human.locator("#tester-projects-group summary").click()
    expect(theirs.locator(".tester-tag")).to_have_text("tester")
    expect(theirs).to_have_attribute("data-creator", "tester")


def test_tester_console_project_list_has_no_tags(
    open_console: OpenConsole, tester_api: LiveApi
) -> None:
    """The tester's side shows every project untagged and in one list, as its trail leaves
    its own rows untagged: the tag and the group are for the human."""
    name = unique("probe")
    tester_api.create_project(name)
    tester = open_console("tester")
    projects = tester.get_by_role("list", name="Projects", exact=True)
    expect(projects.get_by_role("button", name=name, exact=True)).to_be_visible()
    expect(projects.locator(".tester-tag")).to_have_count(0)
    expect(tester.locator("#tester-projects-group")).to_have_count(0)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_human_console_tester_tag_is_accessible_chosen_or_not(
    open_console: OpenConsole, tester_api: LiveApi, dark: bool
) -> None:
    """axe finds no serious violation with the tag on a chosen project and an unchosen one,
    in the group unfolded."""
    chosen, other = unique("tagged"), unique("tagged")
    tester_api.create_project(chosen)
    tester_api.create_project(other)
    human = open_console("human", dark=dark)
    human.locator("#tester-projects-group summary").click()
    projects = human.get_by_role("list", name="Tester projects", exact=True)
    projects.get_by_role("button", name=f"{chosen} tester", exact=True).click()
    expect(projects.get_by_role("button", name=f"{chosen} tester", exact=True)).to_have_attribute(
        "aria-current", "true"
    )
    expect(projects.get_by_role("button", name=f"{other} tester", exact=True)).to_be_visible()
    assert violations(human) == []
