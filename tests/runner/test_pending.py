"""Pending detection (SPEC §7): a turn to an instance, no RESULT yet, no stop after it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from broker import actions
from broker.actors import Actor
from broker.models import Business, ClaimEnd, Message, ThreadClaim
from runner.pending import pending_messages, pending_threads
from tests.broker import factories


@pytest.fixture
def staff(business: Business) -> Actor:
    return Actor.staff(business_id=business.pk, username="root")


@pytest.fixture
def product(human: Actor):
    return factories.project(human)


def send(actor: Actor, thread, body: str = "hi") -> Message:
    return actions.send_to_thread(actor, thread_id=thread.pk, body=body).message


def reply(run: Actor, claim: ThreadClaim, message: Message) -> Message:
    return actions.send_message(
        run,
        to=message.from_role,
        message_class="RESULT",
        in_reply_to=message.pk,
        claim_id=claim.pk,
        body="answer",
    )


def pending_ids(**filters) -> list[int]:
    return list(pending_messages(**filters).values_list("pk", flat=True))


def test_pending_messages_unanswered_turns_are_pending_in_id_order(
    human: Actor, tester: Actor, product
) -> None:
    """SPEC §7: every turn sent to an instance waits for its reply, human's and tester's alike."""
    human_thread = factories.thread(human, product, "work")
    tester_thread = factories.thread(tester, product, "check")
    turns = [send(human, human_thread), send(tester, tester_thread), send(human, human_thread)]
    assert pending_ids() == [m.pk for m in turns]
    assert pending_ids(thread_id=tester_thread.pk) == [turns[1].pk]


def test_pending_messages_answered_turn_is_not_pending(
    human: Actor, assistant_run: Actor, product
) -> None:
    """R12: a turn with its RESULT is done; the reply itself is never pending."""
    thread = factories.thread(human, product, "work")
    first, second = send(human, thread), send(human, thread)
    claim = factories.claim(assistant_run, thread)
    reply(assistant_run, claim, first)
    assert pending_ids() == [second.pk]


def test_pending_messages_run_message_that_is_not_a_result_answers_nothing(
    human: Actor, assistant_run: Actor, product
) -> None:
    """Only a RESULT in reply to it answers a turn; other bus traffic is never pending."""
    thread = factories.thread(human, product, "work")
    turn = send(human, thread)
    claim = factories.claim(assistant_run, thread)
    actions.send_message(assistant_run, to="human", body="working on it", claim_id=claim.pk)
    assert pending_ids() == [turn.pk]


@pytest.mark.parametrize("stopper", ["human", "tester"])
def test_pending_messages_turn_before_stop_is_not_pending(
    request: pytest.FixtureRequest, assistant_run: Actor, product, stopper: str
) -> None:
    """SPEC §7, R13: a stop covers the turns sent before it: they are never answered later."""
    actor: Actor = request.getfixturevalue(stopper)
    thread = factories.thread(actor, product, "t")
    turn = send(actor, thread)
    factories.claim(assistant_run, thread)
    actions.stop_assistant(actor)
    assert turn.pk not in pending_ids()


def test_pending_messages_turn_after_stop_is_pending(
    human: Actor, assistant_run: Actor, product
) -> None:
    """SPEC §7: "no stop after it" — a turn sent after the stop starts a new run."""
    thread = factories.thread(human, product, "work")
    before = send(human, thread)
    factories.claim(assistant_run, thread)
    actions.stop_assistant(human)
    after = send(human, thread)
    assert pending_ids() == [after.pk]
    assert before.pk not in pending_ids()


def test_pending_messages_stop_of_other_thread_leaves_turn_pending(
    human: Actor, tester: Actor, assistant_run: Actor, product
) -> None:
    """R13: the tester's stop of its own thread does not touch the human's pending turn."""
    human_thread = factories.thread(human, product, "work")
    tester_thread = factories.thread(tester, product, "check")
    human_turn, tester_turn = send(human, human_thread), send(tester, tester_thread)
    factories.claim(assistant_run, human_thread)
    factories.claim(assistant_run, tester_thread)
    actions.stop_assistant(tester)
    assert pending_ids() == [human_turn.pk]
    assert tester_turn.pk not in pending_ids()


def test_pending_messages_turn_before_instance_end_is_not_pending(
    human: Actor, tester: Actor, staff: Actor, assistant_run: Actor, product
) -> None:
    """R14: ending the instance stops the runs of every thread, the tester's included."""
    turns = []
    for actor, name in ((human, "work"), (tester, "check")):
        thread = factories.thread(actor, product, name)
        turns.append(send(actor, thread))
        factories.claim(assistant_run, thread)
    actions.end_instance(staff, instance="assistant")
    assert pending_ids() == []


@pytest.mark.parametrize("how", [ClaimEnd.DONE, ClaimEnd.SHUT_DOWN, ClaimEnd.FAILED])
def test_pending_messages_claim_released_without_stop_leaves_turn_pending(
    human: Actor, assistant_run: Actor, product, how: ClaimEnd
) -> None:
    """A release, a shutdown or a failure is no stop: the turn is still owed."""
    thread = factories.thread(human, product, "work")
    turn = send(human, thread)
    claim = factories.claim(assistant_run, thread)
    actions.end_claim(assistant_run, claim_id=claim.pk, how=how)
    assert pending_ids() == [turn.pk]


def test_pending_messages_claim_expired_leaves_turn_pending(
    human: Actor, assistant_run: Actor, product
) -> None:
    """SPEC §7: a dead run's expired lease is no stop: the turn is still owed."""
    thread = factories.thread(human, product, "work")
    turn = send(human, thread)
    claim = factories.claim(assistant_run, thread)
    business_id = claim.thread.project.business_id
    with actions.appending(business_id):
        actions.do_expire_claim(
            ThreadClaim.objects.select_for_update().get(pk=claim.pk), business_id=business_id
        )
    assert ThreadClaim.objects.get(pk=claim.pk).ended_how == ClaimEnd.LEASE_EXPIRED
    assert pending_ids() == [turn.pk]


@pytest.mark.parametrize("sentence", ["stopped by the human", "instance ended by root"])
def test_pending_messages_release_worded_as_stop_leaves_turn_pending(
    human: Actor, assistant_run: Actor, product, sentence: str
) -> None:
    """The runner decides on how a claim ended, never on its sentence: a run's release that
    reads like a stop does not drop the turn."""
    thread = factories.thread(human, product, "work")
    turn = send(human, thread)
    claim = factories.claim(assistant_run, thread)
    actions.end_claim(assistant_run, claim_id=claim.pk, how=ClaimEnd.DONE, reason=sentence)
    assert ThreadClaim.objects.get(pk=claim.pk).end_reason == sentence
    assert pending_ids() == [turn.pk]


def test_pending_messages_filters_by_business_and_instance(
    human: Actor, other_human: Actor, product
) -> None:
    mine = send(human, factories.thread(human, product, "mine"))
    theirs = send(other_human, factories.thread(other_human, factories.project(other_human), "x"))
    assert pending_ids(business_id=human.business_id) == [mine.pk]
    assert pending_ids(business_id=other_human.business_id) == [theirs.pk]
    assert pending_ids(instance="planner") == []


def test_pending_messages_query_count_is_pinned(
    human: Actor, tester: Actor, assistant_run: Actor, product, django_assert_num_queries
) -> None:
    """One query, however many threads, turns, replies and stops there are."""
    for i in range(6):
        actor = human if i % 2 else tester
        thread = factories.thread(actor, product, f"t{i}")
        first = send(actor, thread)
        send(actor, thread)
        claim = factories.claim(assistant_run, thread)
        reply(assistant_run, claim, first)
    with django_assert_num_queries(1):
        assert len(list(pending_messages())) == 6
    with django_assert_num_queries(1):
        assert len(pending_threads(limit=10)) == 0  # all held


# --- pending threads: what a runner may take up ---------------------------------------------


def test_pending_threads_oldest_first_one_per_thread(human: Actor, product) -> None:
    a, b = factories.thread(human, product, "a"), factories.thread(human, product, "b")
    first = send(human, b)
    send(human, a)
    send(human, b)
    found = pending_threads(limit=10)
    assert [(p.thread_id, p.first_message_id) for p in found] == [
        (b.pk, first.pk),
        (a.pk, a.messages.get().pk),
    ]
    assert {(p.business_id, p.instance) for p in found} == {(human.business_id, "assistant")}
    assert [p.thread_id for p in pending_threads(limit=1)] == [b.pk]
    assert [p.thread_id for p in pending_threads(limit=9, exclude={(b.pk, "assistant")})] == [a.pk]
    assert len(pending_threads(limit=9, exclude={(b.pk, "reviewer")})) == 2
    both = {(a.pk, "assistant"), (b.pk, "assistant"), (a.pk, "reviewer")}
    assert pending_threads(limit=9, exclude=both) == []
    assert len(pending_threads(limit=9, exclude={(a.pk, "reviewer"), (b.pk, "reviewer")})) == 2


def test_pending_threads_held_on_live_lease_is_left_out_expired_is_found(
    human: Actor, assistant_run: Actor, product
) -> None:
    """SPEC §7: a live claim keeps other runners off; a dead run's expired lease does not."""
    thread = factories.thread(human, product, "work")
    send(human, thread)
    claim = factories.claim(assistant_run, thread)
    assert pending_threads(limit=10) == []
    ThreadClaim.objects.filter(pk=claim.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert [p.thread_id for p in pending_threads(limit=10)] == [thread.pk]


def test_pending_threads_retrying_turn_waits_for_its_retry_time(
    human: Actor, assistant_run: Actor, product
) -> None:
    """SPEC §7.1: after a transient failure the thread waits until the turn's `retry_at`."""
    thread = factories.thread(human, product, "work")
    turn = send(human, thread)
    claim = factories.claim(assistant_run, thread)
    actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=turn.pk)
    progress = actions.fail_turn(
        assistant_run,
        claim_id=claim.pk,
        turn_id=turn.pk,
        failure="The model server is busy.",
        transient=True,
        retry_after=30,
    )
    actions.end_claim(assistant_run, claim_id=claim.pk, how=ClaimEnd.FAILED, reason="busy")
    assert progress.state == "retrying"
    assert pending_ids() == [turn.pk]  # still owed
    assert pending_threads(limit=10) == []
    later = progress.retry_at + timedelta(seconds=1)
    assert [p.thread_id for p in pending_threads(limit=10, now=later)] == [thread.pk]


def test_pending_threads_failed_claim_alone_sets_no_back_off(
    human: Actor, assistant_run: Actor, product
) -> None:
    """SPEC §7.1: the wait is the turn's (`retry_at`), not a claim's end, whatever it says."""
    thread = factories.thread(human, product, "work")
    send(human, thread)
    claim = factories.claim(assistant_run, thread)
    actions.end_claim(assistant_run, claim_id=claim.pk, how=ClaimEnd.FAILED, reason="timeout")
    assert [p.thread_id for p in pending_threads(limit=10)] == [thread.pk]
