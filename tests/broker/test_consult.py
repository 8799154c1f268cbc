"""Roles consulting roles (R23): a run's `send_message` to another instance of the business is a
turn of that instance's in the same thread, answered by its own run under its own claim; the
answer is the calling tool's result.

R8 and R9 decide who may consult whom, both ways; a consultation may not consult again; one
stop ends the whole chain; the run that asked gives up after its own timeout.
"""

from __future__ import annotations

import json

import pytest

from broker import actions, refusals, selectors, steps
from broker.actors import Actor
from broker.models import (
    Business,
    ClaimEnd,
    Instance,
    Message,
    MessageClass,
    ReplyState,
    RoleDefinition,
    Step,
    ThreadClaim,
    TrailRow,
)
from broker.refusals import Refusal
from broker.steps import ToolCall
from broker.tools import read_toolbox
from runner.pending import pending_messages, pending_threads
from runner.turns import calls_made, read_turn
from tests.broker import factories


def add_reviewer(
    business: Business,
    *,
    receive_from: tuple[str, ...] = ("assistant",),
    send_to: tuple[str, ...] = ("assistant",),
    assistant_sends_to: tuple[str, ...] = ("human", "reviewer"),
) -> None:
    """A `reviewer` instance the assistant may consult, with the lists given."""
    role = RoleDefinition.objects.create(
        business=business,
        name="reviewer",
        receive_from=list(receive_from),
        send_to=list(send_to),
        cross_role=[],
    )
    Instance.objects.create(business=business, name="reviewer", role=role)
    RoleDefinition.objects.filter(business=business, name="assistant").update(
        send_to=list(assistant_sends_to), receive_from=["human", "reviewer"]
    )


@pytest.fixture
def reviewer_run(business: Business) -> Actor:
    add_reviewer(business)
    return Actor.assistant_run(business_id=business.pk, instance="reviewer", run="run-r")


def working_turn(owner: Actor, run: Actor, body: str = "is this plan sound?"):
    thread = factories.thread(owner, factories.project(owner, f"{owner.role} work"), "plan")
    turn = actions.send_to_thread(owner, thread_id=thread.pk, body=body).message
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    return thread, turn, claim


def ask(
    run: Actor,
    claim: ThreadClaim,
    turn: Message,
    to: str = "reviewer",
    *,
    call_id: str = "ask-1",
    body: str = "check the budget line",
) -> Step:
    """The model's `send_message` to `to`, made as a step of `turn`."""
    made = ToolCall(
        call_id=call_id,
        round=1,
        name="send_message",
        arguments=json.dumps({"to": to, "body": body}),
    )
    toolbox = read_toolbox(business_id=run.business_id, instance=run.role)
    return steps.call_tool(run, claim_id=claim.pk, turn_id=turn.pk, call=made, toolbox=toolbox)


def reply(run: Actor, claim: ThreadClaim, turn: Message, body: str) -> Message:
    """The run's RESULT to `turn` under `claim` (R12)."""
    return actions.send_message(
        run,
        to=turn.from_role,
        message_class=MessageClass.RESULT,
        in_reply_to=turn.pk,
        claim_id=claim.pk,
        body=body,
    )


def taken_up(run: Actor, question: Message) -> ThreadClaim:
    """The consulted instance's run claims the thread, under its own claim, and starts."""
    claim = factories.claim(run, question.thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=question.pk)
    return claim


def answer(run: Actor, question: Message, body: str = "the budget is short by 10%") -> Message:
    """The consulted instance's run takes the thread up and answers."""
    return reply(run, taken_up(run, question), question, body)


def test_consultation_is_a_turn_of_the_consulted_instance_answered_under_its_own_claim(
    human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R23: the question is a REQUEST to `reviewer` in the same thread, owed by it alone; its
    run claims the thread beside the assistant's open claim; its answer is the step's result
    as the model is told it."""
    thread, turn, claim = working_turn(human, assistant_run)
    step = ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    assert (step.outcome, step.result) == ("ok", {"message": question.pk, "to": "reviewer"})
    assert (question.thread_id, question.from_role, question.message_class) == (
        thread.pk,
        "assistant",
        MessageClass.REQUEST,
    )
    assert steps.consulted_turn(step) == question.pk
    assert steps.consultation(question.pk).waiting
    assert list(pending_messages(thread_id=thread.pk, instance="reviewer")) == [question]
    assert [(p.thread_id, p.instance) for p in pending_threads(limit=5)] == [
        (thread.pk, "reviewer")
    ]

    answer(reviewer_run, question)
    assert ThreadClaim.objects.filter(thread=thread, ended_at__isnull=True).count() == 2
    found = steps.consultation(question.pk)
    assert (found.state, found.answer) == (ReplyState.ANSWERED, "the budget is short by 10%")
    told = json.loads(steps.model_result(step, found))
    assert told["answer"] == "the budget is short by 10%" and told["to"] == "reviewer"


def test_each_instance_is_shown_only_its_own_part_of_the_thread(
    human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R23: the consulted instance's prompt holds the consultation alone, from a colleague; the
    asking instance's holds its conversation with the owner, told the consultation as its
    tool call instead."""
    thread, turn, claim = working_turn(human, assistant_run)
    ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    answer(reviewer_run, question)
    reply(assistant_run, claim, turn, "it needs 10% more")
    later = actions.send_to_thread(human, thread_id=thread.pk, body="and the timeline?").message
    assistant_view = read_turn(Message.objects.select_related("thread").get(pk=later.pk))
    assert [entry.body for entry in assistant_view.history] == [
        "is this plan sound?",
        "it needs 10% more",
    ]
    assert assistant_view.number == 2 and not assistant_view.is_consultation
    reviewer_view = read_turn(Message.objects.select_related("thread").get(pk=question.pk))
    assert reviewer_view.history == () and reviewer_view.number == 1
    assert reviewer_view.is_consultation and reviewer_view.body == "check the budget line"


def test_a_turn_shown_again_reads_all_its_consultations_in_one_query(
    human: Actor, assistant_run: Actor, reviewer_run: Actor, django_assert_num_queries
) -> None:
    """The steps a retried turn is shown again (`calls_made`): each consultation's answer, or
    that it still waits, from two queries however many the turn made."""
    _, turn, claim = working_turn(human, assistant_run)
    ask(assistant_run, claim, turn, call_id="ask-1", body="check the budget line")
    ask(assistant_run, claim, turn, call_id="ask-2", body="check the dates")
    first, second = Message.objects.filter(to_role="reviewer").order_by("pk")
    answer(reviewer_run, first, "the budget is short by 10%")
    with django_assert_num_queries(2):
        shown = calls_made(turn.pk)
    assert [json.loads(done.result).get("answer") for done in shown] == [
        "the budget is short by 10%",
        None,
    ]
    assert [done.consulting for done in shown] == [None, second.pk]


@pytest.mark.parametrize(
    ("lists", "code"),
    [
        ({"assistant_sends_to": ("human",)}, refusals.MESSAGE_RECIPIENT_REFUSED),
        ({"receive_from": ("human",)}, refusals.MESSAGE_SENDER_REFUSED),
        ({"send_to": ("human",)}, refusals.MESSAGE_RECIPIENT_REFUSED),
    ],
    ids=["not-on-send-to", "not-on-receive-from", "answer-could-not-come-back"],
)
def test_lists_decide_who_may_consult_whom_both_ways(
    business: Business, human: Actor, assistant_run: Actor, lists: dict, code: str
) -> None:
    """R8, R23: a consultation the lists refuse either way — the question to `reviewer`, or
    its answer back — is refused, and nothing is asked."""
    add_reviewer(business, **lists)
    _, turn, claim = working_turn(human, assistant_run)
    with pytest.raises(Refusal) as refused:
        actions.consult(
            assistant_run, claim_id=claim.pk, turn_id=turn.pk, to="reviewer", body="check this"
        )
    assert refused.value.code == code
    assert not Message.objects.filter(to_role="reviewer").exists()


def test_a_consultation_may_not_consult_again(
    human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R23: depth at most 2. The reviewer's run answering a consultation is not offered a
    colleague to ask, and a call to one is refused `consult-too-deep`, nothing stored."""
    _, turn, claim = working_turn(human, assistant_run)
    ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    RoleDefinition.objects.filter(name="reviewer").update(send_to=["assistant", "human"])
    review = taken_up(reviewer_run, question)
    toolbox = read_toolbox(business_id=reviewer_run.business_id, instance="reviewer")
    narrowed = toolbox.answering(question.from_role)
    (message_tool,) = [tool for tool in narrowed.tools if tool.name == "send_message"]
    assert message_tool.parameters["properties"]["to"]["enum"] == ["human"]
    assert toolbox.answering("human") is toolbox
    with pytest.raises(Refusal) as refused:
        actions.consult(
            reviewer_run, claim_id=review.pk, turn_id=question.pk, to="assistant", body="and you?"
        )
    assert refused.value.code == refusals.CONSULT_TOO_DEEP
    assert Message.objects.filter(message_class=MessageClass.REQUEST).count() == 2


def test_an_instance_does_not_consult_itself_or_the_owner(
    human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R23: only another instance is consulted; `human` is messaged, never consulted."""
    _, turn, claim = working_turn(human, assistant_run)
    for to in ("assistant", "human", "tester"):
        with pytest.raises(Refusal) as refused:
            actions.consult(assistant_run, claim_id=claim.pk, turn_id=turn.pk, to=to, body="?")
        assert refused.value.code == refusals.MESSAGE_RECIPIENT_REFUSED
    assert Message.objects.filter(message_class=MessageClass.REQUEST).count() == 1


@pytest.mark.parametrize("narrowed", ["instance", "thread", "all"])
def test_one_stop_stops_the_whole_chain(
    human: Actor, assistant_run: Actor, reviewer_run: Actor, narrowed: str
) -> None:
    """R13, R23: the human's stop — of the assistant, of the thread, or of everything — ends
    the asking run and the consulted one, and stops both turns; the late answer is refused."""
    thread, turn, claim = working_turn(human, assistant_run)
    ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    review = taken_up(reviewer_run, question)
    options = {"instance": {"instance": "assistant"}, "thread": {"thread_id": thread.pk}}
    stop = actions.stop_assistant(human, **options.get(narrowed, {}))
    assert {c.pk for c in stop.claims} == {claim.pk, review.pk}
    assert {state for state in ThreadClaim.objects.values_list("ended_how", flat=True)} == {
        ClaimEnd.STOPPED
    }
    assert {str(m.reply_state) for m in Message.objects.filter(pk__in=[turn.pk, question.pk])} == {
        ReplyState.STOPPED
    }
    with pytest.raises(Refusal) as refused:
        reply(reviewer_run, review, question, "too late")
    assert refused.value.code == refusals.CLAIM_ENDED


def test_stopping_the_consulted_instance_leaves_the_asking_run_to_carry_on(
    human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R13, R23: a stop narrowed to `reviewer` ends its run and its turn only; the assistant's
    run is told the consultation was stopped and may still answer."""
    _, turn, claim = working_turn(human, assistant_run)
    step = ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    stop = actions.stop_assistant(human, instance="reviewer")
    assert stop.claims == [] and [pk for pk, _ in stop.turns] == [question.pk]
    told = json.loads(steps.model_result(step, steps.consultation(question.pk)))
    assert told["answer_state"] == "stopped" and "answer" not in told
    assert ThreadClaim.objects.get(pk=claim.pk).ended_at is None


def test_the_asking_run_gives_up_after_its_timeout_and_a_late_answer_never_lands(
    human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R23: `message.consult_expire` fails the consultation with the asking run's sentence and
    ends the consulted run's claim, so its answer is refused; once ended it changes nothing."""
    _, turn, claim = working_turn(human, assistant_run)
    step = ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    review = taken_up(reviewer_run, question)
    failure = "No answer came within 120 seconds."
    assert actions.expire_consultation(
        assistant_run, claim_id=claim.pk, consult_id=question.pk, failure=failure
    )
    ended = ThreadClaim.objects.get(pk=review.pk)
    assert (ended.ended_how, ended.end_reason, ended.ended_by) == (
        ClaimEnd.FAILED,
        failure,
        assistant_run.run,
    )
    found = steps.consultation(question.pk)
    assert (found.state, found.failure) == (ReplyState.FAILED, failure)
    assert json.loads(steps.model_result(step, found))["failure"] == failure
    assert not actions.expire_consultation(
        assistant_run, claim_id=claim.pk, consult_id=question.pk, failure="again"
    )
    with pytest.raises(Refusal):
        reply(reviewer_run, review, question, "too late")
    assert not Message.objects.filter(message_class=MessageClass.RESULT).exists()


def test_only_the_asking_instance_gives_up_on_its_consultation(
    human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R23: the consulted instance's run cannot expire the question it was asked."""
    thread, turn, claim = working_turn(human, assistant_run)
    ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    review = factories.claim(reviewer_run, thread)
    assert not actions.expire_consultation(
        reviewer_run, claim_id=review.pk, consult_id=question.pk, failure="no"
    )
    assert steps.consultation(question.pk).waiting


def test_a_tester_thread_consults_in_the_testers_sight_only(
    tester: Actor, human: Actor, assistant_run: Actor, reviewer_run: Actor
) -> None:
    """R1, R20, R23: in the tester's thread the consultation is the tester's to read, its trail
    rows tester-labelled; the human cannot read the thread's messages."""
    thread, turn, claim = working_turn(tester, assistant_run)
    ask(assistant_run, claim, turn)
    question = Message.objects.get(to_role="reviewer")
    answer(reviewer_run, question)
    shown = selectors.thread_messages(tester, thread_id=thread.pk)
    assert [(m.from_role, m.to_role) for m in shown] == [
        ("tester", "assistant"),
        ("assistant", "reviewer"),
        ("reviewer", "assistant"),
    ]
    rows = TrailRow.objects.filter(thread=thread)
    assert [row.text.split(":")[0] for row in rows] == [
        "tester to assistant",
        "assistant to reviewer",
        "assistant to tester",  # the step
        "reviewer to assistant",
    ]
    assert all(row.tester_visible for row in rows)
    with pytest.raises(Refusal) as refused:
        selectors.thread_messages(human, thread_id=thread.pk)
    assert refused.value.code in (refusals.NOT_FOUND, refusals.THREAD_NOT_OWNED)
