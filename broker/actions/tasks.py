"""What a run leaves beside its reply: a task from a human's request (`task.create`, R15) and a
decision routed to an inbox (`decision.create`, R19); and a system notice in one of the human's
threads (`notice.post`, R17).
"""

from __future__ import annotations

from django.db import transaction

from broker import fields, policy, refusals
from broker.access import access_claim, check_messaging, verb
from broker.actions.streams import (
    appending,
    do_record_event,
    do_record_message,
    do_record_trail,
    locked_threads,
)
from broker.actors import Actor, ActorKind
from broker.models import (
    HUMAN,
    TESTER,
    Business,
    Decision,
    Event,
    EventKind,
    Message,
    MessageClass,
    Task,
    ThreadClaim,
    TrailKind,
)
from broker.refusals import Refusal

# R15, in words a model can pass on: a tester's turn wrote no `human.input` to cite.
TESTER_TASK_REFUSED = (
    "Not created: this is a test conversation, and a test conversation creates no task (R15)."
)


@verb("task.create", ActorKind.RUN)
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


@verb("decision.create", ActorKind.RUN)
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
            actor,
            business_id=actor.business_id,
            thread=claim.thread,
            message=None,
            to_role=route_to,
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
