"""A run's attempts at a turn (SPEC §7.1): `turn.start`, `turn.draft` and `turn.fail`, and
`owed_turn`, the read of a turn its claim owes (a consultation reads it too). The reply itself
is a message (`broker.actions.messages`); the turn's states live in `broker.replies`.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from broker import refusals, replies
from broker.access import access_claim, verb
from broker.actions.streams import appending
from broker.actors import Actor, ActorKind
from broker.models import Message, ReplyState, ThreadClaim, TurnProgress
from broker.refusals import Refusal


def owed_turn(claim: ThreadClaim, turn_id: int) -> tuple[Message, int]:
    """A turn of the claim's thread owed by the claim's instance, and the attempts runs made at
    it (one read, its progress row with it); else `invalid`."""
    turn = (
        replies.owed_turns()
        .filter(pk=turn_id, thread_id=claim.thread_id, to_role=claim.instance.name)
        .select_related("progress")
        .first()
    )
    if turn is None:
        raise Refusal(refusals.INVALID, "No turn of this thread waits for a reply by that id.")
    progress = turn.progress_or_none
    return turn, progress.attempts if progress is not None else 0


@verb("turn.start", ActorKind.RUN)
def start_turn(actor: Actor, *, claim_id: int, turn_id: int) -> TurnProgress | None:
    """The run begins an attempt at a turn of its claim's thread: `working`.

    A turn that has used every attempt (`MOSAIC_ASSISTANT_ATTEMPTS`, runs that died counted)
    fails instead, and None is returned: the run goes on to the next turn.

    Appends to no stream, so it leaves the business's stream lock to those that do (on
    PostgreSQL it would make every start wait for every other writer of the business, and
    two runners take turns): the claim's row lock is what keeps the turn's progress row to
    this run, as for `turn.draft` (`replies.do_move`).
    """
    with transaction.atomic():
        claim = access_claim(actor, claim_id=claim_id)
        turn, attempts = owed_turn(claim, turn_id)
        limit: int = settings.MOSAIC_ASSISTANT_ATTEMPTS
        if attempts >= limit:
            replies.do_move(
                turn,
                ReplyState.FAILED,
                failure=f"The assistant gave up after {attempts} attempts.",
            )
            return None
        replies.do_move(turn, ReplyState.WORKING, attempts=attempts + 1)
        return TurnProgress.objects.get(message=turn)


@verb("turn.draft", ActorKind.RUN)
def draft_turn(actor: Actor, *, claim_id: int, turn_id: int, text: str) -> bool:
    """Keep the reply written so far on the run's working turn (never a record: the RESULT
    is); False once the turn is no longer working. Nudges the thread's sockets."""
    with transaction.atomic():
        claim = access_claim(actor, claim_id=claim_id)
        return replies.do_draft(turn_id, thread_id=claim.thread_id, text=text)


@verb("turn.fail", ActorKind.RUN)
def fail_turn(
    actor: Actor,
    *,
    claim_id: int,
    turn_id: int,
    failure: str,
    transient: bool,
    retry_after: float | None = None,
) -> TurnProgress:
    """An attempt at the run's working turn failed; `failure` says why, for people.

    A transient failure with attempts left waits (`retrying`, `retry_at` from the server's
    Retry-After or the back-off); any other ends the turn `failed`, and the turns after it
    go on.
    """
    with appending(actor.business_id):
        claim = access_claim(actor, claim_id=claim_id)
        turn, attempts = owed_turn(claim, turn_id)
        limit: int = settings.MOSAIC_ASSISTANT_ATTEMPTS
        if transient and attempts < limit:
            retry_at = replies.next_attempt_at(attempts, retry_after=retry_after)
            replies.do_move(turn, ReplyState.RETRYING, retry_at=retry_at, failure=failure)
        else:
            if transient:
                failure = f"{failure} Gave up after {attempts} attempts."
            replies.do_move(turn, ReplyState.FAILED, failure=failure or "The reply failed.")
        return TurnProgress.objects.get(message=turn)
