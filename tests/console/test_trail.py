"""The trail's rows as the inbox contract shapes them: claim-ended rows fold into
their run's row (shown when asked), each row names its thread (a link for the actor's
own), sends are labelled by who sent them and the channel they came through ("ada via
Console")."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.console.pages import (
    create_project,
    create_thread,
    messages,
    send,
    trail,
    trail_rows,
    unique,
)
from tests.support.console_pages import OpenConsole
from tests.support.model_servers import FakeModel


def test_trail_folds_claim_rows_names_threads_and_labels_console_sends(
    open_console: OpenConsole, model: FakeModel
) -> None:
    answer = unique("the answer")
    model.content = answer
    page = open_console("human")
    create_project(page, unique("trail"))
    name = unique("named")
    create_thread(page, name)
    body = unique("a turn")
    send(page, body)
    expect(messages(page).locator('[data-from="assistant"]')).to_have_count(1)
    reply = trail_rows(page, f"assistant to human: {answer}")
    run = reply.get_attribute("data-run")
    claim = trail(page).locator(f'.trail-row[data-run="{run}"][data-kind="claim.ended"]')
    turn = trail_rows(page, f"human to assistant: {body}")
    expect(turn.locator(".trail-who")).to_have_text("You to assistant")
    expect(turn.locator(".trail-via")).to_have_text("via Console")
    expect(turn.locator(".meta")).not_to_contain_text("human-cli")
    link = turn.get_by_role("link", name=name)
    expect(link).to_have_attribute("href", re.compile(r"^#thread=\d+$"))

    # Bookkeeping shows only when asked, folded into its run's row.
    folded = reply.locator("details.folded")
    expect(folded).to_be_hidden()
    page.get_by_label("Claims and leases").check()
    expect(folded.locator("summary")).to_have_text("1 more row of this run")
    expect(claim).to_have_count(1)
    expect(claim).to_be_hidden()
    expect(folded.locator("li")).to_be_hidden()
    folded.locator("summary").click()
    expect(folded.locator("li")).to_have_text(re.compile("^assistant: claim of "))
    page.reload()  # the rows read back from the list fold the same way
    # Start-up reopens the address's thread; a reader acts once it is open again.
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(page.locator("#thread-status")).to_have_text("live")
    page.get_by_label("Claims and leases").check()
    expect(reply.locator("details.folded summary")).to_have_text("1 more row of this run")
    expect(claim).to_be_hidden()

    create_thread(page, unique("elsewhere"))
    link.click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(messages(page).locator(".body").get_by_text(body, exact=True)).to_have_count(1)


def test_trail_link_opens_thread_in_its_own_project(open_console: OpenConsole) -> None:
    """A row's link names the thread alone (`#thread=ID`): followed while another project is
    chosen, it opens the thread in its own project, the list and the address with it."""
    page = open_console("tester")
    home = unique("home")
    create_project(page, home)
    name = unique("named")
    create_thread(page, name)
    body = unique("a turn")
    send(page, body)
    create_project(page, unique("away"))

    trail(page).locator(".trail-row", has_text=body).get_by_role("link", name=name).click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    projects = page.get_by_role("list", name="Projects", exact=True)
    expect(projects.get_by_role("button", name=home)).to_have_attribute("aria-current", "true")
    current = page.get_by_role("list", name="Your threads").get_by_role("button", name=name)
    expect(current).to_have_attribute("aria-current", "true")
    expect(page).to_have_url(re.compile(r"#project=\d+&thread=\d+$"))
