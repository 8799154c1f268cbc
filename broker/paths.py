"""R24: a thread's conversation, its *path*: what a run is shown and a branch carries.

A thread's messages in transcript order are ordered by their place (`coalesce(in_reply_to,
pk)`: a reply right after the turn it answers), then id. A turn is *superseded* when its group
(the turn's first version and every `version_of` it) has a newer version in the thread; a
superseded turn and the replies to it are not on the path. A branch's path is its source's
path up to and including `branched_at`, as it was then (versions stored after that message
supersede nothing of it), through a source that is itself a branch, then its own messages.

Reads only: the verbs that ask are the callers' (`broker.selectors`, `broker.actions`, the
runner), each having checked the thread is the actor's (R1).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce

from broker.models import Message, Thread

# The order of a path's messages: the transcript's.
TRANSCRIPT_ORDER = ("place", "pk")
TRANSCRIPT_NEWEST_FIRST = ("-place", "-pk")


def place_of(message: Message) -> int:
    """A message's place in its thread's transcript: the turn it answers, or its own id."""
    return message.in_reply_to_id or message.pk


def on_path(rows: QuerySet[Message], *, up_to: int | None = None) -> QuerySet[Message]:
    """`rows`, messages of one thread, less the superseded turns and their replies, each with
    its `place`; `up_to`: only versions up to this id supersede (the path as it was then).

    A message's group is its turn's first version: `version_of` on a version, that of the turn
    it answers on a reply, else the turn itself. It is superseded when a version of that group
    newer than its place exists (one read of the `version_of` index per row)."""
    newer = Message.objects.filter(
        thread_id=OuterRef("thread_id"),
        version_of_id=OuterRef("group"),
        pk__gt=OuterRef("place"),
    )
    if up_to is not None:
        newer = newer.filter(pk__lte=up_to)
    return rows.annotate(
        place=Coalesce("in_reply_to", "pk"),
        group=Coalesce("version_of", "in_reply_to__version_of", "in_reply_to", "pk"),
    ).filter(~Exists(newer))


def up_to_cut(rows: QuerySet[Message], cut: Message) -> QuerySet[Message]:
    """`rows` (annotated by `on_path`) up to and including `cut` in transcript order."""
    at = place_of(cut)
    return rows.filter(Q(place__lt=at) | Q(place=at, pk__lte=cut.pk))


@dataclass(frozen=True)
class Segment:
    """One thread's part of a path: its messages up to and including `cut` (None: all)."""

    thread: Thread
    cut: Message | None

    def rows(self) -> QuerySet[Message]:
        """The segment's messages on the path, unordered (`TRANSCRIPT_ORDER` orders them)."""
        rows = Message.objects.filter(thread_id=self.thread.pk)
        if self.cut is None:
            return on_path(rows)
        return up_to_cut(on_path(rows, up_to=self.cut.pk), self.cut)


def segments(thread: Thread, *, cut: Message | None = None) -> list[Segment]:
    """The thread's path as the threads it runs through, oldest first, the thread's own part
    last; with `cut`, only up to and including that message (of the thread or of what it
    carries). One read of each source thread."""
    own = cut is None or cut.thread_id == thread.pk
    found = [Segment(thread, cut)] if own else []
    if thread.branched_from_id is None or thread.branched_at_id is None:
        return found
    source = Thread.objects.select_related("instance").get(pk=thread.branched_from_id)
    carried_to = (
        Message.objects.get(pk=thread.branched_at_id) if own else cut
    )  # the cut lies in what this thread carries: the source is cut there
    return [*segments(source, cut=carried_to), *found]


def carried_segments(thread: Thread) -> list[Segment]:
    """The segments of what a branch carries (none for a thread that is no branch)."""
    return segments(thread)[:-1]


def last_before(thread: Thread, turn: Message) -> Message | None:
    """The last message of the thread's path before `turn`, one of its turns on the path
    (`turn` itself excluded, and its replies): what a branch of the conversation before it
    carries; the thread's own `branched_at` when its own part has none before it."""
    before = (
        on_path(Message.objects.filter(thread_id=thread.pk))
        # Before the turn's first version: its later versions and their replies are its own.
        .filter(Q(place__lt=turn.version_of_id or turn.pk))
        .order_by(*TRANSCRIPT_NEWEST_FIRST)
        .first()
    )
    if before is not None:
        return before
    if thread.branched_at_id is None:
        return None
    return Message.objects.get(pk=thread.branched_at_id)


def holds(thread: Thread, message: Message) -> bool:
    """Whether `message` is on the thread's path (its own part or what it carries)."""
    return any(
        segment.rows().filter(pk=message.pk).exists()
        for segment in segments(thread)
        if segment.thread.pk == message.thread_id
    )
