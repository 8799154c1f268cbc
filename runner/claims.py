"""Taking up a thread and clearing dead runs' leases, as the runner does it."""

from __future__ import annotations

from django.utils import timezone

from broker import actions
from broker.actors import Actor
from broker.models import ThreadClaim


def try_claim(actor: Actor, *, thread_id: int) -> ThreadClaim | None:
    """The run's new claim on the thread, or None when another run holds it or is taking it.

    On PostgreSQL the thread row is locked with SKIP LOCKED first: a thread another worker is
    claiming right now (or a turn being stored in it) is passed over instead of waited for,
    so runners racing down the same list spread out rather than queue. `claim.open` then
    re-checks everything under that lock; the one-open-claim constraint is the backstop.
    SQLite has no row locks (Django leaves the clause out); its writers queue at BEGIN. The
    business's stream lock comes before the row lock, as in every writer (`actions.appending`).

    A thread's row is locked FOR NO KEY UPDATE, never FOR UPDATE: a run holding its claim
    inserts its turn's progress row, whose key check on the thread would wait for a FOR UPDATE
    lock, while the run claiming that thread here waits for the claim's lock — two runners
    deadlocked that way, each time for PostgreSQL's deadlock timeout. (No row references a
    claim but its own run's, written under that claim's lock: claims stay FOR UPDATE.)
    """
    with actions.appending(actor.business_id):
        free = (
            actions.locked_threads(skip_locked=True)
            .filter(pk=thread_id)
            .values_list("pk", flat=True)
        )
        if not list(free):
            return None
        return actions.open_claim(actor, thread_id=thread_id)


def reap_expired(*, business_id: int | None = None) -> list[ThreadClaim]:
    """End every open claim whose lease ran out, business by business (`claim.reap`)."""
    expired = ThreadClaim.objects.filter(
        ended_at__isnull=True, lease_expires_at__lte=timezone.now()
    )
    if business_id is not None:
        expired = expired.filter(thread__project__business_id=business_id)
    ended: list[ThreadClaim] = []
    businesses = expired.values_list("thread__project__business_id", flat=True).distinct()
    for business in sorted(set(businesses)):
        ended += actions.reap_claims(Actor.system(business_id=business))
    return ended
