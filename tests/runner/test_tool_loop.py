"""The tool loop of the OpenAI-compatible backend, with the real runner (SPEC §7.2).

A scripted OpenAI-compatible server answers with tool calls, streamed (id and name first, the
arguments in fragments) or whole; each call runs through the broker as the run and is stored as
a step; the model is sent the results and asked again until it answers in words. R7, R11 and
R15 decide what the calls may do. These use the real runner, so transactional databases; they
run on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from broker import actions
from broker.actors import Actor
from broker.models import Instance, Message, Step, Task, ThreadClaim
from runner.backends.chat_completions import ChatCompletionsBackend
from tests.broker import factories
from tests.support.model_servers import FakeModel
from tests.support.waits import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

BOOK = {"id": "call_book", "name": "create_task", "arguments": '{"title": "book the photographer"}'}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `tool` messages of a request: what the model was told of its calls."""
    return [message for message in body["messages"] if message["role"] == "tool"]


def calls_once(*calls: dict[str, str]):
    """A model that asks for `calls` in its first answer, then answers in words."""

    def script(body: dict[str, Any]) -> list[dict[str, str]]:
        return [] if tool_results(body) else list(calls)

    return script


def backend(fake_model: FakeModel) -> ChatCompletionsBackend:
    fake_model.models = ["m"]
    return ChatCompletionsBackend(base_url=fake_model.url, model="m", idle_timeout=5)


def answered(turn: Message) -> Message:
    return wait_for(
        lambda: Message.objects.filter(in_reply_to=turn, message_class="RESULT").first()
    )


def reply_state(turn: Message, state: str) -> Message:
    return wait_for(lambda: Message.objects.filter(pk=turn.pk, progress__state=state).first())


def send(actor: Actor, body: str = "book the photographer for Friday") -> Message:
    thread = factories.thread(actor, factories.project(actor, f"{actor.role} work"), "launch")
    return actions.send_to_thread(actor, thread_id=thread.pk, body=body).message


@pytest.mark.parametrize("streams", [True, False], ids=["streamed", "whole"])
def test_human_turn_creates_its_task_once_and_the_model_is_told(
    human: Actor, fake_model: FakeModel, start_runner, streams: bool
) -> None:
    """R7, R15, SPEC §7.2: the human's turn makes one task citing its `human.input`, an `ok`
    step, and the model's next request carries the result; its words are the reply."""
    fake_model.streams = streams
    fake_model.tool_calls = calls_once(BOOK)
    fake_model.content = "Done: the photographer is booked."
    turn = send(human)
    start_runner(backend=backend(fake_model))
    reply = answered(turn)
    assert reply.body == "Done: the photographer is booked."
    task = Task.objects.get()
    assert task.title == "book the photographer" and task.request_id == turn.request_id
    step = Step.objects.get()
    assert (step.turn_id, step.call_id, step.tool, step.outcome) == (
        turn.pk,
        "call_book",
        "create_task",
        "ok",
    )
    first, second = fake_model.requests
    offered = [tool["function"]["name"] for tool in first["tools"]]
    assert offered == ["create_task", "send_message"]
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "create_task"
    (told,) = tool_results(second)
    assert told["tool_call_id"] == "call_book"
    assert json.loads(told["content"]) == {
        "outcome": "ok",
        "task": task.pk,
        "title": "book the photographer",
    }
    # Usage adds up over the turn's two requests.
    assert (reply.prompt_tokens, reply.completion_tokens) == (22, 4)


def test_tester_turn_create_task_is_refused_and_the_model_told(
    tester: Actor, fake_model: FakeModel, start_runner
) -> None:
    """R15, R7: the same call from a tester's turn is refused; no task; the model is told in
    words it can pass on, and the turn is answered."""
    fake_model.tool_calls = calls_once(BOOK)
    fake_model.content = "I could not create it: this is a test."
    turn = send(tester)
    start_runner(backend=backend(fake_model))
    answered(turn)
    assert not Task.objects.exists()
    step = Step.objects.get()
    assert (step.outcome, step.code) == ("refused", "invalid")
    (told,) = tool_results(fake_model.requests[1])
    assert "test conversation creates no task" in json.loads(told["content"])["detail"]


def test_tester_turn_send_message_to_human_is_refused(
    tester: Actor, fake_model: FakeModel, start_runner
) -> None:
    """R11: from a tester's thread the model's message to the human is refused, nothing stored."""
    call = {"id": "c1", "name": "send_message", "arguments": '{"to": "human", "body": "hi"}'}
    fake_model.tool_calls = calls_once(call)
    turn = send(tester)
    start_runner(backend=backend(fake_model))
    answered(turn)
    step = Step.objects.get()
    assert (step.outcome, step.code) == ("refused", "tester-thread-human")
    assert not Message.objects.filter(to_role="human").exists()


def test_bad_calls_are_answered_and_the_loop_goes_on(
    human: Actor, fake_model: FakeModel, start_runner, caplog
) -> None:
    """SPEC §7.2: an unknown tool, arguments that are not JSON and arguments that do not fit
    are each an `error` step the model is told about; the turn is answered, nothing fails, and
    nothing is logged above INFO."""
    bad = [
        {"id": "c1", "name": "launch_rockets", "arguments": "{}"},
        {"id": "c2", "name": "create_task", "arguments": '{"title": '},
        {"id": "c3", "name": "create_task", "arguments": '{"name": "x"}'},
    ]
    fake_model.tool_calls = calls_once(*bad)
    turn = send(human)
    caplog.set_level(logging.INFO)
    start_runner(backend=backend(fake_model))
    answered(turn)
    codes = list(Step.objects.order_by("pk").values_list("call_id", "outcome", "code"))
    assert codes == [
        ("c1", "error", "unknown-tool"),
        ("c2", "error", "invalid-arguments"),
        ("c3", "error", "invalid-arguments"),
    ]
    told = [json.loads(m["content"])["error"] for m in tool_results(fake_model.requests[1])]
    assert told == ["unknown-tool", "invalid-arguments", "invalid-arguments"]
    assert not Task.objects.exists()
    assert [r.getMessage() for r in caplog.records if r.levelno > logging.INFO] == []


def test_a_model_that_calls_forever_fails_the_turn_in_words(
    human: Actor, fake_model: FakeModel, start_runner
) -> None:
    """SPEC §7.2: past `max_steps` rounds the turn fails with a sentence, at once (no retry
    storm): `max_steps` rounds of calls, one request more, and no reply."""
    Instance.objects.filter(name="assistant").update(reply={"max_steps": 2})
    rounds = iter(range(1, 100))
    fake_model.tool_calls = lambda body: [
        {"id": f"c{next(rounds)}", "name": "create_task", "arguments": '{"title": "again"}'}
    ]
    turn = send(human)
    start_runner(backend=backend(fake_model))
    failed = reply_state(turn, "failed")
    assert "past its limit of 2 rounds" in failed.progress.failure
    assert len(fake_model.requests) == 3 and failed.progress.attempts == 1
    assert Step.objects.count() == 2 and Task.objects.count() == 2
    assert not Message.objects.filter(message_class="RESULT").exists()


def test_a_turn_retried_after_its_call_makes_the_call_once(
    human: Actor, fake_model: FakeModel, start_runner, settings
) -> None:
    """SPEC §7.2: the model server fails after the call was made; the retried turn is shown
    its call and the result, makes it no more, and answers: still one task."""
    settings.MOSAIC_ASSISTANT_RETRY_SECONDS = 0.05
    failing = {"left": 1}

    def script(body: dict[str, Any]) -> list[dict[str, str]]:
        if not tool_results(body):
            return [BOOK]
        if failing["left"]:
            failing["left"] -= 1
            fake_model.status = 503
        return []

    fake_model.tool_calls = script
    fake_model.content = "Booked."
    turn = send(human)
    runner = start_runner(backend=backend(fake_model))
    reply_state(turn, "retrying")
    fake_model.status = 200
    runner.wake()
    assert answered(turn).body == "Booked."
    assert Task.objects.count() == 1 and Step.objects.count() == 1
    # The retry asked with the call and its result replayed, and no call of its own.
    retried = fake_model.requests[-1]
    (told,) = tool_results(retried)
    assert told["tool_call_id"] == "call_book" and json.loads(told["content"])["outcome"] == "ok"
    assert len(fake_model.requests) == 3


def test_stop_mid_loop_keeps_the_finished_steps_and_stores_no_reply(
    human: Actor, fake_model: FakeModel, start_runner
) -> None:
    """R13, SPEC §7.2: a stop while the model is asked again ends the loop; the step made
    stays, no reply lands."""

    def script(body: dict[str, Any]) -> list[dict[str, str]]:
        if tool_results(body):
            fake_model.hold_after = 1  # the answer after the call hangs until released
            return []
        return [BOOK]

    fake_model.tool_calls = script
    turn = send(human)
    start_runner(backend=backend(fake_model))
    wait_for(lambda: len(fake_model.requests) == 2 and fake_model.holding.is_set())
    actions.stop_assistant(human)
    reply_state(turn, "stopped")
    wait_for(lambda: ThreadClaim.objects.filter(ended_at__isnull=True).count() == 0)
    fake_model.release.set()
    assert Step.objects.count() == 1 and Task.objects.count() == 1
    assert not Message.objects.filter(message_class="RESULT").exists()
