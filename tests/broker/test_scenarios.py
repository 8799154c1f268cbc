"""The acceptance scenarios T1–T7 at the broker level (SPEC §10)."""

from __future__ import annotations

import pytest

from broker import actions, refusals, selectors
from broker.actors import Actor
from broker.models import (
    Business,
    Event,
    EventKind,
    Message,
    RoleDefinition,
    ThreadClaim,
    ThreadOpen,
)
from broker.refusals import Refusal
from tests.broker import factories


def refused(code: str):
    """Expect a refusal with exactly this code (codes, not sentences, are the contract)."""
    return pytest.raises(Refusal, match=f"^{code}: ")


@pytest.fixture
def product(human: Actor):
    return factories.project(human, "product")


@pytest.fixture
def human_thread(human: Actor, product):
    return factories.thread(human, product, "human work")


@pytest.fixture
def tester_thread(tester: Actor, product):
    return factories.thread(tester, product, "tester check")


# --- T1 ----------------------------------------------------------------------------------


def test_t1_thread_create_by_tester_is_owned_by_tester(tester_thread) -> None:
    """T1 (R2): the tester's thread has owner `tester`."""
    assert tester_thread.owner == "tester"


def test_t1_thread_list_each_side_sees_only_its_own(
    human: Actor, tester: Actor, human_thread, tester_thread
) -> None:
    """T1 (R3): the human's list leaves the tester's thread out; the tester's lists only it."""
    assert [t.pk for t in selectors.list_threads(human)] == [human_thread.pk]
    assert [t.pk for t in selectors.list_threads(tester)] == [tester_thread.pk]


@pytest.mark.parametrize("side", ["human", "tester"])
@pytest.mark.parametrize("verb", ["open", "send", "messages"])
def test_t1_thread_verbs_on_other_sides_thread_refuse_not_owned(
    request: pytest.FixtureRequest, side: str, verb: str, human_thread, tester_thread
) -> None:
    """T1 (R1): each side gets `thread-not-owned` on the other's thread, for every verb."""
    actor: Actor = request.getfixturevalue(side)
    foreign = tester_thread if side == "human" else human_thread
    calls = {
        "open": lambda: actions.open_thread(actor, thread_id=foreign.pk),
        "send": lambda: actions.send_to_thread(actor, thread_id=foreign.pk, body="hi"),
        "messages": lambda: selectors.thread_messages(actor, thread_id=foreign.pk),
    }
    before = (Message.objects.count(), ThreadOpen.objects.count(), Event.objects.count())
    with refused(refusals.THREAD_NOT_OWNED):
        calls[verb]()
    assert (Message.objects.count(), ThreadOpen.objects.count(), Event.objects.count()) == before


def test_t1_thread_of_another_business_is_not_found(other_human: Actor, human_thread) -> None:
    """R1: across businesses a thread is answered as missing, not as someone else's."""
    with refused(refusals.NOT_FOUND):
        selectors.thread_messages(other_human, thread_id=human_thread.pk)


# --- T2 ----------------------------------------------------------------------------------


def test_t2_thread_send_by_tester_stores_tester_and_no_human_input(
    tester: Actor, tester_thread
) -> None:
    """T2 (R6, R7): `tester`/`tester-cli`, in the thread, no `human.input`, request None."""
    events_before = Event.objects.filter(kind=EventKind.HUMAN_INPUT).count()
    turn = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="does it work?")
    stored = Message.objects.get(pk=turn.message.pk)
    assert (stored.from_role, stored.from_run, stored.to_role) == (
        "tester",
        "tester-cli",
        "assistant",
    )
    assert stored.thread_id == tester_thread.pk
    assert stored.request_id is None
    assert turn.request is None
    assert Event.objects.filter(kind=EventKind.HUMAN_INPUT).count() == events_before


def test_t2_thread_send_by_human_stores_human_and_one_human_input(
    human: Actor, human_thread
) -> None:
    """R6, R7: the human's turn is `human`/`human-cli` and returns its `human.input` id."""
    turn = actions.send_to_thread(human, thread_id=human_thread.pk, body="plan the week")
    stored = Message.objects.get(pk=turn.message.pk)
    assert (stored.from_role, stored.from_run) == ("human", "human-cli")
    request = Event.objects.get(kind=EventKind.HUMAN_INPUT)
    assert turn.request == request.pk == stored.request_id
    assert request.body["thread"] == human_thread.pk


def test_t2_thread_open_by_tester_stores_by_tester(tester: Actor, tester_thread) -> None:
    """T2 (R2): the tester's open stores `by 'tester'`; the human's stores the username."""
    assert actions.open_thread(tester, thread_id=tester_thread.pk).by == "tester"


def test_t2_thread_open_by_human_stores_username(human: Actor, human_thread) -> None:
    assert actions.open_thread(human, thread_id=human_thread.pk).by == "ada"


# --- T3 ----------------------------------------------------------------------------------


def test_t3_thread_send_by_tester_passes_shipped_lists(tester: Actor, tester_thread) -> None:
    """T3 (R9): the shipped lists name only `human`, and the tester reads as human."""
    actions.send_to_thread(tester, thread_id=tester_thread.pk, body="hello")
    assert Message.objects.filter(from_role="tester").count() == 1


def test_t3_thread_send_without_human_in_receive_from_refuses_sender(
    business: Business, human: Actor, tester: Actor, human_thread, tester_thread
) -> None:
    """T3 (R8): with `human` dropped from receive_from, the tester is refused as the human is."""
    RoleDefinition.objects.filter(business=business).update(receive_from=[])
    for actor, thread in ((tester, tester_thread), (human, human_thread)):
        with refused(refusals.MESSAGE_SENDER_REFUSED):
            actions.send_to_thread(actor, thread_id=thread.pk, body="hello")
    assert Message.objects.count() == 0


def test_t3_message_send_by_tester_outside_thread_refuses_sender(tester: Actor) -> None:
    """T3 (R9 nowhere else): the tester's `message.send` to the assistant still refuses."""
    with refused(refusals.MESSAGE_SENDER_REFUSED):
        actions.send_message(tester, to="assistant", body="hello")


# --- T4 ----------------------------------------------------------------------------------


@pytest.fixture
def tester_turn(tester: Actor, tester_thread):
    return actions.send_to_thread(tester, thread_id=tester_thread.pk, body="how are you?")


@pytest.fixture
def tester_claim(assistant_run: Actor, tester_thread, tester_turn):
    return factories.claim(assistant_run, tester_thread)


def reply(run: Actor, claim: ThreadClaim, turn) -> Message:
    """R12: a run's answer to a turn."""
    return actions.send_message(
        run,
        to=turn.message.from_role,
        body="all good",
        message_class="RESULT",
        in_reply_to=turn.message.pk,
        claim_id=claim.pk,
    )


def test_t4_reply_to_tester_lands_in_thread_and_tester_views(
    human: Actor, tester: Actor, assistant_run: Actor, tester_thread, tester_turn, tester_claim
) -> None:
    """T4 (R12): the reply goes `to 'tester'` in the thread; the tester reads it, the human not."""
    answer = reply(assistant_run, tester_claim, tester_turn)
    assert (answer.to_role, answer.in_reply_to_id, answer.thread_id) == (
        "tester",
        tester_turn.message.pk,
        tester_thread.pk,
    )
    assert answer.claim_id == tester_claim.pk
    assert answer.pk in [
        m.pk for m in selectors.thread_messages(tester, thread_id=tester_thread.pk)
    ]
    assert [m.pk for m in selectors.receive_messages(tester)] == [answer.pk]
    tester_view = selectors.messages_view(tester)
    assert ([m.pk for m in tester_view.rows], tester_view.count) == ([answer.pk], 1)
    human_view = selectors.messages_view(human)
    assert (human_view.rows, human_view.count) == ([], 0)
    assert selectors.receive_messages(human) == []


def test_t4_run_of_tester_thread_send_to_human_refuses(assistant_run: Actor, tester_claim) -> None:
    """T4 (R11): a run of a tester-owned thread may not message the human."""
    with refused(refusals.TESTER_THREAD_HUMAN):
        actions.send_message(assistant_run, to="human", body="psst", claim_id=tester_claim.pk)
    assert not Message.objects.filter(to_role="human").exists()


def test_t4_run_of_human_thread_send_to_human_is_allowed(
    human: Actor, assistant_run: Actor, human_thread
) -> None:
    """T4 (R11 only in tester threads): a human thread's run still messages the human."""
    actions.send_to_thread(human, thread_id=human_thread.pk, body="hi")
    claim = factories.claim(assistant_run, human_thread)
    sent = actions.send_message(assistant_run, to="human", body="fyi", claim_id=claim.pk)
    assert [m.pk for m in selectors.messages_view(human).rows] == [sent.pk]


def test_t4_reply_to_tester_not_in_reply_to_tester_message_refuses(
    assistant_run: Actor, tester_claim
) -> None:
    """R10: a message to the tester must answer one of the tester's messages."""
    with refused(refusals.TESTER_REPLY_REQUIRED):
        actions.send_message(assistant_run, to="tester", body="unasked", claim_id=tester_claim.pk)


def test_t4_second_reply_to_same_message_is_refused(
    assistant_run: Actor, tester_turn, tester_claim
) -> None:
    """SPEC §7: exactly one reply per message, held by the database."""
    reply(assistant_run, tester_claim, tester_turn)
    with refused(refusals.INVALID):
        reply(assistant_run, tester_claim, tester_turn)
    assert Message.objects.filter(message_class="RESULT").count() == 1


# --- T5 ----------------------------------------------------------------------------------


@pytest.fixture
def both_held(human: Actor, tester: Actor, assistant_run: Actor, human_thread, tester_thread):
    actions.send_to_thread(human, thread_id=human_thread.pk, body="one")
    actions.send_to_thread(tester, thread_id=tester_thread.pk, body="two")
    return factories.claim(assistant_run, human_thread), factories.claim(
        assistant_run, tester_thread
    )


def test_t5_stop_by_tester_ends_only_tester_claim(tester: Actor, both_held) -> None:
    """T5 (R13): the tester's stop ends its own run, `ended_by 'tester'`, never the human's."""
    human_claim, tester_claim = both_held
    stopped = actions.stop_assistant(tester)
    assert [c.pk for c in stopped.claims] == [tester_claim.pk]
    tester_claim.refresh_from_db()
    human_claim.refresh_from_db()
    assert (tester_claim.ended_by, tester_claim.end_reason) == ("tester", "stopped by the tester")
    assert human_claim.ended_at is None


def test_t5_stop_by_human_ends_only_human_claim(human: Actor, both_held) -> None:
    """T5 (R13): the human's stop never ends a tester run."""
    human_claim, tester_claim = both_held
    stopped = actions.stop_assistant(human)
    assert [c.pk for c in stopped.claims] == [human_claim.pk]
    human_claim.refresh_from_db()
    tester_claim.refresh_from_db()
    assert (human_claim.ended_by, human_claim.end_reason) == ("ada", "stopped by the human")
    assert tester_claim.ended_at is None


def test_t5_stop_by_tester_with_nothing_held_refuses_not_held(
    tester: Actor, human: Actor, assistant_run: Actor, human_thread
) -> None:
    """T5 (R13): a human run held, nothing of the tester's: `not-held`, the human's untouched."""
    actions.send_to_thread(human, thread_id=human_thread.pk, body="one")
    claim = factories.claim(assistant_run, human_thread)
    with refused(refusals.NOT_HELD):
        actions.stop_assistant(tester)
    claim.refresh_from_db()
    assert claim.ended_at is None


def test_t5_stopped_run_write_refuses_claim_ended(
    tester: Actor, assistant_run: Actor, tester_turn, tester_claim
) -> None:
    """SPEC §7: a reply generated after the stop never lands (`claim-ended`)."""
    actions.stop_assistant(tester)
    with refused(refusals.CLAIM_ENDED):
        reply(assistant_run, tester_claim, tester_turn)
    assert not Message.objects.filter(message_class="RESULT").exists()


# --- T6 is proven through the loader and `check` (test_business_file, test_checks) --------


def test_t6_business_human_tester_refused_by_database(db: None) -> None:
    """T6 (R4): the database itself refuses a business whose human is `tester`."""
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        Business.objects.create(slug="bad", human="tester")


# --- T7 ----------------------------------------------------------------------------------


def test_t7_trail_of_human_shows_tester_message_labelled(
    human: Actor, tester: Actor, tester_thread
) -> None:
    """T7 (R16): the human's trail has the tester's turn as `tester to assistant: …`."""
    turn = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="ping")
    [row] = selectors.read_trail(human)
    assert (row.message_id, row.from_role, row.from_run, row.to_role) == (
        turn.message.pk,
        "tester",
        "tester-cli",
        "assistant",
    )
    assert (row.actor_role, row.actor_run) == ("tester", "tester-cli")
    assert row.text == "tester to assistant: ping"


def test_t7_trail_labels_reply_to_tester(
    human: Actor, assistant_run: Actor, tester_turn, tester_claim
) -> None:
    """R16: the run's answer reads `assistant to tester: …` with actor `{assistant, run}`."""
    reply(assistant_run, tester_claim, tester_turn)
    row = selectors.read_trail(human)[-1]
    assert row.text == "assistant to tester: all good"
    assert (row.actor_role, row.actor_run) == ("assistant", "run-1")
