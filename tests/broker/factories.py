"""Small builders for broker tests: go through the broker's own verbs wherever one exists."""

from __future__ import annotations

from broker import actions
from broker.actors import Actor
from broker.models import (
    Business,
    Instance,
    Message,
    MessageClass,
    Project,
    RoleDefinition,
    Thread,
    ThreadClaim,
)
from broker.replies import ReplyRecord


def project(actor: Actor, name: str = "product") -> Project:
    return actions.create_project(actor, name=name)


def instance(business: Business, name: str) -> Instance:
    """Another instance of the business, answering the human (the shipped lists)."""
    role = RoleDefinition.objects.create(
        business=business, name=name, receive_from=["human"], send_to=["human"]
    )
    return Instance.objects.create(business=business, name=name, role=role)


def thread(actor: Actor, project_: Project, name: str) -> Thread:
    return actions.create_thread(actor, project_id=project_.pk, name=name)


def claim(run: Actor, thread_: Thread) -> ThreadClaim:
    opened = actions.open_claim(run, thread_id=thread_.pk)
    assert opened is not None, "the thread was already claimed"
    return opened


def reply(
    run: Actor, turn: Message, body: str = "reply", record: ReplyRecord | None = None
) -> Message:
    """The run's reply to `turn` (R12), under a claim of its own that it then releases."""
    held = claim(run, turn.thread)
    answer = actions.send_message(
        run,
        to=turn.from_role,
        body=body,
        message_class=MessageClass.RESULT,
        in_reply_to=turn.pk,
        claim_id=held.pk,
        record=record,
    )
    actions.end_claim(run, claim_id=held.pk)
    return answer
