"""A turn as a reply backend sees it: the message to answer and the thread's history before it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db.models import Q
from django.db.models.functions import Coalesce

from broker.models import HUMAN, TESTER, Message, MessageClass, ReplyState, Step
from broker.steps import consultations, consulted_turn, model_result

# SPEC §7: a tester turn's prompt begins with this line, whichever backend answers it.
TESTER_LINE = "This message is from a tester running a product test; it authorizes nothing."

# How many earlier messages of the thread a backend is shown (the newest of them).
HISTORY_LIMIT = 100


@dataclass(frozen=True)
class Entry:
    """One earlier message of the thread."""

    message_id: int
    from_role: str
    to_role: str
    message_class: str
    body: str
    # What the reply had written when a stop ended this turn (SPEC §7.1); None for any other.
    partial: str | None = None

    @property
    def is_turn(self) -> bool:
        return self.message_class == MessageClass.REQUEST

    @property
    def is_reply(self) -> bool:
        return self.message_class == MessageClass.RESULT


@dataclass(frozen=True)
class Done:
    """A tool call the turn made already, in an earlier attempt (SPEC §7.2): a retried turn is
    shown its calls and their results, and makes none of them again."""

    call_id: str
    round: int
    tool: str
    # The arguments as JSON text, and what the model was told of the call.
    arguments: str
    result: str
    # A consultation (R23) whose answer has not come yet: the turn it waits for.
    consulting: int | None = None


@dataclass(frozen=True)
class Turn:
    """The message a run answers, with what came before it in its thread (oldest first)."""

    message_id: int
    thread_id: int
    thread_name: str
    instance: str
    from_role: str
    body: str
    # The `human.input` event a human's turn wrote (R7); None for a tester's turn.
    request_id: int | None
    # 1 for the thread's first turn, 2 for the next, …
    number: int
    history: tuple[Entry, ...]
    # The calls earlier attempts at this turn made, in order.
    done: tuple[Done, ...] = ()

    @property
    def is_tester(self) -> bool:
        return self.from_role == TESTER

    @property
    def is_consultation(self) -> bool:
        """A turn from another instance of the thread (R23), not from the thread's owner."""
        return self.from_role not in (HUMAN, TESTER)

    @property
    def earlier_turns(self) -> tuple[Entry, ...]:
        return tuple(entry for entry in self.history if entry.is_turn)


def read_turn(message: Message, *, history_limit: int = HISTORY_LIMIT) -> Turn:
    """The turn for a pending thread message: two queries (history, turn count), and a third
    for the calls made already when its progress row (read with it) counts any.

    The history is the thread as a transcript up to this turn, as the answering instance took
    part in it: every earlier message to or from it, each reply placed right after the turn it
    answers (a reply stored after this turn was sent still belongs before it), and nothing
    that came later. Its own consultations of others (R23) are not part of it: a turn is told
    them as its tool calls.
    """
    thread = message.thread
    assert thread is not None, "a turn is a thread message"
    instance = message.to_role
    earlier = (
        Message.objects.filter(thread=thread)
        .filter(Q(pk__lt=message.pk) | Q(in_reply_to__lt=message.pk))
        .filter(Q(from_role=instance) | Q(to_role=instance))
        .exclude(from_role=instance, message_class=MessageClass.REQUEST)
        .exclude(to_role=instance, message_class=MessageClass.RESULT)
    )
    transcript = earlier.annotate(place=Coalesce("in_reply_to", "pk"))
    newest_first = transcript.order_by("-place", "-pk").values_list(
        "pk", "from_role", "to_role", "message_class", "body", "progress__state", "progress__draft"
    )[:history_limit]
    history = tuple(
        Entry(
            message_id=pk,
            from_role=frm,
            to_role=to,
            message_class=cls,
            body=body,
            partial=(draft or None) if state == ReplyState.STOPPED else None,
        )
        for pk, frm, to, cls, body, state, draft in reversed(list(newest_first))
    )
    number = (
        Message.objects.filter(
            thread=thread, pk__lt=message.pk, message_class=MessageClass.REQUEST, to_role=instance
        ).count()
        + 1
    )
    progress = message.progress_or_none
    done = () if progress is None or not progress.steps else calls_made(message.pk)
    return Turn(
        message_id=message.pk,
        thread_id=thread.pk,
        thread_name=thread.name,
        instance=message.to_role,
        from_role=message.from_role,
        body=message.body,
        request_id=message.request_id,
        number=number,
        history=history,
        done=done,
    )


def calls_made(turn_id: int) -> tuple[Done, ...]:
    """The turn's stored steps, oldest first, as a model is to be shown them again; the
    consultations' with their answers (two queries in all)."""
    made = list(Step.objects.filter(turn_id=turn_id).order_by("pk"))
    asked = {step.pk: consulted_turn(step) for step in made}
    answers = consultations(turn for turn in asked.values() if turn is not None)
    done = []
    for step in made:
        consulted_id = asked[step.pk]
        consulted = answers.get(consulted_id) if consulted_id is not None else None
        done.append(
            Done(
                call_id=step.call_id,
                round=step.round,
                tool=step.tool,
                arguments=json.dumps(step.arguments, ensure_ascii=False)
                if isinstance(step.arguments, dict)
                else str(step.arguments),
                result=model_result(step, consulted),
                consulting=consulted_id if consulted is not None and consulted.waiting else None,
            )
        )
    return tuple(done)
