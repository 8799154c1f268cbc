"""Messages on the bus: `message.send` (R8–R12, a run's reply included) and a run's
consultation of another instance (`message.consult`, `message.consult_expire`, R23).
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from broker import fields, policy, refusals, replies
from broker.access import access_claim, access_message, check_messaging, verb
from broker.actions.claims import do_end_claim, locked_open_claims
from broker.actions.streams import appending, do_record_message
from broker.actions.turns import owed_turn
from broker.actors import Actor, ActorKind
from broker.models import ClaimEnd, Message, MessageClass, ReplyState
from broker.refusals import Refusal
from broker.replies import ReplyRecord


@verb("message.send", ActorKind.HUMAN, ActorKind.TESTER, ActorKind.RUN)
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
    if actor.kind is ActorKind.RUN:
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
        if actor.kind is ActorKind.RUN:
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


@verb("message.consult", ActorKind.RUN)
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
        turn = owed_turn(claim, turn_id)[0]
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


@verb("message.consult_expire", ActorKind.RUN)
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
        for held in locked_open_claims(actor.business_id).filter(
            thread_id=claim.thread_id, instance__name=turn.to_role
        ):
            do_end_claim(held, actor=actor, by=actor.run, how=ClaimEnd.FAILED, reason=failure)
        return replies.do_move(turn, ReplyState.FAILED, failure=failure)
