"""A turn as a reply backend sees it: the message to answer and the thread's history before it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from broker import paths
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
    for the calls made already when its progress row (read with it) counts any; a branch's
    turn reads what it carries too, four queries more for each thread it carries from.

    The history is the thread's path (R24, `broker.paths`) up to this turn, as the answering
    instance took part in it: every earlier message to or from it, each reply placed right
    after the turn it answers (a reply stored after this turn was sent still belongs before
    it), and nothing that came later. A superseded version of a turn and its reply are not
    part of it, so a new version is answered as if they never happened; a branch's carried
    conversation comes first, its source instance's part read as this instance's. Its own
    consultations of others (R23) are not part of it: a turn is told them as its tool calls.
    """
    thread = message.thread
    assert thread is not None, "a turn is a thread message"
    instance = message.to_role
    own = _took_part(
        paths.on_path(Message.objects.filter(thread=thread), up_to=message.pk), instance
    ).filter(Q(place__lt=message.pk))
    parts = [(own, instance)]
    if message.from_role in (HUMAN, TESTER) and thread.branched_from_id is not None:
        # The owner's turn: what a branch carries is the instance's too, whoever answered it.
        parts[:0] = [
            (_took_part(segment.rows(), segment.thread.instance.name), segment.thread.instance.name)
            for segment in paths.carried_segments(thread)
        ]
    found: list[Entry] = []
    number = 1
    for rows, answered_by in reversed(parts):
        if len(found) < history_limit:
            found += _entries(rows, history_limit - len(found), as_=(answered_by, instance))
        number += rows.filter(message_class=MessageClass.REQUEST, to_role=answered_by).count()
    history = tuple(reversed(found))
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


def _took_part(rows: QuerySet[Message], instance: str) -> QuerySet[Message]:
    """The messages of `rows` to or from `instance`, less its own consultations of others and
    their answers."""
    return (
        rows.filter(Q(from_role=instance) | Q(to_role=instance))
        .exclude(from_role=instance, message_class=MessageClass.REQUEST)
        .exclude(to_role=instance, message_class=MessageClass.RESULT)
    )


def _entries(rows: QuerySet[Message], limit: int, *, as_: tuple[str, str]) -> list[Entry]:
    """The newest `limit` of `rows` (annotated by `paths.on_path`) as entries, newest first,
    the instance `as_[0]` read as `as_[1]`."""
    newest_first = rows.order_by(*paths.TRANSCRIPT_NEWEST_FIRST).values_list(
        "pk", "from_role", "to_role", "message_class", "body", "progress__state", "progress__draft"
    )[:limit]
    source, instance = as_

    def read(role: str) -> str:
        return instance if role == source else role

    return [
        Entry(
            message_id=pk,
            from_role=read(frm),
            to_role=read(to),
            message_class=cls,
            body=body,
            partial=(draft or None) if state == ReplyState.STOPPED else None,
        )
        for pk, frm, to, cls, body, state, draft in newest_first
    ]


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
