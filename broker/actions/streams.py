"""The business's streams (trail rows, messages, events) and the locks a write takes.

The business's stream lock makes a stream's rows commit in id order (`appending`,
`appending_to_thread`) and comes before any row lock (`locked_threads`); the trusted
`do_record_*` helpers append to the streams under it. The lowest module of `broker.actions`:
it imports none of the others.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from django.db.models import QuerySet

from broker import events, policy, refusals, replies
from broker.access import TAKE_STREAM_LOCK, access_thread, stream_lock_key
from broker.actors import Actor
from broker.inserts import Insert, insert_of, mark_saved
from broker.models import (
    Event,
    EventKind,
    Message,
    MessageClass,
    ReplyState,
    Thread,
    ThreadClaim,
    TrailKind,
    TrailRow,
    Via,
)
from broker.refusals import Refusal
from broker.replies import ReplyRecord


def do_lock_streams(business_id: int) -> None:
    """Hold the business's stream lock until the transaction ends (PostgreSQL).

    Readers resume after the last id they saw (SPEC §6), so the rows of a stream — trail rows,
    messages, decisions — must commit in id order: a row that commits after one with a greater
    id would be skipped for good. PostgreSQL hands out ids at insert, and two writers could
    commit out of turn; under this lock they take turns per business. SQLite writers take turns
    already (transactions begin IMMEDIATE).

    Precondition: inside a transaction. Taken first, before any row lock (`appending`), so
    every writer locks in one order; a writer that reached here late would still be correct.
    """
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {TAKE_STREAM_LOCK}", stream_lock_key(business_id))


# The business whose stream lock the current transaction holds (`appending`).
_streams_locked: ContextVar[int | None] = ContextVar("streams_locked", default=None)


@contextmanager
def _holding_streams(business_id: int) -> Iterator[None]:
    """Mark the current transaction as holding the business's stream lock (`do_record_trail`
    checks it); the caller has just taken the lock."""
    token = _streams_locked.set(business_id)
    try:
        yield
    finally:
        _streams_locked.reset(token)


@contextmanager
def appending(business_id: int) -> Iterator[None]:
    """A transaction that may append to the business's streams: the stream lock comes first."""
    with transaction.atomic():
        do_lock_streams(business_id)
        with _holding_streams(business_id):
            yield


@contextmanager
def appending_to_thread(actor: Actor, *, thread_id: int) -> Iterator[Thread]:
    """`appending` for a verb on one of the actor's threads, yielding the thread, read and
    locked (`access_thread`). The stream lock rides in that read, taken before the thread's
    row lock as everywhere: one round trip fewer for every turn on PostgreSQL."""
    with transaction.atomic():
        thread = access_thread(actor, thread_id=thread_id, lock=True, take_streams=True)
        with _holding_streams(actor.business_id):
            yield thread


def locked_threads(*, skip_locked: bool = False) -> QuerySet[Thread]:
    """Threads whose rows the query locks until the transaction ends: FOR NO KEY UPDATE, as
    every lock of a thread's row (`broker.access.access_thread`'s SQL says it again), so that
    a row that only references the thread still inserts — the deadlock between two runners
    this prevents is in `runner.claims.try_claim`."""
    return Thread.objects.select_for_update(of=("self",), no_key=True, skip_locked=skip_locked)


def do_record_trail(
    actor: Actor,
    *,
    business_id: int,
    thread: Thread | None,
    message: Message | None,
    to_role: str,
    text: str,
    kind: TrailKind,
    via: str | None = None,
) -> TrailRow:
    """Store one trail row from the actor (its role and run) to `to_role`, labelled per R16, of
    `kind` (what Consoles decide on), naming its thread's current name, and nudge the trail
    after commit.

    Precondition: inside the transaction that stores what the row describes, which took the
    stream lock first (`appending`). Checked, on every database, without a query: a row
    stored outside that lock could commit out of id order and be skipped by readers for good.
    """
    row = _trail_row(
        actor,
        business_id=business_id,
        thread=thread,
        message=message,
        to_role=to_role,
        text=text,
        kind=kind,
        via=via,
    )
    row.save()
    _nudge_trail(row)
    return row


def _trail_row(
    actor: Actor,
    *,
    business_id: int,
    thread: Thread | None,
    message: Message | None,
    to_role: str,
    text: str,
    kind: TrailKind,
    via: str | None,
) -> TrailRow:
    """`do_record_trail`'s row, checked and not yet stored."""
    if _streams_locked.get() != business_id:
        raise RuntimeError("A trail row is stored only inside appending(business_id).")
    return TrailRow(
        business_id=business_id,
        thread=thread,
        message=message,
        from_role=actor.role,
        from_run=actor.run,
        to_role=to_role,
        actor_role=actor.role,
        actor_run=actor.run,
        text=f"{policy.trail_label(from_role=actor.role, to_role=to_role)}: {text}",
        kind=kind,
        thread_name=thread.name if thread else None,
        via=via,
        tester_visible=policy.tester_sees(
            thread_owner=thread.owner if thread else None, from_role=actor.role, to_role=to_role
        ),
    )


def _nudge_trail(row: TrailRow) -> None:
    events.push_after_commit(
        events.trail_group(row.business_id), type=events.TRAIL_NUDGE, row_id=row.pk
    )


def do_record_message(
    actor: Actor,
    *,
    thread: Thread | None,
    to_role: str,
    message_class: str,
    body: str,
    in_reply_to: Message | None = None,
    request: Event | None = None,
    claim: ThreadClaim | None = None,
    holder: str,
    record: ReplyRecord | None = None,
    via: Via | None = None,
    version_of_id: int | None = None,
    last_write: bool = False,
) -> Message:
    """Store a message from the actor, its trail row, and nudge the thread after commit.
    `via` is the channel a human's or tester's message came through (None for the others);
    `version_of_id`, on an owner's turn, the first version of the turn it versions (R24);
    `last_write`: the transaction writes nothing after it (`do_store_message`), which a
    RESULT, moving its turn afterwards, never is.

    The one place a thread's last activity moves (`Thread.active_at`, the inbox's order): to
    the message's time, in the same transaction, under the business's stream lock.

    A RESULT ends the turn it answers `answered` in the same transaction, with what the model
    server reported about it (`record`). A new turn has no progress row (`pending`).

    Precondition: the caller has checked ownership, the lists (R8–R11) and R10, holds the
    thread's row lock when there is a thread, and passes `holder`, the run of the thread's
    open claim ("" when none or no thread), read under that lock.
    """
    record = record or ReplyRecord()
    message = Message(
        business_id=actor.business_id,
        thread=thread,
        from_role=actor.role,
        from_run=actor.run,
        to_role=to_role,
        message_class=message_class,
        body=body,
        in_reply_to=in_reply_to,
        request=request,
        holder=holder,
        claim=claim,
        model=record.model,
        finish_reason=record.finish_reason,
        prompt_tokens=record.prompt_tokens,
        completion_tokens=record.completion_tokens,
        first_token_ms=record.first_token_ms,
        via=via,
        version_of_id=version_of_id,
    )
    trail = _trail_row(
        actor,
        business_id=actor.business_id,
        thread=thread,
        message=message,
        to_role=to_role,
        text=body,
        kind=TrailKind.MESSAGE,
        via=via,
    )
    if last_write and message_class == MessageClass.RESULT:
        raise ValueError("A RESULT moves its turn after it is stored: never the last write.")
    do_store_message(message, trail, last_write=last_write)
    if message_class == MessageClass.REQUEST:
        # Known without a read: a new turn has no progress yet.
        Message.progress.related.set_cached_value(message, None)
    elif (
        message_class == MessageClass.RESULT
        and in_reply_to is not None
        and in_reply_to.message_class == MessageClass.REQUEST
        and not replies.do_move(in_reply_to, ReplyState.ANSWERED)
    ):
        raise Refusal(refusals.INVALID, "This turn has ended; it takes no reply.")
    _nudge_trail(trail)
    if thread is not None:
        thread.active_at = message.created_at
        events.push_after_commit(
            events.thread_group(thread.pk), type=events.THREAD_NUDGE, row_id=message.pk
        )
        if message_class == MessageClass.REQUEST:
            events.wake_runners_after_commit()
    return message


def do_store_message(
    message: Message,
    trail: TrailRow,
    *,
    one_statement: bool | None = None,
    last_write: bool = False,
) -> None:
    """Insert `message` and its trail row, and move its thread's `active_at` to the message's
    time: on PostgreSQL in one statement, one round trip where three were; elsewhere in three
    (`one_statement` chooses, for the test that holds the two ways to the same rows).

    `last_write`: the transaction writes nothing after these rows. When the one statement is
    also the whole transaction's last (`_commits_alone`), its COMMIT rides in the same round
    trip, so the business's stream lock is let go a round trip sooner; Django's commit at the
    block's end then finds nothing to do. The stream lock is marked as let go, so a trail row
    stored afterwards, against the caller's word, raises (`_trail_row`) instead of committing
    out of id order.

    The rows are the ORM's (`broker.inserts`). In the one statement each step reads what the
    one before it returned: the trail row names the message's id, and the thread's update
    finds its thread through the message, so it runs after the message's insert and the
    guard that insert fires (`broker_message_thread_instance`, which reads the thread).
    """
    inserted = insert_of(message)
    row = insert_of(trail, leave_out=("message_id",))
    db = connections[DEFAULT_DB_ALIAS]
    thread_table = db.ops.quote_name(Thread._meta.db_table)
    active_at = Thread._meta.get_field("active_at").get_db_prep_save(message.created_at, db)
    if one_statement is None:
        one_statement = db.vendor == "postgresql"
    commit = one_statement and last_write and _commits_alone(db)
    with db.cursor() as cursor:
        if one_statement:
            statement = (
                f"WITH m AS (INSERT INTO {inserted.table} ({', '.join(inserted.columns)}) "
                f"VALUES ({inserted.placeholders()}) RETURNING id, thread_id), "
                f"t AS (INSERT INTO {row.table} ({', '.join(row.columns)}, message_id) "
                f"VALUES ({row.placeholders()}, (SELECT id FROM m)) RETURNING id), "
                f"u AS (UPDATE {thread_table} SET active_at = %s "
                "WHERE id = (SELECT thread_id FROM m)) "
                "SELECT m.id, t.id FROM m, t"
            )
            if commit:
                # Simple query protocol (psycopg's client-side binding): two statements, one
                # round trip; the first's result is the one fetched.
                statement += "; COMMIT"
            cursor.execute(statement, [*inserted.values, *row.values, active_at])
            message_id, trail_id = cursor.fetchone()
            if commit:
                _streams_locked.set(None)
        else:
            message_id = _inserted_id(cursor, inserted)
            trail_id = _inserted_id(cursor, row.with_column("message_id", message_id))
            if message.thread_id is not None:
                cursor.execute(
                    f"UPDATE {thread_table} SET active_at = %s WHERE id = %s",
                    [active_at, message.thread_id],
                )
    mark_saved(message, message_id)
    trail.message = message
    mark_saved(trail, trail_id)


def _commits_alone(db: BaseDatabaseWrapper) -> bool:
    """Whether COMMIT may ride on the next statement: the transaction is one atomic block,
    nested in none (a test's own transaction, or an outer block, commits elsewhere)."""
    return len(db.atomic_blocks) == 1


def _inserted_id(cursor: CursorWrapper, insert: Insert) -> int:
    cursor.execute(
        f"INSERT INTO {insert.table} ({', '.join(insert.columns)}) "
        f"VALUES ({insert.placeholders()}) RETURNING id",
        insert.values,
    )
    inserted: int = cursor.fetchone()[0]
    return inserted


def do_record_event(business_id: int, kind: EventKind, body: dict[str, Any]) -> Event:
    """Store one event of the business's log, of `kind`. Precondition: inside the transaction
    that stores what it records."""
    return Event.objects.create(business_id=business_id, kind=kind, body=body)
