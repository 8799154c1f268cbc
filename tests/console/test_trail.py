"""The trail's rows as the inbox contract shapes them (issue #15): claim-ended rows fold into
their run's row, each row names its thread (a link for the actor's own), sends are labelled by
the channel they came through. The rows' new fields are added to the server's own answer here,
as the contract gives them, so the Console's side is tested on its own."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import Page, Route, expect

from tests.console.conftest import OpenConsole
from tests.console.pages import (
    create_project,
    create_thread,
    messages,
    send,
    trail,
    unique,
)
from tests.model_servers import FakeModel


def with_contract_fields(rows: list[dict[str, Any]], thread_name: str) -> list[dict[str, Any]]:
    """The contract's `kind`, `thread_name` and `via` on each row (the test knows which rows
    are which: a run's claim ended is the row by the assistant to the assistant)."""
    shaped = []
    for row in rows:
        claim_ended = row["from_role"] == row["to_role"] == "assistant"
        via = "console" if row["from_role"] in ("human", "tester") else None
        kind = "claim.ended" if claim_ended else "message"
        shaped.append({**row, "kind": kind, "thread_name": thread_name, "via": via})
    return shaped


def serve_contract_trail(page: Page, thread_name: str) -> None:
    def shape(route: Route) -> None:
        answer = route.fetch()
        data = answer.json()
        data["rows"] = with_contract_fields(data["rows"], thread_name)
        route.fulfill(response=answer, body=json.dumps(data))

    page.route(re.compile(r"/api/trail(\?|$)"), shape)


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
    reply = trail(page).locator(".trail-row", has_text=f"assistant to human: {answer}")
    run = reply.get_attribute("data-run")
    claim = trail(page).locator(
        f'.trail-row[data-run="{run}"]', has=page.locator(".trail-text", has_text="claim of")
    )
    expect(claim).to_be_visible()  # without `kind`, shown as it is

    serve_contract_trail(page, name)
    page.reload()
    turn = trail(page).locator(".trail-row", has_text=f"human to assistant: {body}")
    expect(turn.locator(".meta")).to_contain_text("via Console · human · human-cli")
    link = turn.get_by_role("link", name=name)
    expect(link).to_have_attribute("href", re.compile(r"^#thread=\d+$"))

    folded = reply.locator("details.folded")
    expect(folded.locator("summary")).to_have_text("1 more row of this run")
    expect(claim).to_have_attribute("data-kind", "claim.ended")
    expect(claim).to_be_hidden()
    expect(folded.locator("li")).to_be_hidden()
    folded.locator("summary").click()
    expect(folded.locator("li")).to_have_text(re.compile("^assistant to assistant: claim of "))

    create_thread(page, unique("elsewhere"))
    link.click()
    expect(page.get_by_role("heading", name=name)).to_be_visible()
    expect(messages(page).locator(".body").get_by_text(body, exact=True)).to_have_count(1)
