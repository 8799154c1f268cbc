"""The broker's writes. Each public verb checks, then stores, atomically.

Verbs take the actor first and everything else by keyword. Each locks what it races on and
pushes to the channel layer only after commit (`broker.events`). Helpers named `do_*` are
trusted: they state their preconditions and check nothing themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from broker import events, fields, policy, refusals, replies, selectors
from broker.access import (
    TAKE_STREAM_LOCK,
    access_claim,
    access_instance,
    access_message,
    access_thread,
    check_messaging,
    lease_deadline,
    lists_of,
    stream_lock_key,
    verb,
)
from broker.actors import Actor, ActorKind
from broker.models import (
    HUMAN,
    TESTER,
    Business,
    ClaimEnd,
    Decision,
    Event,
    EventKind,
    Instance,
    Message,
    MessageClass,
    Project,
    ReplyState,
    Task,
    Thread,
    ThreadClaim,
    ThreadOpen,
    TrailKind,
    TrailRow,
    TurnProgress,
    Via,
)
from broker.refusals import Refusal
from broker.replies import ReplyRecord

# R15, in words a model can pass on: a tester's turn wrote no `human.input` to cite.
TESTER_TASK_REFUSED = (
    "Not created: this is a test conversation, and a test conversation creates no task (R15)."
)

HUMAN_KIND = ActorKind.HUMAN
TESTER_KIND = ActorKind.TESTER
RUN_KIND = ActorKind.RUN


@dataclass(frozen=True)
class SentTurn:
    """A human's or tester's turn in a thread; `request` is the `human.input` id or None (R7)."""

    message: Message
    request: int | None


@dataclass(frozen=True)
class Stop:
    """What `assistant.stop` ended: open runs' claims, and every turn still owed a reply."""

    claims: list[ThreadClaim]
    # (turn id, thread id) of each turn that became `stopped`.
    turns: list[tuple[int, int]]

    def by_thread(self) -> list[tuple[int, str | None, list[int]]]:
        """(thread, the run that held it or None, its stopped turns), in thread order."""
        runs = {claim.thread_id: claim.run for claim in self.claims}
        turns: dict[int, list[int]] = {thread: [] for thread in runs}
        for turn_id, thread_id in self.turns:
            turns.setdefault(thread_id, []).append(turn_id)
        return [(thread, runs.get(thread), sorted(turns[thread])) for thread in sorted(turns)]


# --- trusted helpers ---------------------------------------------------------------------


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


def do_record_trail(
    *,
    business_id: int,
    thread: Thread | None,
    message: Message | None,
    from_role: str,
    from_run: str,
    to_role: str,
    actor: Actor,
    text: str,
    kind: TrailKind,
    via: str | None = None,
) -> TrailRow:
    """Store one trail row labelled per R16, of `kind` (what Consoles decide on), naming its
    thread's current name, and nudge the trail after commit.

    Precondition: inside the transaction that stores what the row describes, which took the
    stream lock first (`appending`). Checked, on every database, without a query: a row
    stored outside that lock could commit out of id order and be skipped by readers for good.
    """
    if _streams_locked.get() != business_id:
        raise RuntimeError("A trail row is stored only inside appending(business_id).")
    row = TrailRow.objects.create(
        business_id=business_id,
        thread=thread,
        message=message,
        from_role=from_role,
        from_run=from_run,
        to_role=to_role,
        actor_role=actor.role,
        actor_run=actor.run,
        text=f"{policy.trail_label(from_role=from_role, to_role=to_role)}: {text}",
        kind=kind,
        thread_name=thread.name if thread else None,
        via=via,
        tester_visible=policy.tester_sees(
            thread_owner=thread.owner if thread else None, from_role=from_role, to_role=to_role
        ),
    )
    events.push_after_commit(
        events.trail_group(business_id), type=events.TRAIL_NUDGE, row_id=row.pk
    )
    return row


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
) -> Message:
    """Store a message from the actor, its trail row, and nudge the thread after commit.
    `via` is the channel a human's or tester's message came through (None for the others).

    A RESULT ends the turn it answers `answered` in the same transaction, with what the model
    server reported about it (`record`). A new turn has no progress row (`pending`).

    Precondition: the caller has checked ownership, the lists (R8–R11) and R10, holds the
    thread's row lock when there is a thread, and passes `holder`, the run of the thread's
    open claim ("" when none or no thread), read under that lock.
    """
    record = record or ReplyRecord()
    message = Message.objects.create(
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
    )
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
    do_record_trail(
        business_id=actor.business_id,
        thread=thread,
        message=message,
        from_role=actor.role,
        from_run=actor.run,
        to_role=to_role,
        actor=actor,
        text=body,
        kind=TrailKind.MESSAGE,
        via=via,
    )
    if thread is not None:
        events.push_after_commit(
            events.thread_group(thread.pk), type=events.THREAD_NUDGE, row_id=message.pk
        )
        if message_class == MessageClass.REQUEST:
            events.wake_runners_after_commit()
    return message


def do_record_event(business_id: int, kind: EventKind, body: dict[str, Any]) -> Event:
    """Store one event of the business's log, of `kind`. Precondition: inside the transaction
    that stores what it records."""
    return Event.objects.create(business_id=business_id, kind=kind, body=body)


# The ends that stop turns (R13, R14): the verbs that end claims so stop the turns as well.
STOPS = (ClaimEnd.STOPPED, ClaimEnd.INSTANCE_ENDED)


def do_end_claim(
    claim: ThreadClaim, *, actor: Actor, by: str, how: ClaimEnd, reason: str
) -> ThreadClaim:
    """End an open claim `how` (what the runner decides on), with `reason` the sentence for
    people; record `claim.ended` and its trail row.

    Precondition: `claim` is open and locked by the current transaction.
    """
    claim.ended_at = timezone.now()
    claim.ended_by = by
    claim.ended_how = how
    claim.end_reason = reason
    claim.save(update_fields=["ended_at", "ended_by", "ended_how", "end_reason"])
    thread = claim.thread
    if how not in STOPS:
        replies.do_release_working(thread.pk)
    do_record_event(
        thread.project.business_id,
        EventKind.CLAIM_ENDED,
        {
            "claim": claim.pk,
            "thread": thread.pk,
            "run": claim.run,
            "by": by,
            "how": how.value,
            "reason": reason,
        },
    )
    do_record_trail(
        business_id=thread.project.business_id,
        thread=thread,
        message=None,
        from_role=actor.role,
        from_run=actor.run,
        to_role=claim.instance.name,
        actor=actor,
        text=f"claim of {claim.run} ended ({reason})",
        kind=TrailKind.CLAIM_ENDED,
    )
    return claim


def do_expire_claim(claim: ThreadClaim, *, business_id: int) -> ThreadClaim:
    """End a claim whose lease ran out: reason `lease-expired`, ended by the system (SPEC §7).

    Precondition: `claim` is open, locked, and its lease has run out.
    """
    return do_end_claim(
        claim,
        actor=Actor.system(business_id=business_id),
        by="system",
        how=ClaimEnd.LEASE_EXPIRED,
        reason="lease-expired",
    )


def locked_threads(*, skip_locked: bool = False) -> QuerySet[Thread]:
    """Threads whose rows the query locks until the transaction ends: FOR NO KEY UPDATE, as
    every lock of a thread's row (`broker.access.access_thread`'s SQL says it again), so that
    a row that only references the thread still inserts — the deadlock between two runners
    this prevents is in `broker.runner.claims.try_claim`."""
    return Thread.objects.select_for_update(of=("self",), no_key=True, skip_locked=skip_locked)


def _open_claims(business_id: int) -> QuerySet[ThreadClaim]:
    """The business's open claims, locked in id order (one order everywhere: no deadlock)."""
    return (
        ThreadClaim.objects.select_for_update(of=("self",))
        .select_related("thread__project", "instance")
        .filter(ended_at__isnull=True, thread__project__business_id=business_id)
        .order_by("pk")
    )


# --- projects and threads ----------------------------------------------------------------


@verb("project.create", HUMAN_KIND, TESTER_KIND)
def create_project(actor: Actor, *, name: object) -> Project:
    """Create a project of the actor's business; both sides see every project."""
    clean = fields.clean_name(name, what="project name")
    try:
        with transaction.atomic():
            return Project.objects.create(
                business_id=actor.business_id, name=clean, created_by=policy.owner(actor)
            )
    except IntegrityError:
        raise Refusal(refusals.PROJECT_EXISTS, "A project with this name exists.") from None


@verb("thread.create", HUMAN_KIND, TESTER_KIND)
def create_thread(
    actor: Actor, *, project_id: int, name: object, instance: str | None = None
) -> Thread:
    """R2: a thread owned by `owner(actor)`, in any project of the business.

    R18: a name the other side already used in the project refuses `thread-exists`, and
    nothing else about that thread is told.
    """
    clean = fields.clean_name(name, what="thread name")
    project = Project.objects.filter(pk=project_id, business_id=actor.business_id).first()
    if project is None:
        raise Refusal(refusals.NOT_FOUND, "No such project.")
    if instance is None:
        instance = Business.objects.values_list("default_instance", flat=True).get(
            pk=actor.business_id
        )
    target = access_instance(actor, name=instance)
    try:
        with transaction.atomic():
            return Thread.objects.create(
                project=project, name=clean, owner=policy.owner(actor), instance=target
            )
    except IntegrityError:
        raise Refusal(refusals.THREAD_EXISTS, "A thread with this name exists here.") from None


@verb("thread.open", HUMAN_KIND, TESTER_KIND, switch_in_read=True)
def open_thread(actor: Actor, *, thread_id: int) -> ThreadOpen:
    """R1, R2: record that the actor opened its own thread, `by = owner(actor)`."""
    thread = access_thread(actor, thread_id=thread_id)
    return ThreadOpen.objects.create(thread=thread, by=policy.owner(actor))


@verb("thread.send", HUMAN_KIND, TESTER_KIND, switch_in_read=True)
def send_to_thread(actor: Actor, *, thread_id: int, body: object, via: Via = Via.API) -> SentTurn:
    """A turn in the actor's own thread, addressed to the thread's instance.

    R6: stored with the actor's own role and run, whichever channel (`via`, kept beside them)
    it came through. R7: a human's turn writes one `human.input` event and returns its id; a
    tester's writes none and returns None. R9: the lists read the tester as `human` in its own
    thread. One read (the thread, its instance's lists, the tester switch and the claim's
    holder) and the rows it stores.
    """
    text = fields.clean_body(body)
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        instance = thread.instance
        # The sender is the human or the tester, who have no lists: the instance's are all
        # the check reads.
        check_messaging(
            actor,
            sender=actor.role,
            recipient=instance.name,
            thread_owner=thread.owner,
            roles={instance.name: lists_of(instance)},
        )
        request = None
        if actor.is_human:
            request = do_record_event(
                actor.business_id,
                EventKind.HUMAN_INPUT,
                {"thread": thread.pk, "by": actor.username},
            )
        message = do_record_message(
            actor,
            thread=thread,
            to_role=instance.name,
            message_class=MessageClass.REQUEST,
            body=text,
            request=request,
            holder=thread.holder or "",  # type: ignore[attr-defined]
            via=via,
        )
    return SentTurn(message=message, request=request.pk if request else None)


@verb("thread.rename", HUMAN_KIND, TESTER_KIND, switch_in_read=True)
def rename_thread(actor: Actor, *, thread_id: int, name: object) -> Thread:
    """R1: rename the actor's own thread, with one `thread.renamed` trail row. The name's
    limits are those of `thread.create`; R18: a name taken in the project, whoever took it,
    refuses `thread-exists` and tells nothing else. The same name again changes nothing."""
    clean = fields.clean_name(name, what="thread name")
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        if clean == thread.name:
            return thread
        before = thread.name
        thread.name = clean
        try:
            with transaction.atomic():
                thread.save(update_fields=["name"])
        except IntegrityError:
            raise Refusal(refusals.THREAD_EXISTS, "A thread with this name exists here.") from None
        do_record_thread_change(
            actor, thread, kind=TrailKind.THREAD_RENAMED, text=f"renamed “{before}” to “{clean}”"
        )
        return thread


@verb("thread.archive", HUMAN_KIND, TESTER_KIND, switch_in_read=True)
def archive_thread(actor: Actor, *, thread_id: int, archived: bool) -> Thread:
    """R1: archive the actor's own thread (lists leave it out) or bring it back, with one
    `thread.archived` / `thread.unarchived` trail row. Asking for the state it is in changes
    nothing."""
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        if archived == thread.archived:
            return thread
        thread.archived_at = timezone.now() if archived else None
        thread.save(update_fields=["archived_at"])
        kind = TrailKind.THREAD_ARCHIVED if archived else TrailKind.THREAD_UNARCHIVED
        text = "archived the thread" if archived else "brought the thread back from the archive"
        do_record_thread_change(actor, thread, kind=kind, text=text)
        return thread


def change_thread(
    actor: Actor, *, thread_id: int, name: object = None, archived: bool | None = None
) -> Thread:
    """Rename and/or archive the actor's own thread in one transaction (`rename_thread`,
    `archive_thread`: each its own verb, so R22 decides each); the thread as its list shows it.
    Neither asked: `invalid`."""
    if name is None and archived is None:
        raise Refusal(refusals.INVALID, "Give the thread's new name, archived, or both.")
    with appending(actor.business_id):
        if name is not None:
            rename_thread(actor, thread_id=thread_id, name=name)
        if archived is not None:
            archive_thread(actor, thread_id=thread_id, archived=archived)
    return selectors.inbox_thread(actor, thread_id=thread_id)


def do_record_thread_change(actor: Actor, thread: Thread, *, kind: TrailKind, text: str) -> None:
    """The trail row of a change the owner made to its thread, labelled like its turns (R16):
    the owner to the thread's instance; R20 decides who sees it, as for every row.

    Precondition: inside `appending`, the change stored and the thread's instance loaded.
    """
    do_record_trail(
        business_id=actor.business_id,
        thread=thread,
        message=None,
        from_role=actor.role,
        from_run=actor.run,
        to_role=thread.instance.name,
        actor=actor,
        text=text,
        kind=kind,
    )


@verb("thread.mark_read", counts_as="thread.open")
def mark_read(actor: Actor, *, thread_id: int, up_to: int) -> Thread:
    """R1: move the owner's read mark of its own thread forward to message `up_to`, which must
    be a message of that thread (else `invalid`); an older one leaves the mark where it is.

    Reading is opening (it counts as `thread.open`): the mark is the newest message the owner
    has opened. It is not bus traffic and writes no trail row. Returns the thread as its list
    shows it.
    """
    with transaction.atomic():
        thread = access_thread(actor, thread_id=thread_id)
        if not Message.objects.filter(pk=up_to, thread=thread).exists():
            raise Refusal(refusals.INVALID, "up_to must be a message of this thread.")
        # Forward only, decided by the database: two marks racing keep the greater.
        Thread.objects.filter(pk=thread.pk).filter(
            Q(read_up_to__isnull=True) | Q(read_up_to__lt=up_to)
        ).update(read_up_to=up_to)
    return selectors.inbox_thread(actor, thread_id=thread_id)


# --- messages ----------------------------------------------------------------------------


@verb("message.send", HUMAN_KIND, TESTER_KIND, RUN_KIND)
def send_message(
    actor: Actor,
    *,
    to: str,
    body: object,
    message_class: str = MessageClass.MESSAGE,
    in_reply_to: int | None = None,
    claim_id: int | None = None,
    record: ReplyRecord | None = None,
) -> Message:
    """Send a message on the bus (R8–R12).

    A run names its claim (R12) and its message goes in the claim's thread; the human and the
    tester send outside threads, where R9 never applies. A `RESULT` answers `in_reply_to`,
    which must be a message of the same thread.
    """
    text = fields.clean_body(body)
    if actor.kind is RUN_KIND:
        allowed_classes = {MessageClass.RESULT, MessageClass.MESSAGE}
    else:
        allowed_classes = {MessageClass.MESSAGE}
    if message_class not in allowed_classes:
        raise Refusal(refusals.INVALID, f"{actor.kind.value} may not send {message_class}.")
    if message_class == MessageClass.RESULT and in_reply_to is None:
        raise Refusal(refusals.INVALID, "A RESULT must name the message it answers.")
    # Messages are append-only: the one answered is read before the stream lock, one statement
    # fewer under it for every reply (P5: two runners wait on each other's holds of it). A
    # missing one is refused in its turn, after the claim's check.
    answered: Message | None = None
    missing: Refusal | None = None
    if in_reply_to:
        try:
            answered = access_message(actor, message_id=in_reply_to)
        except Refusal as refusal:
            missing = refusal
    with appending(actor.business_id):
        claim = None
        thread = None
        if actor.kind is RUN_KIND:
            if claim_id is None:
                raise Refusal(refusals.INVALID, "A run's message must name its claim.")
            claim = access_claim(actor, claim_id=claim_id)
            thread = claim.thread
        if missing is not None:
            raise missing
        if answered is not None and answered.thread_id != (thread.pk if thread else None):
            raise Refusal(refusals.INVALID, "A reply stays in the thread of what it answers.")
        code = policy.reply_refusal(
            recipient=to, in_reply_to_sender=answered.from_role if answered else None
        )
        if code is not None:
            raise Refusal(code, "A message to the tester must answer one of its messages.")
        check_messaging(
            actor, sender=actor.role, recipient=to, thread_owner=thread.owner if thread else None
        )
        try:
            # No savepoint: a duplicate reply ends the whole transaction, refused. Two
            # statements fewer under the stream lock for every reply.
            with transaction.atomic(savepoint=False):
                return do_record_message(
                    actor,
                    thread=thread,
                    to_role=to,
                    message_class=message_class,
                    body=text,
                    in_reply_to=answered,
                    claim=claim,
                    # The run's claim: its instance's one open claim there (`access_claim`).
                    holder=claim.run if claim else "",
                    record=record if claim else None,
                )
        except IntegrityError:
            # one_result_per_message: the message has its reply already.
            raise Refusal(refusals.INVALID, "This message already has a reply.") from None


@verb("message.consult", RUN_KIND)
def consult(actor: Actor, *, claim_id: int, turn_id: int, to: object, body: object) -> Message:
    """R23: while answering `turn_id`, ask another instance of the business in the claim's
    thread. The question is a turn owed by `to`, answered by that instance's own run under its
    own claim; its RESULT comes back to the asking instance.

    The lists decide who may consult whom (R8, R9, R11), both ways: the question must reach
    `to` and its answer come back, or nothing is asked. A turn that is itself a consultation
    may not consult further (`consult-too-deep`): no ping-pong, and the database refuses a
    message in a thread without the thread's instance at one end anyway.
    """
    text = fields.clean_body(body)
    recipient = fields.clean_name(to, what="instance")
    with appending(actor.business_id):
        claim = access_claim(actor, claim_id=claim_id)
        turn = _owed_turn(claim, turn_id)[0]
        code = policy.consult_refusal(
            asker=actor.role, consulted=recipient, turn_from=turn.from_role
        )
        if code is not None:
            raise Refusal(
                code,
                f"Not sent: {recipient} cannot be consulted while answering "
                f"{turn.from_role} (R23).",
            )
        owner = claim.thread.owner
        roles = check_messaging(actor, sender=actor.role, recipient=recipient, thread_owner=owner)
        check_messaging(
            actor, sender=recipient, recipient=actor.role, thread_owner=owner, roles=roles
        )
        return do_record_message(
            actor,
            thread=claim.thread,
            to_role=recipient,
            message_class=MessageClass.REQUEST,
            body=text,
            claim=claim,
            holder=claim.run,
        )


@verb("message.consult_expire", RUN_KIND)
def expire_consultation(actor: Actor, *, claim_id: int, consult_id: int, failure: str) -> bool:
    """R23: the asking run gives up on its consultation (its own timeout): the turn ends
    `failed` with `failure`, and the consulted instance's run of the thread, if any, ends, so
    a late answer never lands. False when it was answered or ended meanwhile."""
    with appending(actor.business_id):
        claim = access_claim(actor, claim_id=claim_id)
        turn = (
            replies.owed_turns()
            .filter(pk=consult_id, thread_id=claim.thread_id, from_role=actor.role)
            .select_related("progress")
            .first()
        )
        if turn is None:
            return False
        for held in _open_claims(actor.business_id).filter(
            thread_id=claim.thread_id, instance__name=turn.to_role
        ):
            do_end_claim(held, actor=actor, by=actor.run, how=ClaimEnd.FAILED, reason=failure)
        return replies.do_move(turn, ReplyState.FAILED, failure=failure)


# --- stop, instance end, claims ----------------------------------------------------------


@verb("assistant.stop", HUMAN_KIND, TESTER_KIND)
def stop_assistant(
    actor: Actor, *, instance: str | None = None, thread_id: int | None = None
) -> Stop:
    """R13, SPEC §7.1: end the open runs on the actor's own threads, and stop every turn there
    still owed a reply — waiting, working or retrying — and nothing of the other side's.

    `ended_by` is `owner(actor)` and the reason names the side that stopped. `instance` or
    `thread_id` narrow it to one instance or one of the actor's threads (R1 for the thread).
    One stop stops a whole chain (R23): narrowed to an instance, it stops the turns that
    instance's runs are consulting others about too, and their runs. Nothing to stop:
    `not-held`. The human's stop never ends a tester run; the tester's never the human's.
    """
    owner = policy.owner(actor)
    with appending(actor.business_id):
        claims = _open_claims(actor.business_id).filter(thread__owner=policy.owner(actor))
        turns = replies.owed_turns().filter(business_id=actor.business_id, thread__owner=owner)
        if thread_id is not None:
            thread = access_thread(actor, thread_id=thread_id)
            claims = claims.filter(thread=thread)
            turns = turns.filter(thread=thread)
        if instance is not None:
            turns = turns.filter(Q(to_role=instance) | Q(from_role=instance))
        rows = list(turns.values_list("pk", "thread_id", "to_role"))
        if instance is not None:
            # The instance's own runs, and those answering what it consults about: only these
            # claims are locked.
            chain = Q(instance__name=instance)
            for thread_pk, to in {(thread_pk, to) for _, thread_pk, to in rows if to != instance}:
                chain |= Q(thread_id=thread_pk, instance__name=to)
            claims = claims.filter(chain)
        held = list(claims)
        owed = [(pk, thread) for pk, thread, _ in rows]
        if not held and not owed:
            raise Refusal(refusals.NOT_HELD, "Nothing of yours waits for the assistant.")
        reason = policy.stop_reason(actor)
        ended = [
            do_end_claim(claim, actor=actor, by=owner, how=ClaimEnd.STOPPED, reason=reason)
            for claim in held
        ]
        replies.do_stop(owed)
        return Stop(claims=ended, turns=owed)


@verb("instance.end", ActorKind.STAFF)
def end_instance(actor: Actor, *, instance: str) -> list[ThreadClaim]:
    """R14: end every claim the instance holds, the tester's threads included; record who."""
    with appending(actor.business_id):
        target = access_instance(actor, name=instance)
        reason = f"instance ended by {actor.username}"
        ended = [
            do_end_claim(
                claim, actor=actor, by=actor.username, how=ClaimEnd.INSTANCE_ENDED, reason=reason
            )
            for claim in _open_claims(actor.business_id).filter(instance=target)
        ]
        replies.do_stop(
            replies.owed_turns()
            .filter(business_id=actor.business_id, to_role=target.name)
            .values_list("pk", "thread_id")
        )
        do_record_event(
            actor.business_id,
            EventKind.INSTANCE_ENDED,
            {"instance": target.name, "by": actor.username, "claims": [c.pk for c in ended]},
        )
        do_record_trail(
            business_id=actor.business_id,
            thread=None,
            message=None,
            from_role=actor.role,
            from_run=actor.run,
            to_role=target.name,
            actor=actor,
            text=f"{reason}; {len(ended)} claim(s) ended",
            kind=TrailKind.INSTANCE_ENDED,
        )
    return ended


@verb("claim.open", RUN_KIND)
def open_claim(actor: Actor, *, thread_id: int) -> ThreadClaim | None:
    """Claim a thread for the run's instance: one of its own, or one where it is consulted
    (R23); None while another run of the instance holds it.

    A claim whose lease ran out is ended (`lease-expired`) first, so a dead run's thread is
    picked up again.
    """
    with appending(actor.business_id):
        consulted = replies.owed_turns().filter(thread=OuterRef("pk"), to_role=actor.role)
        thread = (
            locked_threads()
            .select_related("project", "instance")
            .filter(pk=thread_id, project__business_id=actor.business_id)
            .filter(Q(instance__name=actor.role) | Exists(consulted))
            .first()
        )
        if thread is not None and thread.instance.name == actor.role:
            instance: Instance | None = thread.instance
        else:  # consulted (R23): the instance is not the thread's
            instance = Instance.objects.filter(
                business_id=actor.business_id, name=actor.role
            ).first()
        if thread is None or instance is None:
            raise Refusal(refusals.NOT_FOUND, "No such thread for this instance.")
        current = _open_claims(actor.business_id).filter(thread=thread, instance=instance).first()
        if current is not None:
            if current.lease_expires_at > timezone.now():
                return None
            do_expire_claim(current, business_id=actor.business_id)
        claim = ThreadClaim.objects.create(
            thread=thread,
            run=actor.run,
            instance=instance,
            lease_expires_at=lease_deadline(),
        )
        do_record_event(
            actor.business_id,
            EventKind.CLAIM_OPENED,
            {"claim": claim.pk, "thread": thread.pk, "run": actor.run},
        )
        return claim


@verb("claim.renew", RUN_KIND)
def renew_claim(actor: Actor, *, claim_id: int) -> ThreadClaim:
    """Extend the lease of the run's open claim (`claim-ended` once it ended)."""
    with transaction.atomic():
        claim = access_claim(actor, claim_id=claim_id)
        claim.lease_expires_at = lease_deadline()
        claim.save(update_fields=["lease_expires_at"])
        return claim


# How a run may end its own claim. Stops, instance ends and expiries are other actors' verbs:
# a run that could write them could make the runner drop turns still owed.
RUN_CLAIM_ENDS = (ClaimEnd.DONE, ClaimEnd.FAILED, ClaimEnd.SHUT_DOWN)


@verb("claim.end", RUN_KIND)
def end_claim(
    actor: Actor, *, claim_id: int, how: ClaimEnd = ClaimEnd.DONE, reason: str = ""
) -> ThreadClaim:
    """Release the run's open claim `how` (one of `RUN_CLAIM_ENDS`, else `invalid`); `reason`
    is the sentence for people, `how` itself when empty."""
    if how not in RUN_CLAIM_ENDS:
        raise Refusal(refusals.INVALID, f"A run ends its claim {', '.join(RUN_CLAIM_ENDS)}.")
    with appending(actor.business_id):
        claim = access_claim(actor, claim_id=claim_id)
        end = ClaimEnd(how)
        return do_end_claim(claim, actor=actor, by=actor.run, how=end, reason=reason or end.value)


# --- a run's turns (SPEC §7.1) -----------------------------------------------------------


def _owed_turn(claim: ThreadClaim, turn_id: int) -> tuple[Message, int]:
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


@verb("turn.start", RUN_KIND)
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
        turn, attempts = _owed_turn(claim, turn_id)
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


@verb("turn.draft", RUN_KIND)
def draft_turn(actor: Actor, *, claim_id: int, turn_id: int, text: str) -> bool:
    """Keep the reply written so far on the run's working turn (never a record: the RESULT
    is); False once the turn is no longer working. Nudges the thread's sockets."""
    with transaction.atomic():
        claim = access_claim(actor, claim_id=claim_id)
        return replies.do_draft(turn_id, thread_id=claim.thread_id, text=text)


@verb("turn.fail", RUN_KIND)
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
        turn, attempts = _owed_turn(claim, turn_id)
        limit: int = settings.MOSAIC_ASSISTANT_ATTEMPTS
        if transient and attempts < limit:
            retry_at = replies.next_attempt_at(attempts, retry_after=retry_after)
            replies.do_move(turn, ReplyState.RETRYING, retry_at=retry_at, failure=failure)
        else:
            if transient:
                failure = f"{failure} Gave up after {attempts} attempts."
            replies.do_move(turn, ReplyState.FAILED, failure=failure or "The reply failed.")
        return TurnProgress.objects.get(message=turn)


# --- tasks, decisions, notices -----------------------------------------------------------


@verb("task.create", RUN_KIND)
def create_task(actor: Actor, *, claim_id: int, request_id: int | None, title: object) -> Task:
    """R15: a task from a human's request in the claim's thread; a tester turn has none
    (`request_id` None), and is told so in words a model can pass on.

    The database refuses a request that is not a `human.input` event as well.
    """
    clean = fields.clean_name(title, what="task title")
    with transaction.atomic():
        claim = access_claim(actor, claim_id=claim_id)
        request = (
            Event.objects.filter(
                pk=request_id, business_id=actor.business_id, kind=EventKind.HUMAN_INPUT
            ).first()
            if request_id is not None
            else None
        )
        if request is None or request.body.get("thread") != claim.thread_id:
            if claim.thread.owner == TESTER:
                raise Refusal(refusals.INVALID, TESTER_TASK_REFUSED)
            raise Refusal(refusals.INVALID, "A task needs a human's request in this thread.")
        task = Task.objects.create(
            business_id=actor.business_id, request=request, title=clean, created_by_run=actor.run
        )
        do_record_event(
            actor.business_id,
            EventKind.TASK_CREATED,
            {"task": task.pk, "request": request.pk, "run": actor.run},
        )
        return task


@verb("decision.create", RUN_KIND)
def create_decision(
    actor: Actor, *, claim_id: int, body: object, route_to: str = HUMAN
) -> Decision:
    """R19: route a decision to an inbox; needs cross-role authority for it.

    It goes through the messaging check first, so R11 keeps a tester thread's run out of the
    human's inbox whatever its role's authority.
    """
    text = fields.clean_body(body)
    with appending(actor.business_id):
        claim = access_claim(actor, claim_id=claim_id)
        roles = check_messaging(
            actor, sender=actor.role, recipient=route_to, thread_owner=claim.thread.owner
        )
        code = policy.decision_refusal(sender_lists=roles.get(actor.role), route_to=route_to)
        if code is not None:
            raise Refusal(code, f"{actor.role} has no authority to route decisions there.")
        decision = Decision.objects.create(
            business_id=actor.business_id,
            thread=claim.thread,
            claim=claim,
            from_role=actor.role,
            from_run=actor.run,
            route_to=route_to,
            body=text,
        )
        do_record_event(
            actor.business_id,
            EventKind.DECISION_CREATED,
            {"decision": decision.pk, "run": actor.run, "route_to": route_to},
        )
        do_record_trail(
            business_id=actor.business_id,
            thread=claim.thread,
            message=None,
            from_role=actor.role,
            from_run=actor.run,
            to_role=route_to,
            actor=actor,
            text=f"decision: {text}",
            kind=TrailKind.DECISION,
        )
        return decision


@verb("notice.post", ActorKind.SYSTEM, ActorKind.STAFF)
def post_notice(actor: Actor, *, body: object, thread_id: int | None = None) -> Message:
    """R17: a system notice goes to one of the human's threads, never a tester's.

    Without `thread_id`, the human's most recent thread. A tester thread's id is answered as a
    missing one.
    """
    text = fields.clean_body(body)
    with appending(actor.business_id):
        human = Business.objects.values_list("human", flat=True).get(pk=actor.business_id)
        threads = (
            locked_threads()
            .select_related("project", "instance")
            .filter(project__business_id=actor.business_id, owner=human)
        )
        if thread_id is not None:
            threads = threads.filter(pk=thread_id)
        thread = threads.order_by("-pk").first()
        if thread is None:
            raise Refusal(refusals.NOT_FOUND, "No thread of the human's to notify.")
        notifier = Actor.assistant_run(
            business_id=actor.business_id, instance=thread.instance.name, run=actor.run
        )
        open_claim = ThreadClaim.objects.filter(
            thread=thread, instance=thread.instance, ended_at__isnull=True
        ).first()
        return do_record_message(
            notifier,
            thread=thread,
            to_role=HUMAN,
            message_class=MessageClass.NOTICE,
            body=text,
            holder=open_claim.run if open_claim else "",
        )


# --- the lease reaper --------------------------------------------------------------------


@verb("claim.reap", ActorKind.SYSTEM)
def reap_claims(actor: Actor) -> list[ThreadClaim]:
    """SPEC §7: end every open claim of the business whose lease ran out (`lease-expired`).

    `claim.open` ends an expired claim too, but only when a run comes for that thread; the
    reaper makes a dead run's end appear in the trail promptly. On PostgreSQL a claim whose
    run is renewing it right now is re-read after the renewal and left alone.
    """
    with appending(actor.business_id):
        expired = _open_claims(actor.business_id).filter(lease_expires_at__lte=timezone.now())
        return [do_expire_claim(claim, business_id=actor.business_id) for claim in expired]
