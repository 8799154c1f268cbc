"""Races on real row locks: PostgreSQL only (`select_for_update` does nothing on SQLite)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from broker import actions
from broker.access import access_claim, access_thread
from broker.actors import Actor
from broker.models import Message, Thread, ThreadClaim, ThreadOpen, TrailRow, TurnProgress
from broker.refusals import Refusal
from runner.claims import try_claim
from tests.broker import factories
from tests.broker.test_consult import add_reviewer

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def race(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once, each on its own connection; each result or its Refusal."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = call()
        except Refusal as refusal:
            results[index] = refusal
        finally:
            connection.close()

    workers = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def test_claim_open_by_many_runs_at_once_gives_one_claim(business, human: Actor) -> None:
    """One open claim per thread, whoever races for it."""
    thread = factories.thread(human, factories.project(human), "t")
    actions.send_to_thread(human, thread_id=thread.pk, body="hi")
    runs = [
        Actor.assistant_run(business_id=business.pk, instance="assistant", run=f"run-{i}")
        for i in range(6)
    ]
    results = race(*(lambda run=run: actions.open_claim(run, thread_id=thread.pk) for run in runs))
    assert len([r for r in results if isinstance(r, ThreadClaim)]) == 1
    assert results.count(None) == 5
    assert ThreadClaim.objects.filter(ended_at__isnull=True).count() == 1


def consulting(business, human: Actor) -> tuple[Thread, ThreadClaim, Message]:
    """A human's thread whose assistant run, answering, has asked `reviewer` (R23)."""
    add_reviewer(business)
    thread = factories.thread(human, factories.project(human), "t")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="hi").message
    asking = Actor.assistant_run(business_id=business.pk, instance="assistant", run="asking")
    claim = factories.claim(asking, thread)
    actions.start_turn(asking, claim_id=claim.pk, turn_id=turn.pk)
    question = actions.consult(
        asking, claim_id=claim.pk, turn_id=turn.pk, to="reviewer", body="ok?"
    )
    return thread, claim, question


def test_consulted_instance_claims_beside_the_thread_one_claim_each(business, human: Actor) -> None:
    """R23: runs of the thread's instance and of an instance it consults race for the same
    thread: one open claim for each instance, never two for one."""
    thread, _, _ = consulting(business, human)
    runs = [
        Actor.assistant_run(business_id=business.pk, instance=instance, run=f"{instance}-{i}")
        for i in range(3)
        for instance in ("assistant", "reviewer")
    ]
    results = race(*(lambda run=run: try_claim(run, thread_id=thread.pk) for run in runs))
    won = [r for r in results if isinstance(r, ThreadClaim)]
    assert [claim.instance.name for claim in won] == ["reviewer"]
    open_claims = ThreadClaim.objects.filter(ended_at__isnull=True)
    assert sorted(open_claims.values_list("instance__name", flat=True)) == ["assistant", "reviewer"]


@pytest.mark.parametrize("attempt", range(3))
def test_stop_racing_a_consultation_answer_never_leaves_an_answer_after_the_stop(
    attempt: int, business, human: Actor
) -> None:
    """R13, R23: the human's stop of the asking instance races the consulted run's answer;
    the answer lands before the stop or not at all, and the chain ends either way."""
    thread, claim, question = consulting(business, human)
    consulted = Actor.assistant_run(business_id=business.pk, instance="reviewer", run="rev")
    review = factories.claim(consulted, thread)
    actions.start_turn(consulted, claim_id=review.pk, turn_id=question.pk)
    stop, answer = race(
        lambda: actions.stop_assistant(human, instance="assistant"),
        lambda: actions.send_message(
            consulted,
            to="assistant",
            body="fine",
            message_class="RESULT",
            in_reply_to=question.pk,
            claim_id=review.pk,
        ),
    )
    assert ThreadClaim.objects.get(pk=claim.pk).ended_at is not None
    state = Message.objects.select_related("progress").get(pk=question.pk).reply_state
    if isinstance(answer, Refusal):
        # The stop came first: the whole chain ended, and no answer landed.
        assert answer.code == "claim-ended" and state == "stopped"
        assert not ThreadClaim.objects.filter(ended_at__isnull=True).exists()
        assert not Message.objects.filter(message_class="RESULT").exists()
    else:
        # The answer came first: nothing of the chain was left to stop but the asking run;
        # the consulted run releases its own claim when it finds nothing more to answer.
        assert state == "answered" and [c.pk for c in stop.claims] == [claim.pk]


@pytest.mark.parametrize("attempt", range(5))
def test_stop_racing_reply_never_leaves_reply_after_stop(
    attempt: int, tester: Actor, assistant_run: Actor, human: Actor
) -> None:
    """SPEC §7: the claim row lock orders a stop and a reply; a reply never lands after a stop."""
    thread = factories.thread(tester, factories.project(human), "t")
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hi")
    claim = factories.claim(assistant_run, thread)
    stop, reply = race(
        lambda: actions.stop_assistant(tester),
        lambda: actions.send_message(
            assistant_run,
            to="tester",
            body="answer",
            message_class="RESULT",
            in_reply_to=turn.message.pk,
            claim_id=claim.pk,
        ),
    )
    claim.refresh_from_db()
    assert claim.ended_at is not None
    assert [c.pk for c in stop.claims] == [claim.pk]
    state = Message.objects.select_related("progress").get(pk=turn.message.pk).reply_state
    if isinstance(reply, Refusal):
        assert reply.code == "claim-ended"
        assert not Message.objects.filter(message_class="RESULT").exists()
        # SPEC §7.1: the stop came first and ended the turn too.
        assert (state, stop.turns) == ("stopped", [(turn.message.pk, thread.pk)])
    else:
        assert reply.created_at <= claim.ended_at
        assert (state, stop.turns) == ("answered", [])


def test_two_replies_racing_for_one_message_store_one(
    business, tester: Actor, human: Actor
) -> None:
    """Exactly one reply per message, even from two runs each believing it holds the claim."""
    thread = factories.thread(tester, factories.project(human), "t")
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hi")
    run = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-1")
    claim = factories.claim(run, thread)

    def answer() -> Message:
        return actions.send_message(
            run,
            to="tester",
            body="answer",
            message_class="RESULT",
            in_reply_to=turn.message.pk,
            claim_id=claim.pk,
        )

    results = race(answer, answer)
    assert len([r for r in results if isinstance(r, Message)]) == 1
    assert Message.objects.filter(message_class="RESULT").count() == 1


def test_stream_rows_commit_in_id_order(business, human: Actor, tester: Actor) -> None:
    """SPEC §6: a reader resumes after the last id it saw, so a trail row with a smaller id may
    not commit after one with a greater id. A writer that has appended to the business's
    streams holds the next one back until it commits."""
    project = factories.project(human)
    human_thread = factories.thread(human, project, "h")
    tester_thread = factories.thread(tester, project, "t")
    first_appended, release_first = threading.Event(), threading.Event()
    second_done = threading.Event()
    ids: dict[str, int] = {}

    def first() -> None:
        try:
            with transaction.atomic():
                turn = actions.send_to_thread(human, thread_id=human_thread.pk, body="first")
                ids["first"] = TrailRow.objects.get(message=turn.message).pk
                first_appended.set()
                release_first.wait(10)
        finally:
            connection.close()

    def second() -> None:
        try:
            turn = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="second")
            ids["second"] = TrailRow.objects.get(message=turn.message).pk
            second_done.set()
        finally:
            connection.close()

    writers = [threading.Thread(target=first), threading.Thread(target=second)]
    writers[0].start()
    assert first_appended.wait(10)
    writers[1].start()
    # The first writer has its trail row and has not committed: the second must wait for it.
    assert not second_done.wait(1.0)
    release_first.set()
    for writer in writers:
        writer.join(10)
    assert second_done.is_set()
    assert ids["first"] < ids["second"]


def test_a_run_starting_its_turn_and_another_claiming_the_thread_do_not_deadlock(
    business, tester: Actor, human: Actor
) -> None:
    """SPEC §7: two runners on one database. Run A holds its claim's row lock and starts its
    turn, inserting the turn's progress row (whose key check reads the thread's row), while run
    B, which listed the thread before A's claim showed, locks the thread to claim it and waits
    for A's claim. With the thread locked FOR UPDATE the two waited on each other until
    PostgreSQL's deadlock timeout ended one of them; FOR NO KEY UPDATE lets A finish first."""
    thread = factories.thread(tester, factories.project(human), "t")
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hi").message
    run_a = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-a")
    run_b = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-b")
    claim = factories.claim(run_a, thread)
    a_holds_its_claim = threading.Event()
    outcomes: dict[str, Any] = {}

    def run_a_starts_its_turn() -> None:
        try:
            with transaction.atomic():
                access_claim(run_a, claim_id=claim.pk)
                a_holds_its_claim.set()
                wait_for_a_lock_wait()  # B has locked the thread and waits for this claim
                outcomes["a"] = actions.start_turn(run_a, claim_id=claim.pk, turn_id=turn.pk)
        except Exception as error:
            outcomes["a"] = error
        finally:
            connection.close()

    def run_b_claims_the_thread() -> None:
        try:
            a_holds_its_claim.wait(10)
            outcomes["b"] = try_claim(run_b, thread_id=thread.pk)
        except Exception as error:
            outcomes["b"] = error
        finally:
            connection.close()

    workers = [
        threading.Thread(target=run_a_starts_its_turn),
        threading.Thread(target=run_b_claims_the_thread),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert isinstance(outcomes["a"], TurnProgress), outcomes["a"]
    assert outcomes["b"] is None  # A's claim is live: B passes the thread over
    assert ThreadClaim.objects.filter(ended_at__isnull=True).get().run == "run-a"


@pytest.mark.parametrize(
    "lock_the_thread",
    [
        pytest.param(lambda actor, pk: access_thread(actor, thread_id=pk, lock=True), id="access"),
        pytest.param(lambda actor, pk: actions.locked_threads().get(pk=pk), id="locked_threads"),
    ],
)
def test_a_thread_locked_by_a_writer_still_takes_rows_that_reference_it(
    lock_the_thread: Callable[[Actor, int], Any], tester: Actor, human: Actor
) -> None:
    """SPEC §7: every lock of a thread's row is FOR NO KEY UPDATE (`access_thread`'s SQL and
    `actions.locked_threads`, which every ORM lock of a thread goes through). A FOR UPDATE lock
    would hold up the key check of any insert that references the thread — the wait behind
    the runners' deadlock (test above)."""
    thread = factories.thread(tester, factories.project(human), "t")
    locked, release = threading.Event(), threading.Event()

    def hold_the_lock() -> None:
        try:
            with transaction.atomic():
                lock_the_thread(tester, thread.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert locked.wait(10)
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '2s'")
            opened = ThreadOpen.objects.create(thread=thread, by="tester")
    finally:
        release.set()
        holder.join(10)
    assert ThreadOpen.objects.filter(pk=opened.pk).exists()


def wait_for_a_lock_wait(seconds: float = 10) -> None:
    """Until another connection to this database waits for a lock."""
    deadline = time.monotonic() + seconds
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            # The statistics views are read once per transaction unless cleared.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("no connection came to wait for a lock")
