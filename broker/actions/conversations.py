"""A conversation sent whole, as a chat-completions client sends it (SPEC §6.1): the tester's.

Such a client sends every message of its conversation with each request: the turns it wrote
and the replies it was given, then its new turn. The broker keeps the conversation once, in a
thread, so a request is mapped onto one: its first turn starts a thread of the tester's
(`conversation.start`), and a later one continues the thread whose history is exactly what the
client sends before its new turn (`conversation.continue`). The client's copy of the replies
is compared, never stored: the tester may not write the assistant's part (R12). Each verb finds
and sends in one transaction under the business's stream lock, so two requests continuing one
history never both land in one thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker import fields, policy, refusals
from broker.access import access_thread, verb
from broker.actions.streams import appending
from broker.actions.threads import SentTurn, create_project, create_thread, send_to_thread
from broker.actors import Actor, ActorKind
from broker.models import Message, MessageClass, Project, ReplyState, Thread, Via
from broker.refusals import Refusal

# The two sides of a conversation as a client writes them: its turns, and the replies.
USER = "user"
ASSISTANT = "assistant"
Exchange = tuple[str, str]

# A turn that ended without a reply gave the client nothing to send back: not in the history.
_UNANSWERED_FOR_GOOD = (ReplyState.STOPPED, ReplyState.FAILED)


@verb("conversation.start", ActorKind.TESTER)
def start_conversation(
    actor: Actor, *, project: object, instance: str, name: object, body: object, via: Via
) -> SentTurn:
    """A new thread of the tester's (R2) to `instance`, in the project named `project` (made
    when there is none), and its first turn, all or nothing: a refused turn leaves no thread."""
    project_name = fields.clean_name(project, what="project name")
    with appending(actor.business_id):
        found = Project.objects.filter(business_id=actor.business_id, name=project_name).first()
        if found is None:
            found = create_project(actor, name=project_name)
        thread = create_thread(actor, project_id=found.pk, name=name, instance=instance)
        return send_to_thread(actor, thread_id=thread.pk, body=body, via=via)


@verb("conversation.continue", ActorKind.TESTER)
def continue_conversation(
    actor: Actor,
    *,
    instance: str,
    history: Sequence[Exchange],
    body: object,
    via: Via,
    thread_id: int | None = None,
) -> SentTurn:
    """The turn `body` in the tester's thread to `instance` whose history is exactly `history`
    (`history_of`), the most recently active one when several are; or in the thread
    `thread_id`, the tester's own (R1), whatever its history.

    No thread holds that history: `invalid`. The replies in `history` are the client's copy,
    only compared: the tester may not write the assistant's part (R12).
    """
    with appending(actor.business_id):
        if thread_id is None:
            thread_id = _thread_holding(actor, instance=instance, history=history)
        else:
            named = access_thread(actor, thread_id=thread_id)
            if named.instance.name != instance:
                raise Refusal(
                    refusals.INVALID,
                    f"Thread {thread_id} talks to {named.instance.name!r}, not {instance!r}.",
                )
        return send_to_thread(actor, thread_id=thread_id, body=body, via=via)


def history_of(thread_id: int, *, role: str) -> list[Exchange]:
    """A thread's conversation as its client saw it: each turn `role` sent, oldest first, with
    the reply it got; a turn still owed a reply has none yet, and a turn stopped or failed is
    left out, since it gave the client no reply to send back."""
    turns = list(
        Message.objects.filter(thread_id=thread_id, message_class=MessageClass.REQUEST)
        .filter(from_role=role)
        .select_related("progress")
        .order_by("pk")
    )
    answers = dict(
        Message.objects.filter(
            thread_id=thread_id,
            message_class=MessageClass.RESULT,
            in_reply_to__in=[turn.pk for turn in turns],
        ).values_list("in_reply_to", "body")
    )
    exchanges: list[Exchange] = []
    for turn in turns:
        if turn.reply_state in _UNANSWERED_FOR_GOOD:
            continue
        exchanges.append((USER, turn.body))
        if turn.pk in answers:
            exchanges.append((ASSISTANT, answers[turn.pk]))
    return exchanges


def _thread_holding(actor: Actor, *, instance: str, history: Sequence[Exchange]) -> int:
    """The tester's thread to `instance` whose history is `history`; the candidates are the
    threads with a turn that reads as its first, the most recently active first."""
    wanted = [(role, text) for role, text in history]
    if wanted and wanted[0][0] == USER:
        opening = Message.objects.filter(
            business_id=actor.business_id,
            to_role=instance,
            from_role=actor.role,
            message_class=MessageClass.REQUEST,
            body=wanted[0][1],
            thread__owner=policy.owner(actor),
        ).values("thread_id")
        candidates = (
            Thread.objects.filter(pk__in=opening)
            .order_by("-active_at", "-pk")
            .values_list("pk", flat=True)
        )
        for candidate in candidates:
            if history_of(candidate, role=actor.role) == wanted:
                return int(candidate)
    raise Refusal(
        refusals.INVALID,
        f"No thread of the tester's with {instance!r} holds exactly these earlier messages: a "
        "conversation goes on from its turns and the replies they got, in order, and the "
        "tester may not write the assistant's part.",
    )
