"""The turn lifecycle with the real runner (SPEC §7.1): states, drafts, retries, failures, stops.

A scripted backend plays each attempt: it drafts, then replies, fails or waits to be stopped.
The runner's threads must see committed rows, so these tests use transactional databases.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.utils import timezone

from broker import actions, refusals, selectors
from broker.actors import Actor
from broker.models import ClaimEnd, Message, ReplyState, ThreadClaim, TrailRow, TurnProgress
from broker.refusals import Refusal
from runner.backends import Draft, Reply, ReplyFailed, TurnCancelled, TurnTools
from runner.prompt import STOPPED_NOTE, prompt_messages
from runner.turns import Turn
from tests.broker import factories
from tests.support.runners import LEASE
from tests.support.waits import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

# One attempt: given the turn, the draft callback and the cancel flag, reply or raise.
Attempt = Callable[[Turn, Draft, threading.Event], Reply]


@dataclass
class ScriptedBackend:
    """Plays the attempts in `script` in order, one per call; then answers plainly."""

    name: str = "scripted"
    script: list[Attempt] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        self.calls.append(turn.message_id)
        if self.script:
            return self.script.pop(0)(turn, draft, cancel)
        return Reply(text=f"answer to {turn.body}")


def fails(sentence: str, *, transient: bool, retry_after: float | None = None) -> Attempt:
    def attempt(turn: Turn, draft: Draft, cancel: threading.Event) -> Reply:
        raise ReplyFailed(sentence, transient=transient, retry_after=retry_after)

    return attempt


def streams_until_stopped(words: list[str], drafted: threading.Event) -> Attempt:
    """Drafts `words` one by one, then waits, like a slow model, until cancelled."""

    def attempt(turn: Turn, draft: Draft, cancel: threading.Event) -> Reply:
        for index in range(len(words)):
            draft(" ".join(words[: index + 1]))
        drafted.set()
        while not cancel.wait(0.01):
            pass
        raise TurnCancelled

    return attempt


def progress(turn: Message) -> TurnProgress | None:
    return TurnProgress.objects.filter(message=turn).first()


def state_of(turn: Message) -> str:
    row = progress(turn)
    return row.state if row is not None else ReplyState.PENDING


def reply_to(turn: Message) -> Message | None:
    return Message.objects.filter(in_reply_to=turn, message_class="RESULT").first()


@pytest.fixture
def scripted() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture
def fast_retries(settings) -> None:
    settings.MOSAIC_ASSISTANT_RETRY_SECONDS = 0.05
    settings.MOSAIC_DRAFT_INTERVAL = 0.0


def send(actor: Actor, thread, body: str) -> Message:
    return actions.send_to_thread(actor, thread_id=thread.pk, body=body).message


def test_answered_turn_records_what_the_server_reported(
    human: Actor, start_runner, scripted
) -> None:
    """SPEC §7.1: the RESULT keeps model, finish_reason and usage; `length` shows as cut off."""
    thread = factories.thread(human, factories.project(human), "work")
    scripted.script.append(
        lambda turn, draft, cancel: Reply(
            text="a reply cut",
            model="small-1",
            finish_reason="length",
            prompt_tokens=12,
            completion_tokens=3,
            first_token_ms=40,
        )
    )
    turn = send(human, thread, "write a long answer")
    start_runner(backend=scripted)
    reply = wait_for(lambda: reply_to(turn))
    assert (reply.model, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == (
        "small-1",
        "length",
        12,
        3,
    )
    assert reply.first_token_ms == 40 and reply.is_cut_off
    assert state_of(turn) == ReplyState.ANSWERED
    assert progress(turn).attempts == 1


def test_permanent_failure_fails_turn_at_once_and_next_turn_is_answered(
    human: Actor, start_runner, scripted, fast_retries
) -> None:
    """SPEC §7.1: a permanent error fails the turn at once; a failed turn never blocks the
    turns after it."""
    thread = factories.thread(human, factories.project(human), "work")
    scripted.script.append(fails("The prompt is too long for the model.", transient=False))
    first = send(human, thread, "a very long paste")
    second = send(human, thread, "and now?")
    start_runner(backend=scripted)
    wait_for(lambda: reply_to(second))
    row = progress(first)
    assert (row.state, row.failure, row.attempts) == (
        ReplyState.FAILED,
        "The prompt is too long for the model.",
        1,
    )
    assert reply_to(first) is None
    assert scripted.calls == [first.pk, second.pk]  # tried once, never again
    [shown] = [m for m in selectors.thread_messages(human, thread_id=thread.pk) if m.pk == first.pk]
    assert shown.reply_state == ReplyState.FAILED


def test_transient_failure_waits_retry_after_then_answers(
    human: Actor, start_runner, scripted
) -> None:
    """SPEC §7.1: a transient failure with Retry-After waits that long, then tries again."""
    thread = factories.thread(human, factories.project(human), "work")
    scripted.script.append(fails("The model server is busy (429).", transient=True, retry_after=1))
    turn = send(human, thread, "hello")
    start_runner(backend=scripted)
    row = wait_for(lambda: (r := progress(turn)) and r.state == ReplyState.RETRYING and r)
    assert row.failure == "The model server is busy (429)."
    waited = row.retry_at - row.updated_at
    assert timedelta(seconds=0.9) <= waited <= timedelta(seconds=1.1)
    reply = wait_for(lambda: reply_to(turn), timeout=5)
    assert reply.created_at >= row.retry_at
    assert (state_of(turn), progress(turn).attempts) == (ReplyState.ANSWERED, 2)


def test_transient_failures_end_failed_after_the_last_attempt(
    human: Actor, start_runner, scripted, fast_retries, settings
) -> None:
    """SPEC §7.1: five transient failures (MOSAIC_ASSISTANT_ATTEMPTS) and the turn fails."""
    assert settings.MOSAIC_ASSISTANT_ATTEMPTS == 5
    thread = factories.thread(human, factories.project(human), "work")
    scripted.script.extend(
        fails("The model server failed (500).", transient=True) for _ in range(5)
    )
    turn = send(human, thread, "hello")
    start_runner(backend=scripted)
    wait_for(lambda: state_of(turn) == ReplyState.FAILED)
    row = progress(turn)
    assert row.attempts == 5
    assert row.failure == "The model server failed (500). Gave up after 5 attempts."
    assert scripted.calls == [turn.pk] * 5
    assert reply_to(turn) is None


def test_stop_during_retry_wait_stops_the_turn(human: Actor, start_runner, scripted) -> None:
    """SPEC §7.1: a turn waiting for its retry has no run, and a stop still ends it."""
    thread = factories.thread(human, factories.project(human), "work")
    scripted.script.append(fails("The model server is busy.", transient=True, retry_after=60))
    turn = send(human, thread, "hello")
    start_runner(backend=scripted)
    wait_for(lambda: state_of(turn) == ReplyState.RETRYING)
    wait_for(lambda: not ThreadClaim.objects.filter(ended_at__isnull=True).exists())
    stop = actions.stop_assistant(human)
    assert (stop.claims, stop.turns) == ([], [(turn.pk, thread.pk)])
    row = progress(turn)
    assert (row.state, row.retry_at) == (ReplyState.STOPPED, None)
    with pytest.raises(Refusal) as refusal:
        actions.stop_assistant(human)
    assert refusal.value.code == refusals.NOT_HELD


def test_stop_mid_stream_leaves_no_reply_and_the_turn_stopped(
    human: Actor, start_runner, scripted, fast_retries
) -> None:
    """SPEC §7.1: drafts are kept on the working turn; a stop mid-stream ends the turn
    `stopped` keeping what it had streamed (its `partial`), and no reply lands."""
    thread = factories.thread(human, factories.project(human), "work")
    drafted = threading.Event()
    scripted.script.append(streams_until_stopped(["Once", "upon", "a", "time"], drafted))
    turn = send(human, thread, "tell a story")
    start_runner(backend=scripted)
    assert drafted.wait(5)
    row = wait_for(lambda: (r := progress(turn)) and r.draft == "Once upon a time" and r)
    assert row.state == ReplyState.WORKING
    actions.stop_assistant(human, thread_id=thread.pk)
    wait_for(lambda: not ThreadClaim.objects.filter(ended_at__isnull=True).exists(), timeout=LEASE)
    row = progress(turn)
    assert (row.state, row.draft) == (ReplyState.STOPPED, "Once upon a time")
    assert reply_to(turn) is None
    # Drafts are never records: nothing of them reached the trail.
    assert not TrailRow.objects.filter(text__contains="upon").exists()


def test_stopped_partial_reply_is_shown_and_in_the_next_turns_prompt(
    human: Actor, start_runner, scripted, fast_retries
) -> None:
    """SPEC §7.1, R12: the stopped turn shows its partial text (never a RESULT: the thread has
    no reply to it), the run can store nothing after the stop, and the next turn's prompt
    carries the partial reply, marked stopped."""
    thread = factories.thread(human, factories.project(human), "work")
    drafted = threading.Event()
    scripted.script.append(streams_until_stopped(["Once", "upon"], drafted))
    turn = send(human, thread, "tell a story")
    start_runner(backend=scripted)
    assert drafted.wait(5)
    wait_for(lambda: (r := progress(turn)) and r.draft == "Once upon")
    claim = ThreadClaim.objects.get(thread=thread, ended_at__isnull=True)
    actions.stop_assistant(human, thread_id=thread.pk)
    wait_for(lambda: not ThreadClaim.objects.filter(ended_at__isnull=True).exists(), timeout=LEASE)
    # No reply after the stop: the ended claim refuses it, and refuses a later draft too.
    run = Actor.assistant_run(business_id=human.business_id, instance="assistant", run=claim.run)
    with pytest.raises(Refusal) as refusal:
        actions.send_message(
            run,
            to="human",
            body="too late",
            message_class="RESULT",
            in_reply_to=turn.pk,
            claim_id=claim.pk,
        )
    assert refusal.value.code == refusals.CLAIM_ENDED
    assert progress(turn).draft == "Once upon"
    shown = selectors.thread_messages(human, thread_id=thread.pk)
    assert [(m.pk, m.reply_state, m.progress.draft) for m in shown] == [
        (turn.pk, ReplyState.STOPPED, "Once upon")
    ]

    prompts: list[list[dict[str, object]]] = []

    def answers_noting_prompt(turn: Turn, draft: Draft, cancel: threading.Event) -> Reply:
        prompts.append([dict(m) for m in prompt_messages(turn)])
        return Reply(text="and they lived happily")

    scripted.script.append(answers_noting_prompt)
    later = send(human, thread, "go on")
    wait_for(lambda: state_of(later) == ReplyState.ANSWERED)
    assert [(m["role"], m["content"]) for m in prompts[0][1:]] == [
        ("user", "tell a story"),
        ("assistant", f"Once upon\n\n{STOPPED_NOTE}"),
        ("user", "go on"),
    ]
    assert Message.objects.filter(in_reply_to=turn, message_class="RESULT").count() == 0
    assert Message.objects.filter(in_reply_to=later, message_class="RESULT").count() == 1


def test_a_turn_that_used_every_attempt_fails_when_taken_up_again(
    human: Actor, assistant_run: Actor
) -> None:
    """SPEC §7.1: runs that died mid-turn count; the next start fails the turn instead."""
    thread = factories.thread(human, factories.project(human), "work")
    turn = send(human, thread, "hello")
    for _ in range(5):
        claim = factories.claim(assistant_run, thread)
        assert actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=turn.pk) is not None
        ThreadClaim.objects.filter(pk=claim.pk).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert state_of(turn) == ReplyState.WORKING
        actions.reap_claims(Actor.system(business_id=human.business_id))
        # The dead run's turn waits again, its attempt counted.
        assert state_of(turn) == ReplyState.PENDING
    claim = factories.claim(assistant_run, thread)
    assert actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=turn.pk) is None
    row = progress(turn)
    assert (row.state, row.failure) == (
        ReplyState.FAILED,
        "The assistant gave up after 5 attempts.",
    )


def test_final_state_never_changes_again(human: Actor, assistant_run: Actor) -> None:
    """SPEC §7.1: a stopped turn takes no reply and no new attempt."""
    thread = factories.thread(human, factories.project(human), "work")
    turn = send(human, thread, "hello")
    claim = factories.claim(assistant_run, thread)
    actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=turn.pk)
    actions.stop_assistant(human)
    claim = factories.claim(assistant_run, thread)
    with pytest.raises(Refusal) as refusal:
        actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=turn.pk)
    assert refusal.value.code == refusals.INVALID
    assert state_of(turn) == ReplyState.STOPPED


def test_runner_shutdown_mid_turn_leaves_the_turn_pending(
    human: Actor, start_runner, scripted, fast_retries
) -> None:
    """A runner that stops lets its turn wait again for the next runner (attempt counted)."""
    thread = factories.thread(human, factories.project(human), "work")
    drafted = threading.Event()
    scripted.script.append(streams_until_stopped(["Hello"], drafted))
    turn = send(human, thread, "hello")
    runner = start_runner(backend=scripted)
    assert drafted.wait(5)
    assert runner.stop(timeout=5)
    row = progress(turn)
    assert (row.state, row.attempts, row.draft) == (ReplyState.PENDING, 1, "")
    claim = ThreadClaim.objects.get(thread=thread)
    assert claim.ended_how == ClaimEnd.SHUT_DOWN
