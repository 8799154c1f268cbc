"""Permission matrices: actor × verb × thread owner, asserting every refusal code (R1, R22)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from broker import actions, policy, refusals, selectors, steps
from broker.access import COUNTS_AS, VERBS
from broker.actions import suite_comparisons, suite_runs
from broker.actors import Actor, ActorKind
from broker.models import Business, Message, Thread, ThreadOpen, TrailRow, Via
from broker.refusals import Refusal
from broker.steps import ToolCall
from broker.tools import Toolbox
from tests.broker import factories

OK = None

THREAD_VERBS: dict[str, Callable[[Actor, int], Any]] = {
    "thread.open": lambda actor, thread_id: actions.open_thread(actor, thread_id=thread_id),
    "thread.send": lambda actor, thread_id: actions.send_to_thread(
        actor, thread_id=thread_id, body="hello"
    ),
    "thread.messages": lambda actor, thread_id: selectors.thread_messages(
        actor, thread_id=thread_id
    ),
    "thread.rename": lambda actor, thread_id: actions.rename_thread(
        actor, thread_id=thread_id, name="renamed"
    ),
    "thread.archive": lambda actor, thread_id: actions.archive_thread(
        actor, thread_id=thread_id, archived=True
    ),
    "thread.pin": lambda actor, thread_id: actions.pin_thread(
        actor, thread_id=thread_id, pinned=True
    ),
    # R24: the first turn is not the latest, so each of these makes a branch.
    "thread.edit": lambda actor, thread_id: actions.edit_turn(
        actor, thread_id=thread_id, message_id=first_message(thread_id), body="again"
    ),
    "thread.regenerate": lambda actor, thread_id: actions.regenerate_turn(
        actor, thread_id=thread_id, message_id=first_message(thread_id)
    ),
    "thread.branch": lambda actor, thread_id: actions.branch_thread(
        actor, thread_id=thread_id, message_id=first_message(thread_id)
    ),
    # Declared under their own names, decided as the verbs they count as.
    "thread.replies": lambda actor, thread_id: selectors.thread_replies(actor, thread_id=thread_id),
    "thread.read": lambda actor, thread_id: selectors.read_thread(actor, thread_id=thread_id),
    "thread.carried": lambda actor, thread_id: selectors.carried_messages(
        actor, thread_id=thread_id
    ),
    "thread.mark_read": lambda actor, thread_id: actions.mark_read(
        actor, thread_id=thread_id, up_to=newest_message(thread_id)
    ),
}


def first_message(thread_id: int) -> int:
    """The oldest message of a thread, 0 for none."""
    return _messages(thread_id).first() or 0


def newest_message(thread_id: int) -> int:
    """The newest message of a thread, 0 for none."""
    return _messages(thread_id).last() or 0


def _messages(thread_id: int) -> Any:
    return Message.objects.filter(thread_id=thread_id).order_by("pk").values_list("pk", flat=True)


# (actor, owner of the thread) -> expected code, the same for every thread verb.
THREAD_MATRIX = {
    ("human", "human"): OK,
    ("human", "tester"): refusals.THREAD_NOT_OWNED,
    ("tester", "human"): refusals.THREAD_NOT_OWNED,
    ("tester", "tester"): OK,
    ("other_human", "human"): refusals.NOT_FOUND,
    ("other_human", "tester"): refusals.NOT_FOUND,
    ("assistant_run", "human"): refusals.NOT_FOUND,
    ("assistant_run", "tester"): refusals.NOT_FOUND,
    ("staff", "human"): refusals.NOT_FOUND,
    ("staff", "tester"): refusals.NOT_FOUND,
}


@pytest.fixture
def staff(business: Business) -> Actor:
    return Actor.staff(business_id=business.pk, username="root")


@pytest.fixture
def threads(human: Actor, tester: Actor) -> dict[str, int]:
    project = factories.project(human)
    ids = {
        "human": factories.thread(human, project, "human's").pk,
        "tester": factories.thread(tester, project, "tester's").pk,
    }
    # Two turns in each, for a read mark and a version (R24) to name.
    for body in ("first", "second"):
        actions.send_to_thread(human, thread_id=ids["human"], body=body)
        actions.send_to_thread(tester, thread_id=ids["tester"], body=body)
    return ids


@pytest.mark.parametrize("verb", sorted(THREAD_VERBS))
@pytest.mark.parametrize(("actor_name", "owner"), sorted(THREAD_MATRIX))
def test_thread_verb_matrix_refuses_with_code(
    request: pytest.FixtureRequest,
    threads: dict[str, int],
    verb: str,
    actor_name: str,
    owner: str,
) -> None:
    """R1, R22: each actor reaches only its own threads; each refusal writes nothing."""
    actor: Actor = request.getfixturevalue(actor_name)
    expected = THREAD_MATRIX[(actor_name, owner)]
    before = stored()
    if expected is OK:
        THREAD_VERBS[verb](actor, threads[owner])
        return
    with pytest.raises(Refusal) as refusal:
        THREAD_VERBS[verb](actor, threads[owner])
    assert refusal.value.code == expected
    assert stored() == before


def stored() -> tuple[object, ...]:
    """What a thread verb could write: messages, opens, trail rows, and the threads' names,
    archive and pin times and last activity."""
    return (
        Message.objects.count(),
        ThreadOpen.objects.count(),
        TrailRow.objects.count(),
        sorted(Thread.objects.values_list("pk", "name", "archived_at", "pinned_at", "active_at")),
    )


TOOL_CALL = ToolCall(call_id="c1", round=1, name="create_task", arguments='{"title": "t"}')

# Arguments good enough to get past argument checks for every verb the tester may not call.
NON_TESTER_CALLS: dict[str, Callable[[Actor], Any]] = {
    "inbox.read": lambda actor: selectors.read_inbox(actor),
    "task.create": lambda actor: actions.create_task(actor, claim_id=1, request_id=1, title="t"),
    "decision.create": lambda actor: actions.create_decision(actor, claim_id=1, body="d"),
    "claim.open": lambda actor: actions.open_claim(actor, thread_id=1),
    "claim.renew": lambda actor: actions.renew_claim(actor, claim_id=1),
    "claim.end": lambda actor: actions.end_claim(actor, claim_id=1),
    "instance.end": lambda actor: actions.end_instance(actor, instance="assistant"),
    "notice.post": lambda actor: actions.post_notice(actor, body="n"),
    "claim.reap": lambda actor: actions.reap_claims(actor),
    "turn.start": lambda actor: actions.start_turn(actor, claim_id=1, turn_id=1),
    "turn.draft": lambda actor: actions.draft_turn(actor, claim_id=1, turn_id=1, text="d"),
    "turn.fail": lambda actor: actions.fail_turn(
        actor, claim_id=1, turn_id=1, failure="f", transient=False
    ),
    "step.begin": lambda actor: steps.begin_step(actor, claim_id=1, turn_id=1, call=TOOL_CALL),
    "message.consult": lambda actor: actions.consult(
        actor, claim_id=1, turn_id=1, to="reviewer", body="b"
    ),
    "message.consult_expire": lambda actor: actions.expire_consultation(
        actor, claim_id=1, consult_id=1, failure="f"
    ),
    "step.call": lambda actor: steps.call_tool(
        actor, claim_id=1, turn_id=1, call=TOOL_CALL, toolbox=Toolbox()
    ),
}


def test_tester_verbs_list_names_only_declared_verbs() -> None:
    """R22: the explicit list names real verbs, and every other verb is in the table below."""
    assert set(VERBS) >= policy.TESTER_VERBS
    assert set(VERBS) - policy.TESTER_VERBS - set(COUNTS_AS) == set(NON_TESTER_CALLS)


# The verbs declared under their own names that R22 decides as another verb.
COUNTED_CALLS: dict[str, Callable[[Actor], Any]] = {
    "thread.replies": lambda actor: selectors.thread_replies(actor, thread_id=1),
    "thread.read": lambda actor: selectors.read_thread(actor, thread_id=1),
    "thread.mark_read": lambda actor: actions.mark_read(actor, thread_id=1, up_to=1),
    "thread.carried": lambda actor: selectors.carried_messages(actor, thread_id=1),
    "suite_run.compare": lambda actor: suite_comparisons.compare_suite_runs(
        actor, run_id=1, other_id=2
    ),
    "suite_run.compare_case": lambda actor: suite_comparisons.compare_suite_case(
        actor, run_id=1, other_id=2, case_id=1
    ),
}


def test_each_verb_counted_as_another_counts_as_a_tester_verb() -> None:
    """R22 knows no verb by the name it is declared under when it counts as another: each
    counts as a verb of the tester's list, declared with the same kinds."""
    assert COUNTS_AS == {
        "thread.replies": "thread.messages",
        "thread.read": "thread.messages",
        "thread.mark_read": "thread.open",
        "thread.carried": "thread.messages",
        "suite_run.compare": "suite_run.read",
        "suite_run.compare_case": "suite_run.read",
    }
    assert set(COUNTED_CALLS) == set(COUNTS_AS)
    for name, counted_as in COUNTS_AS.items():
        assert counted_as in policy.TESTER_VERBS
        assert VERBS[name] == VERBS[counted_as]


@pytest.mark.parametrize("verb", sorted(COUNTED_CALLS))
def test_counted_verb_is_refused_as_the_verb_it_counts_as(
    monkeypatch: pytest.MonkeyPatch, business: Business, tester: Actor, verb: str
) -> None:
    """Off the tester's list the verb it counts as takes it with it (`tester-refused`); while
    the tester is off it is refused `tester-off`, as that verb is."""
    monkeypatch.setattr(policy, "TESTER_VERBS", policy.TESTER_VERBS - {COUNTS_AS[verb]})
    with pytest.raises(Refusal) as refusal:
        COUNTED_CALLS[verb](tester)
    assert refusal.value.code == refusals.TESTER_REFUSED
    monkeypatch.undo()
    business.tester_enabled = False
    business.save()
    with pytest.raises(Refusal) as refusal:
        COUNTED_CALLS[verb](tester)
    assert refusal.value.code == refusals.TESTER_OFF


@pytest.mark.parametrize("verb", sorted(NON_TESTER_CALLS))
def test_non_tester_verb_called_by_tester_refuses_tester_refused(tester: Actor, verb: str) -> None:
    """R22: any verb outside the tester's list refuses `tester-refused`, before anything else."""
    with pytest.raises(Refusal) as refusal:
        NON_TESTER_CALLS[verb](tester)
    assert refusal.value.code == refusals.TESTER_REFUSED


@pytest.mark.parametrize("verb", sorted(policy.TESTER_VERBS))
def test_tester_verb_while_tester_off_refuses_tester_off(
    business: Business, tester: Actor, verb: str
) -> None:
    """The tester switch holds in the broker itself, whatever the transport."""
    business.tester_enabled = False
    business.save()
    calls: dict[str, Callable[[], Any]] = {
        "project.create": lambda: actions.create_project(tester, name="p"),
        "project.list": lambda: selectors.list_projects(tester),
        "instance.list": lambda: selectors.list_instances(tester),
        "thread.create": lambda: actions.create_thread(tester, project_id=1, name="t"),
        "thread.open": lambda: actions.open_thread(tester, thread_id=1),
        "thread.send": lambda: actions.send_to_thread(tester, thread_id=1, body="b"),
        "thread.messages": lambda: selectors.thread_messages(tester, thread_id=1),
        "thread.list": lambda: selectors.list_threads(tester),
        "thread.rename": lambda: actions.rename_thread(tester, thread_id=1, name="n"),
        "thread.archive": lambda: actions.archive_thread(tester, thread_id=1, archived=True),
        "thread.pin": lambda: actions.pin_thread(tester, thread_id=1, pinned=True),
        "thread.edit": lambda: actions.edit_turn(tester, thread_id=1, message_id=1, body="b"),
        "thread.regenerate": lambda: actions.regenerate_turn(tester, thread_id=1, message_id=1),
        "thread.branch": lambda: actions.branch_thread(tester, thread_id=1, message_id=1),
        "message.send": lambda: actions.send_message(tester, to="assistant", body="b"),
        "message.receive": lambda: selectors.receive_messages(tester),
        "messages.view": lambda: selectors.messages_view(tester),
        "messages.search": lambda: selectors.search(tester, query="q"),
        "trail.read": lambda: selectors.read_trail(tester),
        "assistant.stop": lambda: actions.stop_assistant(tester),
        "conversation.start": lambda: actions.start_conversation(
            tester, project="p", instance="assistant", name="t", body="b", via=Via.API
        ),
        "conversation.continue": lambda: actions.continue_conversation(
            tester, instance="assistant", history=[("user", "a")], body="b", via=Via.API
        ),
        "suite_run.start": lambda: suite_runs.start_suite_run(tester, suites=["smoke"]),
        "suite_run.record": lambda: suite_runs.record_suite_case(
            tester,
            run_id=1,
            suite="smoke",
            case="greets",
            instance="assistant",
            verdict="pass",
            passed_runs=1,
            runs=1,
        ),
        "suite_run.end": lambda: suite_runs.end_suite_run(tester, run_id=1),
        "suite_run.list": lambda: suite_runs.list_suite_runs(tester),
        "suite_run.read": lambda: suite_runs.read_suite_run(tester, run_id=1),
    }
    assert set(calls) == policy.TESTER_VERBS
    with pytest.raises(Refusal) as refusal:
        calls[verb]()
    assert refusal.value.code == refusals.TESTER_OFF


@pytest.mark.parametrize(
    ("verb", "kinds"),
    sorted((name, kinds) for name, kinds in VERBS.items()),
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_verb_declares_who_it_serves(verb: str, kinds: frozenset[ActorKind]) -> None:
    """Runs never call human verbs and the human never run verbs: each verb names its callers."""
    verb = COUNTS_AS.get(verb, verb)
    human_verbs = {
        "project.create",
        "project.list",
        "instance.list",
        "thread.create",
        "thread.open",
        "thread.send",
        "thread.messages",
        "thread.list",
        "thread.rename",
        "thread.archive",
        "thread.pin",
        "thread.edit",
        "thread.regenerate",
        "thread.branch",
        "messages.view",
        "messages.search",
        "trail.read",
        "inbox.read",
        "assistant.stop",
    }
    assert (ActorKind.HUMAN in kinds) == (verb in human_verbs | {"message.send", "message.receive"})
    # The lease reaper ends other runs' claims: it is the system's, never a run's.
    run_prefixes = ("claim.", "task.", "decision.", "message.", "turn.", "step.")
    run_verbs = {v for v in VERBS if v.startswith(run_prefixes)}
    assert (ActorKind.RUN in kinds) == (verb in run_verbs - {"claim.reap"})


@pytest.mark.parametrize(
    ("verb", "call"),
    [
        (
            "thread.rename",
            lambda actor, thread_id: actions.rename_thread(
                actor, thread_id=thread_id, name="renamed"
            ),
        ),
        (
            "thread.archive",
            lambda actor, thread_id: actions.archive_thread(
                actor, thread_id=thread_id, archived=True
            ),
        ),
    ],
)
def test_thread_change_verb_off_the_tester_list_refuses_tester_refused(
    monkeypatch: pytest.MonkeyPatch,
    tester: Actor,
    threads: dict[str, int],
    verb: str,
    call: Callable[[Actor, int], Any],
) -> None:
    """R22 decides the tester's share of the inbox verbs: off its list, even its own thread is
    refused `tester-refused`, and nothing changes."""
    monkeypatch.setattr(policy, "TESTER_VERBS", policy.TESTER_VERBS - {verb})
    before = stored()
    with pytest.raises(Refusal) as refusal:
        call(tester, threads["tester"])
    assert refusal.value.code == refusals.TESTER_REFUSED
    assert stored() == before
