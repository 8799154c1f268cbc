"""Assistant runs end to end with the real runner (SPEC §7; T4, T5; R12–R15).

The runner's threads must see committed rows, so these tests use transactional databases.
They run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from broker import actions, refusals, selectors
from broker.actors import Actor
from broker.models import Business, Message, Task, ThreadClaim, TrailRow
from broker.refusals import Refusal
from runner.backends.chat_completions import ChatCompletionsBackend
from runner.pending import pending_messages
from tests.broker import factories
from tests.support.runners import LEASE, wait_until_looked_again
from tests.support.waits import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def reply_to(message_id: int) -> Message | None:
    return Message.objects.filter(in_reply_to_id=message_id, message_class="RESULT").first()


def held_claim(thread_id: int) -> ThreadClaim | None:
    return ThreadClaim.objects.filter(thread_id=thread_id, ended_at__isnull=True).first()


@pytest.fixture
def staff(business: Business) -> Actor:
    return Actor.staff(business_id=business.pk, username="root")


# --- T4 ----------------------------------------------------------------------------------


def test_runner_tester_thread_turn_replies_to_tester_in_reply_to(
    human: Actor, tester: Actor, start_runner
) -> None:
    """T4, R9, R10, R12: the runner answers a tester turn `to 'tester'` in_reply_to it, in the
    thread; the reply is in the tester's views and absent from the human's."""
    thread = factories.thread(tester, factories.project(tester), "tester check")
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hello").message
    start_runner()
    reply = wait_for(lambda: reply_to(turn.pk))
    assert (reply.thread_id, reply.from_role, reply.to_role) == (thread.pk, "assistant", "tester")
    assert reply.message_class == "RESULT"
    assert reply.claim is not None and reply.from_run == reply.claim.run
    assert reply.pk in [m.pk for m in selectors.thread_messages(tester, thread_id=thread.pk)]
    assert reply.pk in [m.pk for m in selectors.receive_messages(tester)]
    assert reply.pk not in [m.pk for m in selectors.messages_view(human).rows]
    assert selectors.receive_messages(human) == []
    assert TrailRow.objects.filter(message=reply, text__startswith="assistant to tester: ").exists()
    # The run released the thread once nothing there was pending.
    claim = wait_for(lambda: ThreadClaim.objects.filter(ended_at__isnull=False).first())
    assert (claim.end_reason, claim.ended_by) == ("done", claim.run)


def test_runner_human_thread_turn_replies_to_human_in_reply_to(
    human: Actor, tester: Actor, start_runner
) -> None:
    """T4, R12: a human thread's turn is answered `to 'human'`, in the human's view only."""
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="hello").message
    start_runner()
    reply = wait_for(lambda: reply_to(turn.pk))
    assert (reply.thread_id, reply.to_role) == (thread.pk, "human")
    assert [m.pk for m in selectors.messages_view(human).rows] == [reply.pk]
    assert selectors.messages_view(tester).rows == []


def test_runner_many_turns_answers_each_once_in_id_order(human: Actor, start_runner) -> None:
    """SPEC §7: exactly one reply per pending message, in id order within the thread."""
    thread = factories.thread(human, factories.project(human), "work")
    turns = [
        actions.send_to_thread(human, thread_id=thread.pk, body=f"point {i}").message.pk
        for i in range(5)
    ]
    start_runner(concurrency=3)
    wait_for(lambda: Message.objects.filter(message_class="RESULT").count() == 5)
    replies = Message.objects.filter(message_class="RESULT").order_by("pk")
    assert [r.in_reply_to_id for r in replies] == turns
    assert not pending_messages().exists()


def test_runner_turn_arriving_while_held_is_answered_before_release(
    human: Actor, start_runner, gated
) -> None:
    """SPEC §7: a run releases only when its thread has nothing pending left."""
    thread = factories.thread(human, factories.project(human), "work")
    first = actions.send_to_thread(human, thread_id=thread.pk, body="one").message
    start_runner(backend=gated)
    wait_for(lambda: gated.started)
    second = actions.send_to_thread(human, thread_id=thread.pk, body="two").message
    gated.release.set()
    wait_for(lambda: reply_to(first.pk) and reply_to(second.pk))
    wait_for(lambda: held_claim(thread.pk) is None)
    assert list(ThreadClaim.objects.values_list("end_reason", flat=True)) == ["done"]


# --- tasks (R15) -------------------------------------------------------------------------


def test_runner_human_task_turn_creates_task_and_says_so(human: Actor, start_runner) -> None:
    """R15: a human's `task:` turn becomes a task citing its `human.input` request."""
    thread = factories.thread(human, factories.project(human), "work")
    sent = actions.send_to_thread(human, thread_id=thread.pk, body="task: draft the launch note")
    start_runner()
    reply = wait_for(lambda: reply_to(sent.message.pk))
    task = Task.objects.get()
    assert (task.request_id, task.title) == (sent.request, "draft the launch note")
    assert f"task #{task.pk}" in reply.body


def test_runner_tester_task_turn_creates_nothing_and_says_so(tester: Actor, start_runner) -> None:
    """R15: a tester turn authorizes nothing; the reply says no task was created."""
    thread = factories.thread(tester, factories.project(tester), "check")
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="task: delete it all")
    start_runner()
    reply = wait_for(lambda: reply_to(turn.message.pk))
    assert not Task.objects.exists()
    assert "No task was created" in reply.body and "authorizes nothing" in reply.body


# --- T5 and stop mid-turn ----------------------------------------------------------------


def test_runner_tester_stop_mid_turn_ends_only_tester_run(
    human: Actor, tester: Actor, start_runner, gated
) -> None:
    """T5, R13, SPEC §7: the tester's stop ends only its own run mid-turn, `ended_by 'tester'`;
    that reply never lands, the human's run goes on and replies."""
    product = factories.project(human)
    tester_thread = factories.thread(tester, product, "check")
    human_thread = factories.thread(human, product, "work")
    tester_turn = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="hi").message
    human_turn = actions.send_to_thread(human, thread_id=human_thread.pk, body="hi").message
    runner = start_runner(backend=gated)
    wait_for(lambda: len(gated.started) == 2)

    stopped = actions.stop_assistant(tester)
    stopped_at = time.monotonic()

    assert [c.thread_id for c in stopped.claims] == [tester_thread.pk]
    claim = ThreadClaim.objects.get(thread=tester_thread)
    assert (claim.ended_by, claim.end_reason) == ("tester", "stopped by the tester")
    # The run is gone well within one lease: the turn was cancelled, the thread let go.
    wait_for(lambda: tester_turn.pk in gated.cancelled, timeout=LEASE)
    wait_for(lambda: tester_thread.pk not in runner.busy, timeout=LEASE)
    assert time.monotonic() - stopped_at < LEASE
    assert held_claim(human_thread.pk) is not None
    gated.release.set()
    wait_for(lambda: reply_to(human_turn.pk))
    wait_until_looked_again(runner)
    assert reply_to(tester_turn.pk) is None
    # A stopped message is no longer pending: it is never answered later.
    assert list(pending_messages()) == []
    assert code_of(lambda: actions.stop_assistant(tester)) == refusals.NOT_HELD


def test_runner_human_stop_mid_turn_ends_only_human_run(
    human: Actor, tester: Actor, start_runner, gated
) -> None:
    """T5, R13: the human's stop never ends a tester run."""
    product = factories.project(human)
    tester_thread = factories.thread(tester, product, "check")
    human_thread = factories.thread(human, product, "work")
    tester_turn = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="hi").message
    human_turn = actions.send_to_thread(human, thread_id=human_thread.pk, body="hi").message
    start_runner(backend=gated)
    wait_for(lambda: len(gated.started) == 2)

    stopped = actions.stop_assistant(human)

    assert [c.thread_id for c in stopped.claims] == [human_thread.pk]
    assert ThreadClaim.objects.get(thread=human_thread).ended_by == "ada"
    wait_for(lambda: human_turn.pk in gated.cancelled, timeout=LEASE)
    gated.release.set()
    wait_for(lambda: reply_to(tester_turn.pk))
    assert reply_to(human_turn.pk) is None


def test_runner_stop_then_new_turn_answers_only_new_turn(human: Actor, start_runner, gated) -> None:
    """SPEC §7: a stop covers what was sent before it; a turn sent after it starts a new run."""
    thread = factories.thread(human, factories.project(human), "work")
    before = actions.send_to_thread(human, thread_id=thread.pk, body="long job").message
    start_runner(backend=gated)
    wait_for(lambda: gated.started)
    actions.stop_assistant(human)
    wait_for(lambda: before.pk in gated.cancelled, timeout=LEASE)
    after = actions.send_to_thread(human, thread_id=thread.pk, body="something else").message
    gated.release.set()
    wait_for(lambda: reply_to(after.pk))
    assert reply_to(before.pk) is None
    assert ThreadClaim.objects.count() == 2


def test_runner_instance_end_mid_turn_drops_reply(
    human: Actor, tester: Actor, staff: Actor, start_runner, gated
) -> None:
    """R14: ending the instance ends every run, the tester's included; no reply lands."""
    product = factories.project(human)
    turns = [
        actions.send_to_thread(actor, thread_id=factories.thread(actor, product, name).pk, body="x")
        for actor, name in ((human, "work"), (tester, "check"))
    ]
    runner = start_runner(backend=gated)
    wait_for(lambda: len(gated.started) == 2)
    assert len(actions.end_instance(staff, instance="assistant")) == 2
    wait_for(lambda: not runner.busy, timeout=LEASE)
    gated.release.set()
    wait_until_looked_again(runner)
    assert not Message.objects.filter(message_class="RESULT").exists()
    assert [t.message.pk for t in turns if pending_messages().filter(pk=t.message.pk)] == []


def test_reply_after_stop_refuses_claim_ended(human: Actor, assistant_run: Actor) -> None:
    """SPEC §7: the ended claim refuses a late reply, whatever the runner does."""
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="x").message
    claim = factories.claim(assistant_run, thread)
    actions.stop_assistant(human)
    assert (
        code_of(
            lambda: actions.send_message(
                assistant_run,
                to="human",
                message_class="RESULT",
                in_reply_to=turn.pk,
                claim_id=claim.pk,
                body="late",
            )
        )
        == refusals.CLAIM_ENDED
    )


# --- dead runs, failures, shutdown ---------------------------------------------------------


def test_runner_thread_of_dead_run_is_answered_after_lease_expired(
    business: Business, human: Actor, start_runner
) -> None:
    """SPEC §7: a claim whose run died is ended `lease-expired` and its message answered."""
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="x").message
    dead = Actor.assistant_run(business_id=business.pk, instance="assistant", run="dead-run")
    dead_claim = factories.claim(dead, thread)
    started = time.monotonic()
    start_runner()
    reply = wait_for(lambda: reply_to(turn.pk), timeout=4 * LEASE)
    assert time.monotonic() - started >= LEASE * 0.9
    dead_claim.refresh_from_db()
    assert (dead_claim.end_reason, dead_claim.ended_by) == ("lease-expired", "system")
    assert reply.from_run != "dead-run"
    assert Message.objects.filter(message_class="RESULT").count() == 1


def test_runner_backend_error_ends_claim_and_retries_after_back_off(
    human: Actor, start_runner, fake_model, settings
) -> None:
    """SPEC §7.1: a 500 answers nothing, leaves the turn `retrying` with a sentence for people,
    ends the claim naming it, and the turn is tried again after the back-off."""
    settings.MOSAIC_ASSISTANT_RETRY_SECONDS = 0.6
    fake_model.status = 500
    backend = ChatCompletionsBackend(base_url=fake_model.url, model="m", idle_timeout=5)
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="x").message
    start_runner(backend=backend)
    failed = wait_for(lambda: ThreadClaim.objects.filter(end_reason__startswith="failed: ").first())
    assert "The model server failed (500)" in failed.end_reason
    [shown] = selectors.thread_messages(human, thread_id=thread.pk)
    assert shown.reply_state == "retrying"
    assert shown.progress.failure.startswith("The model server failed (500)")
    assert pending_messages().filter(pk=turn.pk).exists()
    fake_model.status = 200
    reply = wait_for(lambda: reply_to(turn.pk), timeout=4 * LEASE)
    assert reply.body == "model reply"
    # Back-off: the retry time is at least 0.3 s on, and the second attempt, the one that
    # answered, came no sooner.
    assert shown.progress.retry_at >= turn.created_at + timedelta(seconds=0.3)
    assert reply.created_at >= shown.progress.retry_at
    assert len(fake_model.requests) == 2


def test_runner_shutdown_mid_turn_releases_claim_and_leaves_message_pending(
    human: Actor, start_runner, gated
) -> None:
    """Stopping the runner (shutdown) releases its claims at once: the next runner goes on."""
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="x").message
    runner = start_runner(backend=gated)
    wait_for(lambda: gated.started)
    assert runner.stop(timeout=LEASE)
    claim = ThreadClaim.objects.get()
    assert claim.end_reason == "runner stopped"
    assert pending_messages().filter(pk=turn.pk).exists()
    start_runner()
    assert wait_for(lambda: reply_to(turn.pk)).claim_id != claim.pk


def test_runner_only_serves_its_instance_and_business(
    human: Actor, other_human: Actor, start_runner
) -> None:
    """`--business` and `--instance` narrow what a runner takes up."""
    mine = factories.thread(human, factories.project(human), "mine")
    theirs = factories.thread(other_human, factories.project(other_human), "theirs")
    mine_turn = actions.send_to_thread(human, thread_id=mine.pk, body="x").message
    their_turn = actions.send_to_thread(other_human, thread_id=theirs.pk, body="x").message
    narrowed = start_runner(business_id=human.business_id, instance="assistant")
    wait_for(lambda: reply_to(mine_turn.pk))
    wait_until_looked_again(narrowed)
    assert reply_to(their_turn.pk) is None
    wait_until_looked_again(start_runner(instance="planner"))
    assert reply_to(their_turn.pk) is None


def code_of(call) -> str:
    with pytest.raises(Refusal) as refusal:
        call()
    return refusal.value.code


def test_runner_stop_mid_turn_with_slow_model_lands_nothing_and_run_ends_within_lease(
    tester: Actor, start_runner, fake_model
) -> None:
    """SPEC §7: a stop mid-turn while the model is still thinking: the HTTP request is
    abandoned, 0 replies land, and the run is gone within one lease period."""
    fake_model.delay = 30
    backend = ChatCompletionsBackend(base_url=fake_model.url, model="m", idle_timeout=60)
    thread = factories.thread(tester, factories.project(tester), "check")
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="think hard").message
    runner = start_runner(backend=backend)
    assert fake_model.arrived.wait(5)
    actions.stop_assistant(tester)
    stopped_at = time.monotonic()
    wait_for(lambda: not runner.busy, timeout=LEASE)
    gone_after = time.monotonic() - stopped_at
    fake_model.delay = 0
    wait_until_looked_again(runner)
    assert reply_to(turn.pk) is None
    assert not Message.objects.filter(message_class="RESULT").exists()
    assert len(fake_model.requests) == 1  # the stopped turn is not tried again
    assert gone_after < LEASE
    print(f"stop: run gone {gone_after:.3f}s after the stop (lease {LEASE}s), 0 replies")


def test_runner_turn_longer_than_lease_keeps_claim_by_renewing(
    human: Actor, start_runner, gated
) -> None:
    """SPEC §7: the run renews its lease while it works, so a slow turn is not taken over."""
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="slow").message
    start_runner(backend=gated)
    wait_for(lambda: gated.started)
    claim = held_claim(thread.pk)
    assert claim is not None
    time.sleep(2.5 * LEASE)
    claim.refresh_from_db()
    assert claim.ended_at is None
    gated.release.set()
    reply = wait_for(lambda: reply_to(turn.pk))
    assert reply.claim_id == claim.pk
    wait_for(lambda: held_claim(thread.pk) is None)
    claim.refresh_from_db()
    assert claim.end_reason == "done"


def test_runner_sweep_ends_dead_claim_promptly_without_pending_work(
    business: Business, human: Actor, start_runner
) -> None:
    """SPEC §7: a dead run's claim ends `lease-expired` in the trail soon after its lease
    runs out, even where nothing is pending to bring a run to its thread."""
    thread = factories.thread(human, factories.project(human), "work")
    dead = Actor.assistant_run(business_id=business.pk, instance="assistant", run="dead-run")
    claim = factories.claim(dead, thread)
    start_runner()
    wait_for(lambda: ThreadClaim.objects.filter(pk=claim.pk, ended_at__isnull=False), timeout=3)
    claim.refresh_from_db()
    assert (claim.end_reason, claim.ended_by) == ("lease-expired", "system")
    assert TrailRow.objects.filter(
        text="system to assistant: claim of dead-run ended (lease-expired)"
    )


def test_runner_api_refuses_bad_concurrency_and_double_start(start_runner) -> None:
    """The in-process API: `start()` once, `stop(timeout)` answers whether every thread ended."""
    from runner.service import Runner

    with pytest.raises(ValueError):
        Runner(concurrency=0)
    runner = start_runner(concurrency=1)
    with pytest.raises(RuntimeError):
        runner.start()
    assert runner.stop(timeout=5) is True
