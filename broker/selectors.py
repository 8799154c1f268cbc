"""The broker's reads. Each is a verb (R22 applies) and reads only the actor's view.

Lists are in ascending id order and take `limit` and one cursor (SPEC §6): `after` gives the
first rows with a greater id, `before` the last rows with a smaller id, neither the newest.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import (
    BooleanField,
    Count,
    F,
    Func,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce, Substr

from broker import fields, paths, policy, refusals, replies, thread_rows
from broker.access import access_tester_switch, access_thread, verb
from broker.actors import Actor, ActorKind
from broker.models import (
    HUMAN,
    RESERVED_ADDRESSES,
    Decision,
    Instance,
    Message,
    MessageClass,
    Project,
    Step,
    Thread,
    TrailRow,
)
from broker.refusals import Refusal

M = TypeVar("M", bound=Model)
MessageT = TypeVar("MessageT", bound=Message)


@dataclass(frozen=True)
class Counted:
    """A page of the actor's messages view and the total in that view."""

    rows: list[Message]
    count: int


def page(
    rows: QuerySet[M],
    *,
    after: int | None = None,
    before: int | None = None,
    limit: int | None,
    within_thread: bool = False,
) -> list[M]:
    """One page of `rows` by id, per SPEC §6's cursors; always returned oldest first.

    `within_thread`: all of `rows` are one thread's (`thread_rows.in_thread`), read in the
    (thread, id) index's order, the same order."""
    size = fields.clean_limit(limit)
    after = fields.clean_cursor(after, what="after")
    before = fields.clean_cursor(before, what="before")
    if after is not None and before is not None:
        raise Refusal(refusals.INVALID, "Give one cursor: after or before.")
    oldest_first: tuple[str, ...] = ("pk",)
    newest_first: tuple[str, ...] = ("-pk",)
    if within_thread:
        oldest_first, newest_first = thread_rows.OLDEST_FIRST, thread_rows.NEWEST_FIRST
    if after is not None:
        return list(rows.filter(pk__gt=after).order_by(*oldest_first)[:size])
    if before is not None:
        rows = rows.filter(pk__lt=before)
    return list(reversed(rows.order_by(*newest_first)[:size]))


@verb("project.list", ActorKind.HUMAN, ActorKind.TESTER)
def list_projects(
    actor: Actor, *, after: int | None = None, before: int | None = None, limit: int | None = None
) -> list[Project]:
    """The business's projects; both sides see every project (threads are what is owned)."""
    return page(
        Project.objects.filter(business_id=actor.business_id),
        after=after,
        before=before,
        limit=limit,
    )


class WrittenByNoPerson(Func):
    """A message's `from_role` is neither person's, with the two addresses written into the SQL
    as constants: a database proves a partial index (`message_unread`) covers a query only from
    constants, never from parameters."""

    template = "NOT (%(expressions)s IN ({}))".format(
        ", ".join(f"'{address}'" for address in RESERVED_ADDRESSES)
    )
    output_field = BooleanField()
    conditional = True

    def __init__(self) -> None:
        super().__init__(F("from_role"))


# What a thread's shape reads besides its row, read with it: its instance's name and, for a
# branch (R24), its source's current name.
THREAD_SHAPE = ("instance", "branched_from")


def with_inbox(threads: QuerySet[Thread]) -> QuerySet[Thread]:
    """`threads` with what the inbox shows of each, read in the same query whatever the number
    of threads: the newest message's time and the start of its body (`Thread.preview`), and
    `unread`, the messages after the owner's read mark that no person wrote (replies, notices).

    Only its owner's side writes in a thread as a person (R1), so "no person" is "not the
    owner's side"; said this way, the count reads the partial index `message_unread`, which
    holds only such messages. Nothing is stored per send for it."""
    newest = Message.objects.filter(thread=OuterRef("pk")).order_by("-pk")
    unread = (
        Message.objects.filter(thread=OuterRef("pk"), pk__gt=Coalesce(OuterRef("read_up_to"), 0))
        .filter(WrittenByNoPerson())
        .order_by()
        .values("thread")
        .annotate(count=Count("pk"))
        .values("count")
    )
    # The annotations fill the attributes `Thread` declares for them (an empty thread's values
    # otherwise); the stubs' plugin takes that for a redefinition.
    return threads.annotate(  # type: ignore[no-redef]
        last_message_at=Subquery(newest.values("created_at")[:1]),
        last_body=Subquery(
            newest.annotate(head=Substr("body", 1, fields.PREVIEW_READ + 1)).values("head")[:1]
        ),
        unread=Coalesce(Subquery(unread), 0),
    )


def inbox_thread(actor: Actor, *, thread_id: int) -> Thread:
    """The actor's own thread as its list shows it (`with_inbox`).

    Precondition: the verb that asks has checked the thread is the actor's (`access_thread`).
    """
    threads = Thread.objects.filter(
        pk=thread_id, project__business_id=actor.business_id, owner=policy.owner(actor)
    ).select_related(*THREAD_SHAPE)
    return with_inbox(threads).get()


@verb("instance.list", ActorKind.HUMAN, ActorKind.TESTER)
def list_instances(actor: Actor) -> list[Instance]:
    """The business's instances, by name: a thread names one (both sides see its name), and the
    tester's OpenAI-compatible endpoint offers each as a model (SPEC §6.1). Few, from the
    business file: not paged."""
    return list(
        Instance.objects.filter(business_id=actor.business_id)
        .select_related("role", "business")
        .order_by("name")
    )


# The thread list's two orders: by id, as every list (SPEC §6), or the inbox's (`by_activity`).
BY_ID = "id"
BY_ACTIVITY = "activity"
THREAD_ORDERS = (BY_ID, BY_ACTIVITY)


@verb("thread.list", ActorKind.HUMAN, ActorKind.TESTER)
def list_threads(
    actor: Actor,
    *,
    project_id: int | None = None,
    query: str | None = None,
    archived: bool = False,
    order: str = BY_ID,
    after: int | None = None,
    before: int | None = None,
    below: int | None = None,
    limit: int | None = None,
) -> list[Thread]:
    """R3: only `owner(actor)`'s threads. The human's list leaves tester threads out entirely.

    Threads the owner archived are listed only when `archived` asks for them, and then alone.
    `order` is `BY_ID` (ids and SPEC §6's cursors `after` and `before`) or `BY_ACTIVITY` (the
    inbox's order, paged by `below`, one of the actor's threads: the page lists those after it).
    """
    if order not in THREAD_ORDERS:
        raise Refusal(refusals.INVALID, "order must be id or activity.")
    threads = with_inbox(
        Thread.objects.filter(
            project__business_id=actor.business_id,
            owner=policy.owner(actor),
            archived_at__isnull=not archived,
        ).select_related(*THREAD_SHAPE)
    )
    if project_id is not None:
        threads = threads.filter(project_id=project_id)
    if query:
        # Searches the actor's own threads only: the owner filter above comes first. The
        # business's messages are searched on their own, where an index serves the search
        # (`message_body_search` on PostgreSQL), and their threads matched by id: no join of
        # every thread with every message, no DISTINCT over the result.
        matching = Message.objects.filter(business_id=actor.business_id, body__icontains=query)
        threads = threads.filter(Q(name__icontains=query) | Q(pk__in=matching.values("thread_id")))
    if order == BY_ID:
        if below is not None:
            raise Refusal(refusals.INVALID, "below pages the activity order; give after or before.")
        return page(threads, after=after, before=before, limit=limit)
    if after is not None or before is not None:
        raise Refusal(refusals.INVALID, "The activity order pages with below, not after or before.")
    return by_activity(threads, below=_listed_thread(actor, below), limit=limit)


# The most threads whose name matches a search that one search returns.
SEARCH_THREADS = 20


@dataclass(frozen=True)
class MessageHit:
    """A message of the actor's own thread that a search found, with where it is."""

    id: int
    thread: int
    thread_name: str
    project: int
    project_name: str
    archived: bool
    from_role: str
    created_at: datetime
    snippet: str


@dataclass(frozen=True)
class SearchHits:
    """A search of every project: the threads whose name matches, and one page of messages."""

    threads: list[Thread]
    messages: list[MessageHit]


@verb("messages.search", ActorKind.HUMAN, ActorKind.TESTER)
def search(
    actor: Actor, *, query: str, before: int | None = None, limit: int | None = None
) -> SearchHits:
    """R3, R1: the actor's own threads in every project whose name holds `query`, and the
    messages of those threads whose body holds it, newest first, paged by `before` (a message
    id: the page is the matches older than it). Case is ignored. Archived threads are searched
    too, and say so.

    The owner reads every message of its thread (`thread_messages`), and only those (R20: the
    tester nothing of the human's, the human nothing of the tester's): a message is a hit only
    when its thread is `owner(actor)`'s. The messages are searched on their own, where an index
    serves the search (`message_body_search` on PostgreSQL), and their threads matched by id
    among the owner's, as `list_threads` does: no join of every thread with every message.

    The threads come on the first page only (`before` not given): at most SEARCH_THREADS, the
    newest first."""
    query = fields.clean_search(query)
    owned = Thread.objects.filter(project__business_id=actor.business_id, owner=policy.owner(actor))
    threads: list[Thread] = []
    if before is None:
        threads = list(
            with_inbox(
                owned.filter(name__icontains=query).select_related("instance", "project")
            ).order_by("-pk")[:SEARCH_THREADS]
        )
    found = Message.objects.filter(
        business_id=actor.business_id,
        body__icontains=query,
        thread_id__in=owned.values("pk"),
    ).select_related("thread__project")
    rows = page(found, before=before, limit=limit)
    return SearchHits(
        threads=threads,
        messages=[_message_hit(message, query) for message in reversed(rows)],
    )


def _message_hit(message: Message, query: str) -> MessageHit:
    thread = message.thread
    assert thread is not None  # matched among the owner's threads
    return MessageHit(
        id=message.pk,
        thread=thread.pk,
        thread_name=thread.name,
        project=thread.project_id,
        project_name=thread.project.name,
        archived=thread.archived,
        from_role=message.from_role,
        created_at=message.created_at,
        snippet=fields.snippet(message.body, query),
    )


def _listed_thread(actor: Actor, thread_id: int | None) -> Thread | None:
    """The place of one of the actor's own threads in the inbox's order, for `below`; any
    other id (the other side's, another business's, none) is the same `invalid` (R1, R3)."""
    cursor = fields.clean_cursor(thread_id, what="below")
    if cursor is None:
        return None
    found = (
        Thread.objects.filter(
            pk=cursor, project__business_id=actor.business_id, owner=policy.owner(actor)
        )
        .only("pk", "active_at", "pinned_at")
        .first()
    )
    if found is None:
        raise Refusal(refusals.INVALID, "below must be one of your threads.")
    return found


def by_activity(
    threads: QuerySet[Thread], *, below: Thread | None, limit: int | None
) -> list[Thread]:
    """One page of `threads` in the inbox's order: pinned threads first, then the others, each
    by last activity, newest first (`Thread.active_at`; the newer thread first on a tie);
    `below`, a listed thread, starts the page after it.

    Pinned threads and the others are two reads, each walking an index in this order
    (`thread_owner_pinned`, `thread_owner_activity`) and stopping at the page's end: never a
    sort of the owner's threads, however many. The second read is skipped when the first
    fills the page. A thread unpinned between the two reads is in both: it is listed once, where
    the first read put it. (One statement for both walks, `pk IN (…) OR pk IN (…)`, kept one
    snapshot but cost PostgreSQL a scan of the owner's threads: 45 ms against 8.5 at 20,000.)"""
    size = fields.clean_limit(limit)
    parts = [threads.filter(pinned_at__isnull=False), threads.filter(pinned_at__isnull=True)]
    if below is not None:
        parts = parts[0 if below.pinned else 1 :]
        parts[0] = parts[0].filter(
            Q(active_at__lt=below.active_at) | Q(active_at=below.active_at, pk__lt=below.pk)
        )
    found: dict[int, Thread] = {}
    for part in parts:
        if len(found) == size:
            break
        for thread in part.order_by("-active_at", "-pk")[: size - len(found)]:
            found.setdefault(thread.pk, thread)
    return list(found.values())


@verb("thread.messages", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def thread_messages(
    actor: Actor,
    *,
    thread_id: int,
    after: int | None = None,
    before: int | None = None,
    limit: int | None = None,
) -> list[Message]:
    """R1: a thread's messages, to its owner only; each turn with its reply state (SPEC §7.1)
    and its steps (SPEC §7.2)."""
    thread = access_thread(actor, thread_id=thread_id)
    rows = with_turn_start(
        Message.objects.filter(thread_rows.in_thread(thread.pk)).select_related("progress")
    )
    return with_steps(page(rows, after=after, before=before, limit=limit, within_thread=True))


def with_turn_start(messages: QuerySet[Message]) -> QuerySet[Message]:
    """Each reply with the time of the message it answers (`Message.turn_created_at`, from
    which its shape gives a RESULT's `duration_ms`), read in the same query: a join on the
    answered message's key, no query per row."""
    # The attribute is declared on the model (None where no read annotated it); the stubs'
    # plugin takes that for a redefinition.
    return messages.annotate(turn_created_at=F("in_reply_to__created_at"))  # type: ignore[no-redef]


@dataclass(frozen=True)
class ThreadUsage:
    """The tokens a thread's replies recorded (SPEC §7.1's `usage`), summed; replies that
    recorded none count 0."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@verb("thread.read", counts_as="thread.messages")
def read_thread(actor: Actor, *, thread_id: int) -> tuple[Thread, ThreadUsage]:
    """R1: the actor's own thread as its list shows it, and its replies' tokens summed by one
    aggregate query. What it tells comes from the thread's messages, so R22 counts it as
    reading them (`thread.messages`)."""
    thread = access_thread(actor, thread_id=thread_id)
    sums = Message.objects.filter(
        thread_rows.in_thread(thread.pk), message_class=MessageClass.RESULT
    ).aggregate(
        prompt=Sum("prompt_tokens", default=0), completion=Sum("completion_tokens", default=0)
    )
    usage = ThreadUsage(
        prompt_tokens=int(sums["prompt"]), completion_tokens=int(sums["completion"])
    )
    return inbox_thread(actor, thread_id=thread.pk), usage


@verb("thread.carried", counts_as="thread.messages")
def carried_messages(actor: Actor, *, thread_id: int, limit: int | None = None) -> list[Message]:
    """R1, R24: the conversation a branch of the actor's carries, oldest first, the newest
    `limit` of it; empty for a thread that is no branch. Part of reading the thread's
    messages, so R22 counts it as `thread.messages`."""
    thread = access_thread(actor, thread_id=thread_id)
    size = fields.clean_limit(limit)
    found: list[Message] = []
    for segment in reversed(paths.carried_segments(thread)):
        if len(found) == size:
            break
        rows = with_turn_start(segment.rows().select_related("progress")).order_by(
            *paths.TRANSCRIPT_NEWEST_FIRST
        )
        found += rows[: size - len(found)]
    return with_steps(list(reversed(found)))


def with_steps(messages: list[MessageT]) -> list[MessageT]:
    """Load the steps of the turns among `messages` (`Message.loaded_steps`): one query, and
    none when no turn's progress row (read with it) counts a step."""
    turns = {
        message.pk: message
        for message in messages
        if (progress := message.progress_or_none) is not None and progress.steps
    }
    for step in steps_of(turns):
        turn = turns[step.turn_id]
        turn.loaded_steps = (*turn.loaded_steps, step)
    return messages


def steps_of(turn_ids: Collection[int]) -> list[Step]:
    """The stored steps of these turns, oldest first; no query for none. Precondition: the
    caller read the turns through an owner check (R1)."""
    if not turn_ids:
        return []
    return list(Step.objects.filter(turn_id__in=list(turn_ids)).order_by("pk"))


# The most turns of one thread whose reply state one read returns.
REPLIES_LIMIT = 100


@dataclass(frozen=True)
class ReplyView:
    """A turn's reply as its thread's owner sees it now (SPEC §7.1)."""

    turn: int
    state: str
    retry_at: datetime | None
    failure: str
    # The reply so far while `working`; never a record.
    draft: str
    # The RESULT's id once `answered`.
    result: int | None
    # SPEC §7.2: its stored steps, and the call running now (never a record).
    steps: tuple[Step, ...] = ()
    calling: dict[str, Any] | None = None


@verb("thread.replies", counts_as="thread.messages")
def thread_replies(actor: Actor, *, thread_id: int, known: Collection[int] = ()) -> list[ReplyView]:
    """R1: the replies of the actor's own thread still owed, and of the `known` turns whatever
    their state (a known RESULT names its turn), oldest first. The reply state is part of the
    message shape, so R22 counts this as reading the messages (`thread.messages`)."""
    thread = access_thread(actor, thread_id=thread_id)
    result = Message.objects.filter(
        in_reply_to=OuterRef("pk"), message_class=MessageClass.RESULT
    ).values("pk")[:1]
    answered = Message.objects.filter(
        thread=thread, pk__in=known, message_class=MessageClass.RESULT
    ).values("in_reply_to")
    turns = (
        Message.objects.filter(thread=thread, message_class=MessageClass.REQUEST)
        .filter(
            Q(pk__in=replies.owed_turns().filter(thread=thread).values("pk"))
            | Q(pk__in=known)
            | Q(pk__in=answered)
        )
        .select_related("progress")
        .annotate(result=Subquery(result))
        .order_by("pk")[:REPLIES_LIMIT]
    )
    views = []
    for turn in with_steps(list(turns)):
        progress = turn.progress_or_none
        views.append(
            ReplyView(
                turn=turn.pk,
                state=str(turn.reply_state),
                retry_at=progress.retry_at if progress else None,
                failure=progress.failure if progress else "",
                draft=progress.draft if progress else "",
                result=turn.result,
                steps=turn.loaded_steps,
                calling=progress.calling if progress else None,
            )
        )
    return views


def _addressed_to(actor: Actor) -> QuerySet[Message]:
    """R12, R20: the messages addressed to the actor's own address, and nothing else."""
    return Message.objects.filter(business_id=actor.business_id, to_role=actor.role)


@verb("messages.view", ActorKind.HUMAN, ActorKind.TESTER)
def messages_view(
    actor: Actor, *, after: int | None = None, before: int | None = None, limit: int | None = None
) -> Counted:
    """The actor's messages view and its count: `to_role` is `human`, or `tester`."""
    view = _addressed_to(actor)
    rows = page(with_turn_start(view), after=after, before=before, limit=limit)
    return Counted(rows=rows, count=view.count())


@verb("message.receive", ActorKind.HUMAN, ActorKind.TESTER, ActorKind.RUN)
def receive_messages(
    actor: Actor, *, after: int | None = None, limit: int | None = None
) -> list[Message]:
    """The messages addressed to the actor after its cursor, oldest first."""
    return page(_addressed_to(actor), after=after if after is not None else 0, limit=limit)


@verb("trail.read", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def read_trail(
    actor: Actor, *, after: int | None = None, before: int | None = None, limit: int | None = None
) -> list[TrailRow]:
    """R20: the human reads every row (tester rows labelled, R16); the tester only its own.

    The tester's rows come only while its switch is on, in the same query: a Console's read
    after each row costs one query, not two. A page that comes back empty asks the switch on
    its own, so a tester that is off is refused, never shown an empty trail."""
    rows = TrailRow.objects.filter(business_id=actor.business_id)
    if actor.is_tester:
        rows = rows.filter(tester_visible=True, business__tester_enabled=True)
    found = page(rows, after=after, before=before, limit=limit)
    if not found:
        access_tester_switch(actor)
    return found


@verb("inbox.read", ActorKind.HUMAN)
def read_inbox(
    actor: Actor, *, after: int | None = None, before: int | None = None, limit: int | None = None
) -> list[Decision]:
    """R19: the decisions routed to the human."""
    return page(
        Decision.objects.filter(business_id=actor.business_id, route_to=HUMAN),
        after=after,
        before=before,
        limit=limit,
    )
