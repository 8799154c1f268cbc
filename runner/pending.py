"""Which turns wait for a reply (SPEC §7, §7.1), and which threads a runner may take up next.

A turn is *pending work* while its reply state is `pending`, `working` or `retrying`
(`broker.replies.owed_turns`): nothing answered it, no stop ended it, it has not failed. A
stopped or failed turn is never worked on again, and never holds up the turns after it.

These reads serve the runner across every business, so they are not actor verbs; they hand
out ids only, and everything a run writes goes through the broker's verbs as that run.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, Min, OuterRef, QuerySet
from django.utils import timezone

from broker.models import Message, ReplyState, ThreadClaim, TurnProgress
from broker.replies import owed_turns


@dataclass(frozen=True)
class PendingThread:
    """A thread with at least one pending message, and whom a run of it acts as."""

    thread_id: int
    business_id: int
    instance: str
    first_message_id: int

    @property
    def pair(self) -> tuple[int, str]:
        """What a run claims: the thread, for the instance (R23)."""
        return (self.thread_id, self.instance)


def pending_messages(
    *, business_id: int | None = None, instance: str | None = None, thread_id: int | None = None
) -> QuerySet[Message]:
    """Turns owed a reply in id order, optionally of one business, instance or thread. One
    query; each comes with its progress row (`Message.progress_or_none`)."""
    rows = owed_turns().select_related("progress")
    if business_id is not None:
        rows = rows.filter(business_id=business_id)
    if instance is not None:
        rows = rows.filter(to_role=instance)
    if thread_id is not None:
        rows = rows.filter(thread_id=thread_id)
    return rows.order_by("pk")


def pending_threads(
    *,
    limit: int,
    business_id: int | None = None,
    instance: str | None = None,
    exclude: Collection[tuple[int, str]] = (),
    now: datetime | None = None,
) -> list[PendingThread]:
    """(thread, instance) pairs a runner may take up now, oldest pending message first. One
    query. An instance consulted in a thread (R23) is a pair of its own, beside the thread's.

    Left out: pairs another run holds on a live lease (an expired lease is picked up again:
    `claim.open` ends it `lease-expired`), pairs in `exclude` (the caller's own), and pairs with
    a turn waiting for its retry time (an instance answers its turns of a thread in order).
    """
    now = now or timezone.now()
    held = ThreadClaim.objects.filter(
        thread=OuterRef("thread"),
        instance__name=OuterRef("to_role"),
        ended_at__isnull=True,
        lease_expires_at__gt=now,
    )
    waiting = TurnProgress.objects.filter(
        thread=OuterRef("thread"),
        message__to_role=OuterRef("to_role"),
        state=ReplyState.RETRYING,
        retry_at__gt=now,
    )
    rows = owed_turns().exclude(Exists(held)).exclude(Exists(waiting))
    if business_id is not None:
        rows = rows.filter(business_id=business_id)
    if instance is not None:
        rows = rows.filter(to_role=instance)
    # One clause an instance, its threads as a list: a busy runner excludes dozens of pairs on
    # every poll.
    threads_of: dict[str, list[int]] = {}
    for thread_id, excluded in exclude:
        threads_of.setdefault(excluded, []).append(thread_id)
    for excluded, thread_ids in threads_of.items():
        rows = rows.exclude(to_role=excluded, thread_id__in=thread_ids)
    grouped = (
        rows.values("thread_id", "business_id", "to_role")
        .annotate(first=Min("pk"))
        .order_by("first")[:limit]
    )
    return [
        PendingThread(
            thread_id=row["thread_id"],
            business_id=row["business_id"],
            instance=row["to_role"],
            first_message_id=row["first"],
        )
        for row in grouped
    ]
