"""A consultation in the Console (R23): the human asks; the assistant's model asks the reviewer
(a second instance of the business, answered by its own run); the human's thread shows both
turns, each labelled by its ends, the step card "Asked reviewer" under the reply, and the
trail the three exchanges.

The server's models are the tests' OpenAI-compatible fake, scripted per instance by its system
prompt ("You are reviewer, …").
"""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect

from tests.console.assistant import WITH_REVIEWER
from tests.console.pages import create_project, create_thread, messages, send, trail, unique
from tests.console.server import business_server
from tests.support.console_pages import OpenConsole
from tests.support.model_servers import FakeModel

QUESTION = "Is 40 guests within the budget?"
ADVICE = "No: 40 guests is 10% over."


# The Console's server with the demo business and a reviewer.
console_server = business_server("consult", WITH_REVIEWER)


def consulting(model: FakeModel) -> None:
    def is_reviewer(body: dict[str, Any]) -> bool:
        return body["messages"][0]["content"].startswith("You are reviewer")

    def told(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [m for m in body["messages"] if m["role"] == "tool"]

    def calls(body: dict[str, Any]) -> list[dict[str, str]]:
        if is_reviewer(body) or told(body):
            return []
        arguments = json.dumps({"to": "reviewer", "body": QUESTION})
        return [{"id": "call_ask", "name": "send_message", "arguments": arguments}]

    def text(body: dict[str, Any]) -> str:
        if is_reviewer(body):
            return ADVICE
        return "My colleague says: " + json.loads(told(body)[0]["content"])["answer"]

    model.tool_calls = calls
    model.script = text


def test_the_human_sees_the_consultation_labelled_and_the_step_that_asked(
    open_console: OpenConsole, model: FakeModel
) -> None:
    consulting(model)
    page = open_console("human")
    create_project(page, unique("dinner"))
    create_thread(page, unique("guests"))
    send(page, "plan a dinner for 40")
    reply = messages(page).locator('[data-from="assistant"][data-to="human"]')
    expect(reply).to_contain_text(f"My colleague says: {ADVICE}")
    asked = messages(page).locator('[data-from="assistant"][data-to="reviewer"]')
    expect(asked.locator(".meta")).to_contain_text("assistant to reviewer")
    expect(asked).to_contain_text(QUESTION)
    advice = messages(page).locator('[data-from="reviewer"]')
    expect(advice.locator(".meta")).to_contain_text("reviewer to assistant")
    expect(advice).to_contain_text(ADVICE)
    expect(messages(page).locator(".step")).to_have_count(1)
    expect(messages(page).locator(".step").first).to_contain_text("Asked reviewer")
    for label in ("assistant to reviewer", "reviewer to assistant", "assistant to you"):
        expect(trail(page).get_by_text(label, exact=False).first).to_be_visible()
