"""Which messages wait for a reply (SPEC §7), and which threads a runner may take up next.

A message is *pending* when it is a turn (`REQUEST`) sent to the thread's instance, nothing
has answered it yet (`RESULT` in reply to it), and no stop came after it: no claim on its
thread was ended by `assistant.stop` (R13) or by the instance's end (R14) at or after the
moment it was stored. A stopped message is never answered later.

These reads serve the runner across every business, so they are not actor verbs; they hand
out ids only, and everything a run writes goes through the broker's verbs as that run.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Exists, F, Min, OuterRef, QuerySet
from django.utils import timezone

from broker.models import ClaimEnd, Message, MessageClass, ThreadClaim

# The ends that are stops: `assistant.stop` (R13) and `instance.end` (R14). A release, an
# expiry, a shutdown or a failure leaves the turn owed.
STOPS = (ClaimEnd.STOPPED, ClaimEnd.INSTANCE_ENDED)


@dataclass(frozen=True)
class PendingThread:
    """A thread with at least one pending message, and whom a run of it acts as."""

    thread_id: int
    business_id: int
    instance: str
    first_message_id: int


def _pending() -> QuerySet[Message]:
    """Pending messages, unordered (so callers can group them)."""
    answered = Message.objects.filter(in_reply_to=OuterRef("pk"), message_class=MessageClass.RESULT)
    stopped = ThreadClaim.objects.filter(
        ended_how__in=STOPS, thread=OuterRef("thread"), ended_at__gte=OuterRef("created_at")
    )
    return (
        Message.objects.filter(
            message_class=MessageClass.REQUEST,
            thread__isnull=False,
            to_role=F("thread__instance__name"),
        )
        .exclude(Exists(answered))
        .exclude(Exists(stopped))
    )


def pending_messages(
    *, business_id: int | None = None, instance: str | None = None, thread_id: int | None = None
) -> QuerySet[Message]:
    """Pending messages in id order, optionally of one business, instance or thread. One query."""
    rows = _pending()
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
    exclude: Collection[int] = (),
    retry_after: timedelta,
    now: datetime | None = None,
) -> list[PendingThread]:
    """Threads a runner may take up now, oldest pending message first. One query.

    Left out: threads another run holds on a live lease (an expired lease is picked up again:
    `claim.open` ends it `lease-expired`), threads in `exclude` (the caller's own), and threads
    whose run failed within `retry_after` (back-off, so a broken backend does not spin).
    """
    now = now or timezone.now()
    held = ThreadClaim.objects.filter(
        thread=OuterRef("thread"), ended_at__isnull=True, lease_expires_at__gt=now
    )
    failed = ThreadClaim.objects.filter(
        thread=OuterRef("thread"),
        ended_how=ClaimEnd.FAILED,
        ended_at__gt=now - retry_after,
    )
    rows = _pending().exclude(Exists(held)).exclude(Exists(failed))
    if business_id is not None:
        rows = rows.filter(business_id=business_id)
    if instance is not None:
        rows = rows.filter(to_role=instance)
    if exclude:
        rows = rows.exclude(thread_id__in=list(exclude))
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
