"""Tool calls as steps of a turn (SPEC §7.2): each runs through the broker's verb as the run,
is stored once per (turn, call id), and a refusal or a bad call is an outcome, not an error.

R7, R8, R11, R15 and R19 decide what a call may do, exactly as for any other caller.
"""

from __future__ import annotations

import json

import pytest

from broker import actions, refusals, selectors, steps, tools
from broker.actors import Actor
from broker.models import (
    Business,
    Decision,
    Message,
    RoleDefinition,
    Step,
    Task,
    Thread,
    ThreadClaim,
    TrailKind,
    TrailRow,
    TurnProgress,
)
from broker.policy import RoleLists
from broker.refusals import Refusal
from broker.steps import ToolCall
from broker.tools import Toolbox, offered_tools, read_toolbox
from tests.broker import factories


def working_turn(owner: Actor, run: Actor, body: str = "please book the photographer"):
    """A turn of `owner`'s new thread, claimed by `run` and being answered."""
    thread = factories.thread(owner, factories.project(owner, f"{owner.role} work"), "launch")
    turn = actions.send_to_thread(owner, thread_id=thread.pk, body=body).message
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    return thread, turn, claim


def call(name: str, arguments: object, call_id: str = "call-1") -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(call_id=call_id, round=1, name=name, arguments=text)


def everything(run: Actor) -> Toolbox:
    return read_toolbox(business_id=run.business_id, instance=run.role)


def make(run: Actor, claim: ThreadClaim, turn: Message, made: ToolCall) -> Step:
    return steps.call_tool(
        run, claim_id=claim.pk, turn_id=turn.pk, call=made, toolbox=everything(run)
    )


# --- create_task (R7, R15) -----------------------------------------------------------------


def test_create_task_in_human_turn_creates_one_task_citing_its_request(
    human: Actor, assistant_run: Actor
) -> None:
    """R7, R15: the human's turn gets one task citing its `human.input`; an `ok` step with the
    task's id; the turn counts it; the trail shows it to the human's side."""
    thread, turn, claim = working_turn(human, assistant_run)
    step = make(assistant_run, claim, turn, call("create_task", {"title": "book the photographer"}))
    task = Task.objects.get()
    assert task.request_id == turn.request_id and task.created_by_run == assistant_run.run
    assert (step.outcome, step.code, step.result) == (
        "ok",
        "",
        {"task": task.pk, "title": "book the photographer"},
    )
    assert (step.turn_id, step.thread_id, step.claim_id, step.run) == (
        turn.pk,
        thread.pk,
        claim.pk,
        assistant_run.run,
    )
    assert step.arguments == {"title": "book the photographer"}
    assert step.started_at <= step.ended_at
    assert TurnProgress.objects.get(message=turn).steps == 1
    row = TrailRow.objects.get(kind=TrailKind.STEP)
    assert row.text.startswith("assistant to human: create_task")
    assert (row.thread_id, row.message_id, row.tester_visible) == (thread.pk, turn.pk, False)


def test_same_call_again_is_not_made_twice(human: Actor, assistant_run: Actor) -> None:
    """SPEC §7.2: a call is executed at most once per (turn, call id): made again (a retried
    turn), its step is returned and nothing new is stored."""
    _, turn, claim = working_turn(human, assistant_run)
    made = call("create_task", {"title": "book the photographer"})
    first = make(assistant_run, claim, turn, made)
    again = make(assistant_run, claim, turn, made)
    begun = steps.begin_step(assistant_run, claim_id=claim.pk, turn_id=turn.pk, call=made)
    assert again.pk == first.pk and begun is not None and begun.pk == first.pk
    assert Task.objects.count() == 1 and Step.objects.count() == 1


def test_create_task_in_tester_turn_is_refused_and_stores_nothing(
    tester: Actor, assistant_run: Actor
) -> None:
    """R15, R7: a tester turn has no `human.input` to cite: the step is `refused`, in words the
    model can pass on, and no task exists; the tester's trail shows it."""
    _, turn, claim = working_turn(tester, assistant_run)
    step = make(assistant_run, claim, turn, call("create_task", {"title": "wipe everything"}))
    assert (step.outcome, step.code) == ("refused", refusals.INVALID)
    assert step.result == {"error": "invalid", "detail": actions.TESTER_TASK_REFUSED}
    assert "test conversation" in json.loads(steps.model_result(step))["detail"]
    assert not Task.objects.exists()
    row = TrailRow.objects.get(kind=TrailKind.STEP)
    assert row.text.startswith("assistant to tester: create_task") and row.tester_visible


# --- bad calls are answered ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "code"),
    [
        ("delete_everything", {}, tools.UNKNOWN_TOOL),
        ("create_task", "{not json", tools.INVALID_ARGUMENTS),
        ("create_task", "[1, 2]", tools.INVALID_ARGUMENTS),
        ("create_task", {"title": 42}, tools.INVALID_ARGUMENTS),
        ("create_task", {}, tools.INVALID_ARGUMENTS),
        ("create_task", {"title": "x", "priority": "high"}, tools.INVALID_ARGUMENTS),
        ("send_message", {"to": "nobody", "body": "hi"}, tools.INVALID_ARGUMENTS),
    ],
)
def test_bad_call_is_an_error_step_and_stores_nothing_else(
    human: Actor, assistant_run: Actor, name: str, arguments: object, code: str
) -> None:
    """SPEC §7.2: an unknown tool or arguments that are not JSON or do not fit the schema are
    answered as an `error` step the model is told about; the verb is never called."""
    _, turn, claim = working_turn(human, assistant_run)
    messages = Message.objects.count()
    step = make(assistant_run, claim, turn, call(name, arguments))
    assert (step.outcome, step.code, step.result["error"]) == ("error", code, code)
    assert step.result["detail"]
    assert not Task.objects.exists() and Message.objects.count() == messages


def test_arguments_that_are_not_an_object_are_kept_as_text(
    human: Actor, assistant_run: Actor
) -> None:
    _, turn, claim = working_turn(human, assistant_run)
    step = make(assistant_run, claim, turn, call("create_task", "{not json"))
    assert step.arguments == "{not json"


# --- send_message (R8, R9, R11) ------------------------------------------------------------


def add_reviewer(business: Business, *, receive_from: list[str]) -> None:
    role = RoleDefinition.objects.create(
        business=business, name="reviewer", receive_from=receive_from, send_to=["assistant"]
    )
    business.instances.create(name="reviewer", role=role)


def test_send_message_within_the_lists_is_stored_in_the_thread(
    business: Business, human: Actor, assistant_run: Actor
) -> None:
    """R8, R23: a message to another instance both lists allow, both ways, lands in the run's
    thread, as a turn of that instance's (a consultation)."""
    RoleDefinition.objects.filter(name="assistant").update(
        send_to=["human", "reviewer"], receive_from=["human", "reviewer"]
    )
    add_reviewer(business, receive_from=["assistant"])
    thread, turn, claim = working_turn(human, assistant_run)
    step = make(assistant_run, claim, turn, call("send_message", {"to": "reviewer", "body": "ok?"}))
    message = Message.objects.get(to_role="reviewer")
    assert step.outcome == "ok" and step.result == {"message": message.pk, "to": "reviewer"}
    assert (message.thread_id, message.from_role, message.body) == (thread.pk, "assistant", "ok?")
    assert message.message_class == "REQUEST"


def test_send_message_outside_the_lists_is_refused_with_nothing_stored(
    business: Business, human: Actor, assistant_run: Actor
) -> None:
    """R8: the reviewer does not take messages from the assistant: refused, nothing stored."""
    RoleDefinition.objects.filter(name="assistant").update(send_to=["human", "reviewer"])
    add_reviewer(business, receive_from=["human"])
    _, turn, claim = working_turn(human, assistant_run)
    messages = Message.objects.count()
    step = make(assistant_run, claim, turn, call("send_message", {"to": "reviewer", "body": "x"}))
    assert (step.outcome, step.code) == ("refused", refusals.MESSAGE_SENDER_REFUSED)
    assert Message.objects.count() == messages


def test_send_message_to_human_from_tester_thread_is_refused(
    tester: Actor, assistant_run: Actor
) -> None:
    """R11: a run of a tester's thread never reaches the human, by any tool."""
    _, turn, claim = working_turn(tester, assistant_run)
    messages = Message.objects.count()
    step = make(assistant_run, claim, turn, call("send_message", {"to": "human", "body": "hi"}))
    assert (step.outcome, step.code) == ("refused", refusals.TESTER_THREAD_HUMAN)
    assert Message.objects.count() == messages


# --- ask_human (R19, R11) ------------------------------------------------------------------


def test_ask_human_needs_cross_role_authority(human: Actor, assistant_run: Actor) -> None:
    """R19: the assistant has no cross-role authority: not offered, and refused if called."""
    assert everything(assistant_run).get("ask_human") is None
    _, turn, claim = working_turn(human, assistant_run)
    toolbox = Toolbox(tools=(tools.ask_human_tool(),))
    step = steps.call_tool(
        assistant_run,
        claim_id=claim.pk,
        turn_id=turn.pk,
        call=call("ask_human", {"question": "ship it?"}),
        toolbox=toolbox,
    )
    assert step.outcome == "refused" and not Decision.objects.exists()


def test_ask_human_with_authority_routes_a_decision_but_never_from_tester_thread(
    human: Actor, tester: Actor, assistant_run: Actor
) -> None:
    """R19: with `cross_role` the decision reaches the human's inbox; R11: not from a tester's
    thread."""
    RoleDefinition.objects.filter(name="assistant").update(cross_role=["human"])
    _, turn, claim = working_turn(human, assistant_run)
    step = make(assistant_run, claim, turn, call("ask_human", {"question": "ship it?"}))
    decision = Decision.objects.get()
    assert step.outcome == "ok" and step.result == {"decision": decision.pk}
    assert decision.body == "ship it?" and decision.route_to == "human"
    actions.end_claim(assistant_run, claim_id=claim.pk, how="done")
    _, tester_turn, tester_claim = working_turn(tester, assistant_run)
    refused = make(assistant_run, tester_claim, tester_turn, call("ask_human", {"question": "?"}))
    assert (refused.outcome, refused.code) == ("refused", refusals.TESTER_THREAD_HUMAN)
    assert Decision.objects.count() == 1


# --- what is offered -------------------------------------------------------------------------


def test_offered_tools_follow_the_role_and_the_send_to_enum_is_the_list() -> None:
    """SPEC §7.2: `send_message`'s `to` lists exactly the role's `send_to`; `ask_human` only
    with cross-role authority for the human; a reply table narrows the set."""
    lists = RoleLists.of(receive_from=["human", "planner"], send_to=["human", "reviewer"])
    box = offered_tools(lists)
    assert [tool.name for tool in box.tools] == ["create_task", "send_message"]
    send = box.get("send_message")
    assert send is not None
    assert send.parameters["properties"]["to"]["enum"] == ["human", "reviewer"]
    with_authority = RoleLists.of(receive_from=[], send_to=[], cross_role=["human"])
    assert [t.name for t in offered_tools(with_authority).tools] == ["create_task", "ask_human"]
    narrowed = offered_tools(lists, {"tools": ["send_message"], "max_steps": 3})
    assert [t.name for t in narrowed.tools] == ["send_message"] and narrowed.max_steps == 3
    assert offered_tools(lists, {"tools": []}).tools == ()
    definition = box.definitions()[0]
    assert definition["type"] == "function" and definition["function"]["name"] == "create_task"


# --- who may call, and when ------------------------------------------------------------------


def test_call_after_the_claim_ended_is_refused_claim_ended(
    human: Actor, assistant_run: Actor
) -> None:
    """SPEC §7: every write names the claim; a stopped run makes no call."""
    _, turn, claim = working_turn(human, assistant_run)
    actions.stop_assistant(human)
    with pytest.raises(Refusal) as refused:
        make(assistant_run, claim, turn, call("create_task", {"title": "late"}))
    assert refused.value.code == refusals.CLAIM_ENDED
    assert not Task.objects.exists() and not Step.objects.exists()


@pytest.mark.parametrize("caller", ["human", "tester"])
def test_steps_are_a_runs_verb_only(request, caller: str, assistant_run: Actor) -> None:
    """R22: neither the human nor the tester may make a step, whatever they pass."""
    owner: Actor = request.getfixturevalue("human")
    _, turn, claim = working_turn(owner, assistant_run)
    actor: Actor = request.getfixturevalue(caller)
    with pytest.raises(Refusal) as refused:
        steps.call_tool(
            actor,
            claim_id=claim.pk,
            turn_id=turn.pk,
            call=call("create_task", {"title": "x"}),
            toolbox=everything(assistant_run),
        )
    assert refused.value.code in (refusals.NOT_FOUND, refusals.TESTER_REFUSED)
    assert not Step.objects.exists()


# --- who sees steps (R1, R20) ----------------------------------------------------------------


def test_steps_come_with_their_turn_to_its_owner_only(
    human: Actor, tester: Actor, assistant_run: Actor
) -> None:
    """R1, R20: the messages read gives each turn its steps, to the thread's owner only."""
    thread, turn, claim = working_turn(human, assistant_run)
    step = make(assistant_run, claim, turn, call("create_task", {"title": "book"}))
    read = {m.pk: m for m in selectors.thread_messages(human, thread_id=thread.pk)}
    assert [s.pk for s in read[turn.pk].loaded_steps] == [step.pk]
    with pytest.raises(Refusal) as refused:
        selectors.thread_messages(tester, thread_id=thread.pk)
    assert refused.value.code == refusals.THREAD_NOT_OWNED
    tester_rows = selectors.read_trail(tester)
    assert all(row.kind != TrailKind.STEP for row in tester_rows)
    assert any(row.kind == TrailKind.STEP for row in selectors.read_trail(human))


def test_begin_step_marks_the_running_call_and_the_step_clears_it(
    human: Actor, assistant_run: Actor
) -> None:
    _, turn, claim = working_turn(human, assistant_run)
    made = call("create_task", {"title": "book"})
    assert steps.begin_step(assistant_run, claim_id=claim.pk, turn_id=turn.pk, call=made) is None
    calling = TurnProgress.objects.get(message=turn).calling
    assert calling is not None
    assert (calling["call_id"], calling["tool"]) == ("call-1", "create_task")
    assert calling["arguments"] == {"title": "book"}
    make(assistant_run, claim, turn, made)
    assert TurnProgress.objects.get(message=turn).calling is None


def test_step_table_is_append_only(human: Actor, assistant_run: Actor) -> None:
    """SPEC §3: steps are records; the database refuses to rewrite them."""
    from django.db import DatabaseError, transaction

    _, turn, claim = working_turn(human, assistant_run)
    make(assistant_run, claim, turn, call("create_task", {"title": "book"}))
    with pytest.raises(DatabaseError), transaction.atomic():
        Step.objects.update(outcome="refused")
    with pytest.raises(DatabaseError), transaction.atomic():
        Step.objects.all().delete()
    assert Thread.objects.count() == 1


def test_tester_purge_deletes_the_steps_of_old_tester_threads(
    human: Actor, tester: Actor, assistant_run: Actor
) -> None:
    """The tester-data purge takes a tester thread's steps with it; the human's stay."""
    from django.utils import timezone

    from broker.actions import tester_purge

    _, turn, claim = working_turn(tester, assistant_run)
    make(assistant_run, claim, turn, call("create_task", {"title": "x"}))
    actions.end_claim(assistant_run, claim_id=claim.pk, how="done")
    _, human_turn, human_claim = working_turn(human, assistant_run)
    kept = make(assistant_run, human_claim, human_turn, call("create_task", {"title": "y"}))
    actions.end_claim(assistant_run, claim_id=human_claim.pk, how="done")
    counts = tester_purge.purge_tester_data(cut=timezone.now())["demo"]
    assert counts.steps == 1
    assert list(Step.objects.values_list("pk", flat=True)) == [kept.pk]
