"""Small builders for broker tests: go through the broker's own verbs wherever one exists."""

from __future__ import annotations

from broker import actions
from broker.actors import Actor
from broker.models import Message, MessageClass, Project, Thread, ThreadClaim


def project(actor: Actor, name: str = "product") -> Project:
    return actions.create_project(actor, name=name)


def thread(actor: Actor, project_: Project, name: str) -> Thread:
    return actions.create_thread(actor, project_id=project_.pk, name=name)


def claim(run: Actor, thread_: Thread) -> ThreadClaim:
    opened = actions.open_claim(run, thread_id=thread_.pk)
    assert opened is not None, "the thread was already claimed"
    return opened


def reply(run: Actor, thread_: Thread, turn: Message, body: str = "reply") -> Message:
    """The run's RESULT to `turn`, through a claim of the thread it opens and then ends."""
    opened = claim(run, thread_)
    answer = actions.send_message(
        run,
        to=turn.from_role,
        message_class=MessageClass.RESULT,
        in_reply_to=turn.pk,
        claim_id=opened.pk,
        body=body,
    )
    actions.end_claim(run, claim_id=opened.pk)
    return answer
