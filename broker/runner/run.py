"""One run: claim a thread, answer its pending messages in id order, release it (SPEC §7).

Every write names the claim (R12), so a run whose claim ended — stopped, revoked, expired —
can store nothing: its reply is refused `claim-ended` and dropped. A backend error ends the
claim `failed` (the sentence says why); the message stays pending and is retried after a
back-off.
"""

from __future__ import annotations

import enum
import logging
import threading
from contextlib import suppress
from dataclasses import dataclass

from django.conf import settings

from broker import actions, refusals
from broker.actors import Actor
from broker.models import ClaimEnd, Message, MessageClass
from broker.refusals import Refusal
from broker.runner.backends import ReplyBackend, ReplyFailed, TurnCancelled, no_drafts
from broker.runner.claims import try_claim
from broker.runner.lease import Held, LeaseKeeper
from broker.runner.pending import PendingThread, pending_messages
from broker.runner.turns import read_turn

logger = logging.getLogger("mosaic.runner")

# Sentences for people; the runner decides on the ClaimEnd beside them.
SHUTDOWN_REASON = "runner stopped"
FAILED_PREFIX = "failed: "
REASON_LENGTH = 200


class RunOutcome(enum.Enum):
    NOT_CLAIMED = "not claimed"  # another run holds the thread, or is taking it
    DONE = "done"  # every pending message answered, claim released
    STOPPED = "stopped"  # the claim ended under the run (R13, R14, lease); nothing more sent
    FAILED = "failed"  # the backend failed or the reply was refused; retried after a back-off
    SHUT_DOWN = "shut down"  # the runner is stopping; claim released, the rest stays pending


@dataclass(frozen=True)
class ClaimTools:
    """`TurnTools` for one turn of one claim."""

    actor: Actor
    claim_id: int
    request_id: int | None

    def create_task(self, title: str) -> int:
        if self.request_id is None:
            raise Refusal(refusals.INVALID, "This turn carries no human request to cite (R15).")
        task = actions.create_task(
            self.actor, claim_id=self.claim_id, request_id=self.request_id, title=title
        )
        return task.pk


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
        outcome = _answer(actor, held, backend=backend, shutting_down=shutting_down)
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
    actor: Actor, held: Held, *, backend: ReplyBackend, shutting_down: threading.Event
) -> RunOutcome:
    claim_id = held.claim_id
    try:
        while True:
            pending = list(pending_messages(thread_id=held.thread_id).select_related("thread"))
            if not pending:
                actions.end_claim(actor, claim_id=claim_id, how=ClaimEnd.DONE)
                return RunOutcome.DONE
            for message in pending:
                if shutting_down.is_set():
                    raise TurnCancelled
                _reply(actor, held, message, backend=backend)
    except TurnCancelled:
        if held.ended:
            return RunOutcome.STOPPED
        _release(actor, claim_id, ClaimEnd.SHUT_DOWN, SHUTDOWN_REASON)
        return RunOutcome.SHUT_DOWN
    except ReplyFailed as error:
        logger.warning("run=%s claim=%s reply failed: %s", actor.run, claim_id, error)
        _release(actor, claim_id, ClaimEnd.FAILED, f"{FAILED_PREFIX}{error}")
        return RunOutcome.FAILED
    except Refusal as refusal:
        if refusal.code == refusals.CLAIM_ENDED:
            return RunOutcome.STOPPED
        # The lists or the message no longer allow this reply; retrying at once would spin.
        logger.warning("run=%s claim=%s refused %s", actor.run, claim_id, refusal.code)
        _release(actor, claim_id, ClaimEnd.FAILED, f"{FAILED_PREFIX}reply refused ({refusal.code})")
        return RunOutcome.FAILED


def _reply(actor: Actor, held: Held, message: Message, *, backend: ReplyBackend) -> None:
    """Answer one message per R12, unless the claim ended while the backend worked."""
    turn = read_turn(message)
    tools = ClaimTools(actor=actor, claim_id=held.claim_id, request_id=message.request_id)
    body = backend.reply(turn, tools=tools, cancel=held.cancel, draft=no_drafts).text
    if held.ended:
        # Stop means stop: the reply is dropped (the claim would refuse it anyway).
        raise TurnCancelled
    actions.send_message(
        actor,
        to=message.from_role,
        message_class=MessageClass.RESULT,
        in_reply_to=message.pk,
        claim_id=held.claim_id,
        body=clip(body),
    )


def _release(actor: Actor, claim_id: int, how: ClaimEnd, reason: str) -> None:
    """End the run's claim `how`; one that ended already needs nothing more."""
    try:
        actions.end_claim(actor, claim_id=claim_id, how=how, reason=reason[:REASON_LENGTH])
    except Refusal as refusal:
        if refusal.code != refusals.CLAIM_ENDED:
            raise
