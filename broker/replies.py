"""The reply to each turn as it goes (SPEC §7.1): pending, working, answered, stopped,
retrying, failed.

A turn is a `REQUEST` in a thread, sent to an instance: the thread's own, from its owner, or one
the thread's instance consults (R23). Its state lives in a
`TurnProgress` row, written here and nowhere else; a turn without a row is `pending`, so a send
stores nothing extra. Every move names the states it moves from (`OWED`): a final state —
answered, stopped, failed — never changes again, and a turn in one is never worked on again,
so a failed or stopped turn never blocks the turns after it.

Each change nudges the thread's sockets after commit (`events.TURN_NUDGE`); they read the
progress rows like any other row (`chat.consumers.ThreadConsumer`). The helpers named `do_*`
are trusted: the caller (`broker.actions`) has checked the actor and holds the locks.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from broker import events
from broker.models import OWED, Message, MessageClass, ReplyState, TurnProgress

# The longest a turn waits between attempts, whatever the back-off or the server asks.
RETRY_WAIT_MAX = 600.0
FAILURE_LENGTH = 300


@dataclass(frozen=True)
class ReplyRecord:
    """What the model server reported about a reply (SPEC §7.1); None when unknown."""

    model: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_token_ms: int | None = None


def owed_turns() -> QuerySet[Message]:
    """Turns still owed a reply: no row yet, or `pending`, `working` or `retrying`. Unordered.
    Only an instance is ever sent a `REQUEST` in a thread (`actions.send_to_thread`, R23)."""
    return Message.objects.filter(message_class=MessageClass.REQUEST, thread__isnull=False).filter(
        Q(progress__isnull=True) | Q(progress__state__in=OWED)
    )


def retry_delay(attempts: int, *, retry_after: float | None) -> float:
    """Seconds before the next attempt after `attempts` failed transiently.

    The server's `Retry-After` when it gave one; otherwise exponential back-off from
    `MOSAIC_ASSISTANT_RETRY_SECONDS`, with jitter (half to all of the step), so turns that
    failed together do not all come back together. Never more than `RETRY_WAIT_MAX`.
    """
    if retry_after is not None:
        return min(max(retry_after, 0.0), RETRY_WAIT_MAX)
    step = float(settings.MOSAIC_ASSISTANT_RETRY_SECONDS) * 2 ** max(attempts - 1, 0)
    step = min(step, RETRY_WAIT_MAX)
    return random.uniform(step / 2, step)  # jitter, not a secret


def nudge_turn(thread_id: int, turn_id: int) -> None:
    """Tell the thread's sockets, after commit, that the turn's reply changed."""
    events.push_after_commit(events.thread_group(thread_id), type=events.TURN_NUDGE, row_id=turn_id)


def do_move(
    turn: Message,
    state: ReplyState,
    *,
    attempts: int | None = None,
    retry_at: datetime | None = None,
    failure: str = "",
) -> bool:
    """Move an owed turn to `state` (its draft cleared); False when it is final already.

    Precondition: inside a transaction that holds the business's stream lock
    (`actions.appending`) or the open claim on the turn's thread, locked (`access_claim`), so
    no other writer creates the turn's row meanwhile: a turn is moved by the run holding its
    thread's claim, or by a stop that locks the open claims before it moves their turns
    (`do_stop`). A turn read with its progress row (`select_related("progress")`) was read
    under that lock as well: what the read found is still so.
    """
    assert turn.thread_id is not None, "a turn is a thread message"
    changes: dict[str, object] = {
        "state": state,
        "retry_at": retry_at,
        "failure": failure[:FAILURE_LENGTH],
        "draft": "",
        "calling": None,
        "updated_at": timezone.now(),
    }
    if attempts is not None:
        changes["attempts"] = attempts
    rows = TurnProgress.objects.filter(message=turn)
    # A turn read with its progress row, under that lock, and found without one (a first
    # attempt) has nothing to move and nothing to look for: two statements fewer.
    may_have_row = not Message.progress.is_cached(turn) or turn.progress_or_none is not None
    if not (may_have_row and rows.filter(state__in=OWED).update(**changes)):
        if may_have_row and rows.exists():
            return False
        TurnProgress.objects.create(message=turn, thread_id=turn.thread_id, **changes)
    nudge_turn(turn.thread_id, turn.pk)
    return True


def do_stop(turns: Iterable[tuple[int, int]]) -> None:
    """Stop owed turns, given as (turn id, thread id): no reply will ever land for them.

    A turn stopped while `working` keeps its draft, the text it had streamed (SPEC §7.1): its
    owner still sees what was written, as the turn's `partial`, never as a RESULT. Only a
    working turn has a draft (every other move clears it), and `do_draft` writes to working
    turns only, so a run still streaming after the stop changes nothing.

    Precondition: the stream lock is held, and the claims on their threads were ended in the
    same transaction (`actions.stop_assistant`, `actions.end_instance`).
    """
    now = timezone.now()
    turns = list(turns)
    ids = [turn_id for turn_id, _ in turns]
    stopped = {"state": ReplyState.STOPPED, "retry_at": None, "calling": None, "updated_at": now}
    TurnProgress.objects.filter(message_id__in=ids, state__in=OWED).update(**stopped)
    with_rows = set(TurnProgress.objects.filter(message_id__in=ids).values_list("pk", flat=True))
    TurnProgress.objects.bulk_create(
        TurnProgress(message_id=turn_id, thread_id=thread_id, **stopped)
        for turn_id, thread_id in turns
        if turn_id not in with_rows
    )
    for turn_id, thread_id in turns:
        nudge_turn(thread_id, turn_id)


def do_release_working(thread_id: int) -> None:
    """A claim ended without a stop (done, released, expired, shut down): a turn it was
    working on waits again (`pending`), keeping its attempts. Precondition: the claim is
    locked and ending in this transaction."""
    working = list(
        TurnProgress.objects.filter(thread_id=thread_id, state=ReplyState.WORKING).values_list(
            "pk", flat=True
        )
    )
    if not working:
        return
    TurnProgress.objects.filter(pk__in=working, state=ReplyState.WORKING).update(
        state=ReplyState.PENDING, draft="", calling=None, updated_at=timezone.now()
    )
    for turn_id in working:
        nudge_turn(thread_id, turn_id)


def do_draft(turn_id: int, *, thread_id: int, text: str) -> bool:
    """Keep the reply so far on a `working` turn; False when it is no longer working."""
    limit: int = settings.MOSAIC_BODY_MAX
    kept = TurnProgress.objects.filter(
        message_id=turn_id, thread_id=thread_id, state=ReplyState.WORKING
    ).update(draft=text[:limit], updated_at=timezone.now())
    if kept:
        nudge_turn(thread_id, turn_id)
    return bool(kept)


def next_attempt_at(attempts: int, *, retry_after: float | None) -> datetime:
    return timezone.now() + timedelta(seconds=retry_delay(attempts, retry_after=retry_after))
