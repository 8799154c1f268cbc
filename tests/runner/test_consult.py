"""Roles consulting roles through the real runner (R23): a model's `send_message` to another
instance is answered by that instance's own run — its own claim, turn and backend — and the
answer is what the asking model is told; the consulted turn has its own timeout, and one stop
ends the chain. These use the real runner, so transactional databases; they run on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from broker import actions
from broker.actors import Actor
from broker.models import Business, ClaimEnd, Message, ReplyState, Step, ThreadClaim
from runner.backends.chat_completions import ChatCompletionsBackend
from tests.broker import factories
from tests.broker.test_consult import add_reviewer
from tests.support.model_servers import FakeModel
from tests.support.runners import GatedBackend
from tests.support.waits import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ASK = {
    "id": "call_ask",
    "name": "send_message",
    "arguments": json.dumps({"to": "reviewer", "body": "Is 40 guests within the budget?"}),
}


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in body["messages"] if message["role"] == "tool"]


def is_reviewer(body: dict[str, Any]) -> bool:
    return body["messages"][0]["content"].startswith("You are reviewer")


def backend(fake_model: FakeModel) -> ChatCompletionsBackend:
    fake_model.models = ["m"]
    return ChatCompletionsBackend(base_url=fake_model.url, model="m", idle_timeout=5)


def consults_reviewer(fake_model: FakeModel) -> None:
    """The assistant asks the reviewer once, then answers with what it was told; the reviewer
    answers in words."""

    def calls(body: dict[str, Any]) -> list[dict[str, str]]:
        return [] if is_reviewer(body) or tool_results(body) else [ASK]

    def text(body: dict[str, Any]) -> str:
        if is_reviewer(body):
            return "No: 40 guests is 10% over."
        (told,) = tool_results(body)
        return f"My colleague says: {json.loads(told['content']).get('answer', 'nothing')}"

    fake_model.tool_calls = calls
    fake_model.script = text


def send(actor: Actor, body: str = "plan a dinner for 40") -> Message:
    thread = factories.thread(actor, factories.project(actor, f"{actor.role} work"), "dinner")
    return actions.send_to_thread(actor, thread_id=thread.pk, body=body).message


def result_of(turn: Message) -> Message:
    return wait_for(
        lambda: Message.objects.filter(in_reply_to=turn, message_class="RESULT").first()
    )


@pytest.fixture
def with_reviewer(business: Business, short_lease: float, settings) -> Business:
    """The business with a `reviewer` the assistant may consult; leases long enough that a
    busy machine never lets one run out while a run waits for the other (a stop or a run's
    end is seen at once whatever the lease)."""
    add_reviewer(business)
    settings.MOSAIC_CLAIM_LEASE_SECONDS = 30
    return business


@pytest.mark.parametrize("owner", ["human", "tester"])
def test_the_consulted_instance_answers_under_its_own_claim_and_the_model_is_told(
    with_reviewer: Business,
    human: Actor,
    tester: Actor,
    fake_model: FakeModel,
    start_runner,
    owner: str,
) -> None:
    """R23: one runner answers both: the reviewer's turn under a claim of the reviewer's,
    opened while the assistant's was open; the reviewer's answer is the assistant's tool
    result, and the assistant's reply is built on it. One RESULT for each turn."""
    consults_reviewer(fake_model)
    turn = send(human if owner == "human" else tester)
    start_runner(backend=backend(fake_model))
    reply = result_of(turn)
    assert reply.body == "My colleague says: No: 40 guests is 10% over."
    question = Message.objects.get(to_role="reviewer", message_class="REQUEST")
    assert question.from_role == "assistant" and question.thread_id == turn.thread_id
    answer = Message.objects.get(in_reply_to=question)
    assert (answer.from_role, answer.to_role, answer.body) == (
        "reviewer",
        "assistant",
        "No: 40 guests is 10% over.",
    )
    wait_for(lambda: not ThreadClaim.objects.filter(ended_at__isnull=True).exists())
    claims = {c.instance.name: c for c in ThreadClaim.objects.select_related("instance")}
    assert set(claims) == {"assistant", "reviewer"}
    asking, consulted = claims["assistant"], claims["reviewer"]
    assert asking.claimed_at < consulted.claimed_at < consulted.ended_at < reply.created_at
    assert {asking.ended_how, consulted.ended_how} == {ClaimEnd.DONE}
    assert answer.claim_id == claims["reviewer"].pk and reply.claim_id == claims["assistant"].pk
    step = Step.objects.get()
    assert (step.turn_id, step.outcome, step.result) == (
        turn.pk,
        "ok",
        {"message": question.pk, "to": "reviewer"},
    )
    reviewer_request = next(body for body in fake_model.requests if is_reviewer(body))
    assert "colleague consulting you" in reviewer_request["messages"][0]["content"]
    assert [m["content"] for m in reviewer_request["messages"][1:]] == [question.body]
    offered = [tool["function"]["name"] for tool in reviewer_request.get("tools", [])]
    assert "send_message" not in offered  # a consultation consults no further
    assert Message.objects.filter(message_class="RESULT").count() == 2


def test_a_consultation_nobody_answers_ends_at_its_own_timeout(
    with_reviewer: Business, human: Actor, fake_model: FakeModel, start_runner, settings
) -> None:
    """R23: with no run for the reviewer at all, the assistant's run gives up after
    MOSAIC_CONSULT_TIMEOUT: the consultation fails with a sentence, the model is told, and the
    human's turn is answered."""
    settings.MOSAIC_CONSULT_TIMEOUT = 0.5
    consults_reviewer(fake_model)
    turn = send(human)
    start_runner(backend=backend(fake_model), instance="assistant")
    reply = result_of(turn)
    assert reply.body == "My colleague says: nothing"
    question = Message.objects.select_related("progress").get(to_role="reviewer")
    assert question.progress.state == ReplyState.FAILED
    assert question.progress.failure == "No answer came within 0.5 seconds."
    (told,) = tool_results(fake_model.requests[-1])
    assert json.loads(told["content"])["answer_state"] == "failed"
    assert not ThreadClaim.objects.filter(instance__name="reviewer").exists()


def test_stop_while_the_consulted_instance_works_ends_the_whole_chain(
    with_reviewer: Business,
    human: Actor,
    fake_model: FakeModel,
    gated: GatedBackend,
    start_runner,
) -> None:
    """R13, R23: the human stops the assistant while the reviewer (a slow model, on a runner
    of its own) is answering: both runs end, both turns are stopped, and no reply lands."""
    consults_reviewer(fake_model)
    turn = send(human)
    start_runner(backend=backend(fake_model), instance="assistant")
    start_runner(backend=gated, instance="reviewer")
    question = wait_for(lambda: Message.objects.filter(to_role="reviewer").first())
    wait_for(lambda: gated.started == [question.pk])
    actions.stop_assistant(human, instance="assistant")
    wait_for(lambda: gated.cancelled == [question.pk])
    wait_for(lambda: not ThreadClaim.objects.filter(ended_at__isnull=True).exists())
    assert set(ThreadClaim.objects.values_list("ended_how", flat=True)) == {ClaimEnd.STOPPED}
    states = Message.objects.filter(pk__in=[turn.pk, question.pk]).values_list(
        "progress__state", flat=True
    )
    assert set(states) == {ReplyState.STOPPED}
    gated.release.set()
    assert not Message.objects.filter(message_class="RESULT").exists()
