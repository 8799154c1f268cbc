"""One run: claim a thread, answer its owed turns in id order, release it (SPEC §7, §7.1).

Every write names the claim (R12), so a run whose claim ended — stopped, revoked, expired —
can store nothing: its reply is refused `claim-ended` and dropped. Each turn goes `working`
while the backend writes, its draft kept on the turn as it streams; the RESULT ends it
`answered`. A transient failure leaves it `retrying` and releases the thread until its retry
time; a permanent one, or the last attempt, ends it `failed` and the run goes on to the next
turn: one broken turn never makes a thread unanswerable.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from contextlib import suppress
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from broker import actions, refusals, steps
from broker.actors import Actor
from broker.models import ClaimEnd, Message, MessageClass, ReplyState
from broker.refusals import Refusal
from broker.replies import ReplyRecord
from broker.signals import TurnEnd, turn_ended
from broker.steps import ToolCall
from broker.tools import Toolbox, read_toolbox
from runner.backends import Reply, ReplyBackend, ReplyFailed, TurnCancelled
from runner.backends.base import CallResult
from runner.claims import try_claim
from runner.lease import Held, LeaseKeeper
from runner.pending import PendingThread, pending_messages
from runner.turns import Turn, read_turn

logger = logging.getLogger("mosaic.runner")

# Sentences for people; the runner decides on the ClaimEnd beside them.
SHUTDOWN_REASON = "runner stopped"
FAILED_PREFIX = "failed: "
REASON_LENGTH = 200
# How often a run waiting for a consulted instance's answer (R23) looks for it, in seconds.
CONSULT_POLL = 0.1


class RunOutcome(enum.Enum):
    NOT_CLAIMED = "not claimed"  # another run holds the thread, or is taking it
    DONE = "done"  # every pending message answered, claim released
    STOPPED = "stopped"  # the claim ended under the run (R13, R14, lease); nothing more sent
    FAILED = "failed"  # a turn waits for its retry, or the run broke; the thread is let go
    SHUT_DOWN = "shut down"  # the runner is stopping; claim released, the rest stays pending


@dataclass(frozen=True)
class ClaimTools:
    """`TurnTools` for one turn of one claim: each call a step of the turn (`broker.steps`),
    made through the broker's verbs as the run. A consultation (R23) waits for its answer,
    which is what the model is told; `cancel` (the claim ended) ends the wait."""

    actor: Actor
    claim_id: int
    turn_id: int
    toolbox: Toolbox
    cancel: threading.Event

    def call(self, call: ToolCall) -> CallResult:
        try:
            step = steps.begin_step(
                self.actor, claim_id=self.claim_id, turn_id=self.turn_id, call=call
            ) or steps.call_tool(
                self.actor,
                claim_id=self.claim_id,
                turn_id=self.turn_id,
                call=call,
                toolbox=self.toolbox,
            )
        except Refusal as refusal:
            if refusal.code == refusals.CLAIM_ENDED:
                raise TurnCancelled from refusal
            raise
        consulted_id = steps.consulted_turn(step)
        consulted = self.await_answer(consulted_id) if consulted_id is not None else None
        return CallResult(outcome=step.outcome, content=steps.model_result(step, consulted))

    def await_answer(self, turn_id: int) -> steps.Consultation:
        """The consulted turn once it is answered, stopped or failed. Past
        MOSAIC_CONSULT_TIMEOUT seconds the run gives up on it (`message.consult_expire`): the
        turn fails, so a late answer never lands."""
        timeout = float(settings.MOSAIC_CONSULT_TIMEOUT)
        deadline = time.monotonic() + timeout
        while (found := steps.consultation(turn_id)).waiting:
            if time.monotonic() >= deadline:
                failure = f"No answer came within {timeout:g} seconds."
                try:
                    actions.expire_consultation(
                        self.actor, claim_id=self.claim_id, consult_id=turn_id, failure=failure
                    )
                except Refusal as refusal:
                    if refusal.code == refusals.CLAIM_ENDED:
                        raise TurnCancelled from refusal
                    raise
                return steps.consultation(turn_id)
            if self.cancel.wait(CONSULT_POLL):
                raise TurnCancelled
        return found


@dataclass
class Drafts:
    """The `Draft` callback of one turn: stores the reply so far on the turn at most every
    MOSAIC_DRAFT_INTERVAL seconds (each store nudges the thread's sockets). A draft is not a
    record, so one that cannot be stored is let go."""

    actor: Actor
    claim_id: int
    turn_id: int
    interval: float
    stored_at: float = float("-inf")

    def __call__(self, text: str) -> None:
        now = time.monotonic()
        if now - self.stored_at < self.interval or not text:
            return
        self.stored_at = now
        try:
            actions.draft_turn(self.actor, claim_id=self.claim_id, turn_id=self.turn_id, text=text)
        except (Refusal, DatabaseError):
            # Stopped meanwhile (the lease keeper cancels the turn), or the database is busy.
            logger.debug("run=%s turn=%s draft not kept", self.actor.run, self.turn_id)


def record_of(reply: Reply) -> ReplyRecord:
    return ReplyRecord(
        model=reply.model or None,
        finish_reason=reply.finish_reason or None,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        first_token_ms=reply.first_token_ms,
    )


def clip(body: str) -> str:
    """A reply the broker accepts: within the body limit, never empty."""
    limit: int = settings.MOSAIC_BODY_MAX
    if len(body) > limit:
        body = body[: limit - 1] + "…"
    return body if body.strip() else "(no reply text)"


def run_thread(
    candidate: PendingThread,
    *,
    run: str,
    backend: ReplyBackend,
    keeper: LeaseKeeper,
    shutting_down: threading.Event,
) -> RunOutcome:
    """Take up one thread as run `run` and answer it until nothing there is pending."""
    actor = Actor.assistant_run(
        business_id=candidate.business_id, instance=candidate.instance, run=run
    )
    claim = try_claim(actor, thread_id=candidate.thread_id)
    if claim is None:
        return RunOutcome.NOT_CLAIMED
    held = keeper.watch(actor, claim_id=claim.pk, thread_id=claim.thread_id)
    try:
        toolbox = read_toolbox(business_id=actor.business_id, instance=actor.role)
        outcome = _answer(
            actor, held, backend=backend, toolbox=toolbox, shutting_down=shutting_down
        )
    except Exception as error:
        # A bug or a database error: release with a back-off rather than leave the claim to
        # expire and be retried at once, over and over. If even that fails, the lease runs out.
        logger.exception("run=%s claim=%s failed", run, claim.pk)
        with suppress(Exception):
            _release(
                actor,
                claim.pk,
                ClaimEnd.FAILED,
                f"{FAILED_PREFIX}run error ({type(error).__name__})",
            )
        outcome = RunOutcome.FAILED
    finally:
        keeper.forget(claim.pk)
    logger.info("run=%s thread=%s claim=%s %s", run, claim.thread_id, claim.pk, outcome.value)
    return outcome


def _answer(
    actor: Actor,
    held: Held,
    *,
    backend: ReplyBackend,
    toolbox: Toolbox,
    shutting_down: threading.Event,
) -> RunOutcome:
    claim_id = held.claim_id
    try:
        while True:
            turns = list(
                pending_messages(thread_id=held.thread_id, instance=actor.role).select_related(
                    "thread"
                )
            )
            if not turns:
                actions.end_claim(actor, claim_id=claim_id, how=ClaimEnd.DONE)
                return RunOutcome.DONE
            for turn in turns:
                if shutting_down.is_set():
                    raise TurnCancelled
                waiting = _retry_time(turn)
                if waiting is not None:
                    # Turns are answered in order: the thread waits for this one's retry.
                    _release(actor, claim_id, ClaimEnd.FAILED, f"{FAILED_PREFIX}{waiting}")
                    return RunOutcome.FAILED
                taken = _take_turn(actor, held, turn, backend=backend, toolbox=toolbox)
                if taken == ReplyState.RETRYING:
                    break  # read again: the thread waits for this turn's retry
    except TurnCancelled:
        if held.ended:
            return RunOutcome.STOPPED
        _release(actor, claim_id, ClaimEnd.SHUT_DOWN, SHUTDOWN_REASON)
        return RunOutcome.SHUT_DOWN
    except Refusal as refusal:
        if refusal.code == refusals.CLAIM_ENDED:
            return RunOutcome.STOPPED
        raise


def _retry_time(turn: Message) -> str | None:
    """Why the turn is not due yet (it waits to be retried), or None when it is."""
    progress = turn.progress_or_none
    if progress is None or progress.state != ReplyState.RETRYING or progress.retry_at is None:
        return None
    if progress.retry_at <= timezone.now():
        return None
    return f"{progress.failure} Retrying at {progress.retry_at:%H:%M:%S} UTC."


def _take_turn(
    actor: Actor, held: Held, turn: Message, *, backend: ReplyBackend, toolbox: Toolbox
) -> ReplyState:
    """`_attempt_turn`, and `turn_ended` with how it ended, however it ended."""
    began = time.monotonic()
    replies: list[Reply] = []
    end = TurnEnd.FAILED  # an unexpected error: it is released as failed
    try:
        state = _attempt_turn(actor, held, turn, backend=backend, toolbox=toolbox, replies=replies)
        end = TurnEnd(state.value)
        return state
    except TurnCancelled:
        end = TurnEnd.STOPPED if held.ended else TurnEnd.SHUT_DOWN
        raise
    except Refusal as refusal:
        end = TurnEnd.STOPPED if refusal.code == refusals.CLAIM_ENDED else TurnEnd.FAILED
        raise
    finally:
        turn_ended.send(
            sender=_take_turn,
            instance=actor.role,
            state=end,
            seconds=time.monotonic() - began,
            reply=replies[0] if end == TurnEnd.ANSWERED else None,
        )


def _attempt_turn(
    actor: Actor,
    held: Held,
    turn: Message,
    *,
    backend: ReplyBackend,
    toolbox: Toolbox,
    replies: list[Reply],
) -> ReplyState:
    """One attempt at a turn, per R12: the reply lands (`answered`), or the turn is left
    `retrying` or `failed`; the state it is left in is returned, and the backend's reply, when
    it wrote one, added to `replies`.

    Raises TurnCancelled when the claim ended meanwhile (the reply is dropped), and Refusal
    `claim-ended` when a write finds it ended.
    """
    started = actions.start_turn(actor, claim_id=held.claim_id, turn_id=turn.pk)
    if started is None:
        return ReplyState.FAILED  # it had used every attempt
    tools = ClaimTools(
        actor=actor,
        claim_id=held.claim_id,
        turn_id=turn.pk,
        toolbox=toolbox.answering(turn.from_role),
        cancel=held.cancel,
    )
    drafts = Drafts(
        actor=actor,
        claim_id=held.claim_id,
        turn_id=turn.pk,
        interval=float(settings.MOSAIC_DRAFT_INTERVAL),
    )
    try:
        reply = backend.reply(_settled(turn, tools), tools=tools, cancel=held.cancel, draft=drafts)
    except ReplyFailed as failure:
        if held.ended:
            raise TurnCancelled from failure
        logger.warning("run=%s turn=%s failed: %s", actor.run, turn.pk, failure.sentence)
        return _fail(actor, held, turn, failure)
    except TurnCancelled:
        raise
    except Exception as error:
        # A backend is to classify its failures; one that raised anything else is retried.
        logger.exception("run=%s turn=%s: backend error", actor.run, turn.pk)
        unexpected = ReplyFailed(
            f"The assistant failed unexpectedly ({type(error).__name__}).", transient=True
        )
        return _fail(actor, held, turn, unexpected)
    replies.append(reply)
    if held.ended:
        # Stop means stop: the reply is dropped (the claim would refuse it anyway).
        raise TurnCancelled
    try:
        actions.send_message(
            actor,
            to=turn.from_role,
            message_class=MessageClass.RESULT,
            in_reply_to=turn.pk,
            claim_id=held.claim_id,
            body=clip(reply.text),
            record=record_of(reply),
        )
    except Refusal as refusal:
        if refusal.code == refusals.CLAIM_ENDED:
            raise
        # The lists or the turn no longer allow this reply: trying again would not help.
        logger.warning("run=%s turn=%s reply refused %s", actor.run, turn.pk, refusal.code)
        refused = ReplyFailed(f"The reply was refused ({refusal.code}).", transient=False)
        return _fail(actor, held, turn, refused)
    return ReplyState.ANSWERED


def _settled(turn: Message, tools: ClaimTools) -> Turn:
    """The turn as its backend sees it, once the answers of the consultations an earlier
    attempt made (R23) are in: a retried turn waits for them rather than ask again."""
    read = read_turn(turn)
    waiting = [done.consulting for done in read.done if done.consulting is not None]
    for consulted in waiting:
        tools.await_answer(consulted)
    return read_turn(turn) if waiting else read


def _fail(actor: Actor, held: Held, turn: Message, failure: ReplyFailed) -> ReplyState:
    """Record a failed attempt: `retrying` while attempts are left for a transient failure,
    else `failed`."""
    progress = actions.fail_turn(
        actor,
        claim_id=held.claim_id,
        turn_id=turn.pk,
        failure=failure.sentence,
        transient=failure.transient,
        retry_after=failure.retry_after,
    )
    return ReplyState(progress.state)


def _release(actor: Actor, claim_id: int, how: ClaimEnd, reason: str) -> None:
    """End the run's claim `how`; one that ended already needs nothing more."""
    try:
        actions.end_claim(actor, claim_id=claim_id, how=how, reason=reason[:REASON_LENGTH])
    except Refusal as refusal:
        if refusal.code != refusals.CLAIM_ENDED:
            raise
