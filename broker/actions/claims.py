"""Claims: a run's hold on a thread, opened, renewed and released by the run (`claim.open`,
`claim.renew`, `claim.end`) or ended by others (the owner's stop, `assistant.stop`, R13; staff's
end of an instance, `instance.end`, R14; the lease reaper, `claim.reap`, SPEC §7); and the
trusted helpers that lock the open ones (`locked_open_claims`) and end one (`do_end_claim`,
`do_expire_claim`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from broker import policy, refusals, replies
from broker.access import access_claim, access_instance, access_thread, lease_deadline, verb
from broker.actions.streams import appending, do_record_event, do_record_trail, locked_threads
from broker.actors import Actor, ActorKind
from broker.models import ClaimEnd, EventKind, Instance, ThreadClaim, TrailKind
from broker.refusals import Refusal


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
        actor,
        business_id=thread.project.business_id,
        thread=thread,
        message=None,
        to_role=claim.instance.name,
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


def locked_open_claims(business_id: int) -> QuerySet[ThreadClaim]:
    """The business's open claims, locked in id order (one order everywhere: no deadlock)."""
    return (
        ThreadClaim.objects.select_for_update(of=("self",))
        .select_related("thread__project", "instance")
        .filter(ended_at__isnull=True, thread__project__business_id=business_id)
        .order_by("pk")
    )


@verb("assistant.stop", ActorKind.HUMAN, ActorKind.TESTER)
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
        claims = locked_open_claims(actor.business_id).filter(thread__owner=policy.owner(actor))
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
            for claim in locked_open_claims(actor.business_id).filter(instance=target)
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
            actor,
            business_id=actor.business_id,
            thread=None,
            message=None,
            to_role=target.name,
            text=f"{reason}; {len(ended)} claim(s) ended",
            kind=TrailKind.INSTANCE_ENDED,
        )
    return ended


@verb("claim.open", ActorKind.RUN)
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
        current = (
            locked_open_claims(actor.business_id).filter(thread=thread, instance=instance).first()
        )
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


@verb("claim.renew", ActorKind.RUN)
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


@verb("claim.end", ActorKind.RUN)
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


@verb("claim.reap", ActorKind.SYSTEM)
def reap_claims(actor: Actor) -> list[ThreadClaim]:
    """SPEC §7: end every open claim of the business whose lease ran out (`lease-expired`).

    `claim.open` ends an expired claim too, but only when a run comes for that thread; the
    reaper makes a dead run's end appear in the trail promptly. On PostgreSQL a claim whose
    run is renewing it right now is re-read after the renewal and left alone.
    """
    with appending(actor.business_id):
        expired = locked_open_claims(actor.business_id).filter(lease_expires_at__lte=timezone.now())
        return [do_expire_claim(claim, business_id=actor.business_id) for claim in expired]
