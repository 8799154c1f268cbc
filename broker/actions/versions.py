"""Versions and branches of an owner's conversation (R24): `thread.edit`, `thread.regenerate`
and `thread.branch`.

A turn is versioned in place only while its group is the thread's latest owner turn: the new
version supersedes the older ones on the path (`broker.paths`). Any other edit or regenerate,
and every regenerate on another instance, is a branch: a new thread of the same owner carrying
the conversation before the turn by reference (`branched_from`, `branched_at`), never a copy,
since only a run writes a reply (R12). Nothing is deleted or rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from broker import fields, paths, policy, refusals, selectors
from broker.access import access_instance, verb
from broker.actions.streams import appending_to_thread
from broker.actions.threads import SentTurn, do_record_thread_change, do_send_turn
from broker.actors import Actor, ActorKind
from broker.models import OWED, Instance, Message, MessageClass, Thread, TrailKind, Via
from broker.refusals import Refusal


@dataclass(frozen=True)
class NewTurn:
    """A new version of a turn, or a branch's first turn: the turn (`SentTurn`, R7's request
    id with it) and its thread as its list shows it, the same one or the new branch."""

    turn: SentTurn
    thread: Thread

    @property
    def message(self) -> Message:
        return self.turn.message

    @property
    def request(self) -> int | None:
        return self.turn.request


def _owner_turn(actor: Actor, thread: Thread, message_id: int, *, reply: bool) -> Message:
    """The actor's turn of `thread` named by `message_id`: one of its turns (any version) or,
    with `reply`, the reply to one. A message of another thread is `not-found` (R1: nothing
    about other threads is told); any other message of the thread is `invalid`."""
    message = (
        Message.objects.filter(pk=message_id, thread_id=thread.pk)
        .select_related("in_reply_to", "progress")
        .first()
    )
    if message is None:
        raise Refusal(refusals.NOT_FOUND, "No such message in this thread.")
    if reply and message.message_class == MessageClass.RESULT and message.in_reply_to:
        message = message.in_reply_to
    if message.message_class != MessageClass.REQUEST or message.from_role != actor.role:
        raise Refusal(refusals.INVALID, "Only your own turns are edited or asked again.")
    return message


def _latest_turn(actor: Actor, thread: Thread) -> Message:
    """The newest of the actor's turns in the thread (precondition: it has one), with its
    progress: the latest group's newest version."""
    latest = (
        Message.objects.filter(
            thread_id=thread.pk, message_class=MessageClass.REQUEST, from_role=actor.role
        )
        .select_related("progress")
        .order_by("-pk")
        .first()
    )
    assert latest is not None, "the thread holds the actor's turn"
    return latest


def _group(turn: Message) -> int:
    """The first version of the turn's group: what a new version of it names (`version_of`)."""
    return turn.version_of_id or turn.pk


def _branch_name(source: Thread) -> str:
    """`<source> (branch)`, or `(branch 2)` and on, the first free in the project; the source's
    name cut so the whole fits the name limit."""
    limit: int = settings.MOSAIC_NAME_MAX
    taken = set(
        Thread.objects.filter(project_id=source.project_id, name__contains="(branch").values_list(
            "name", flat=True
        )
    )
    n = 1
    while True:
        tail = " (branch)" if n == 1 else f" (branch {n})"
        name = source.name[: limit - len(tail)].rstrip() + tail
        if name not in taken:
            return name
        n += 1


def _do_branch(
    actor: Actor,
    source: Thread,
    *,
    at: Message | None,
    name: str | None,
    instance: Instance,
) -> Thread:
    """A new thread of the actor's, in the source's project, on `instance`, carrying the
    source's path up to and including `at` (None: nothing). R18: a name taken in the project
    is `thread-exists`; no name given, `_branch_name`'s. Precondition: inside `appending`,
    `source` the actor's and `at` on its path; `instance`'s role loaded."""
    try:
        with transaction.atomic():
            branch = Thread.objects.create(
                project_id=source.project_id,
                name=name or _branch_name(source),
                owner=policy.owner(actor),
                instance=instance,
                active_at=timezone.now(),
                branched_from=source,
                branched_at=at,
            )
    except IntegrityError:
        raise Refusal(refusals.THREAD_EXISTS, "A thread with this name exists here.") from None
    return branch


def _instance(actor: Actor, thread: Thread, name: str | None) -> Instance | None:
    """The instance named for a regenerate or a branch, with its role (unknown: `not-found`,
    as `thread.create`'s); None when none is named or it is the thread's own."""
    if name is None or name == thread.instance.name:
        return None
    found = access_instance(actor, name=fields.clean_name(name, what="instance"))
    found.role  # noqa: B018  (read now: the messaging check reads its lists)
    return found


def _new_turn(
    actor: Actor,
    *,
    thread_id: int,
    message_id: int,
    body: str | None,
    instance: str | None,
    via: Via,
    kind: TrailKind,
) -> NewTurn:
    """Edit (`body`) or regenerate (None: the turn's own text): a new version in place when
    the turn's group is the thread's latest and no other instance is named, else a branch
    carrying the conversation before the turn, whose first turn it is."""
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        turn = _owner_turn(actor, thread, message_id, reply=body is None)
        text = turn.body if body is None else body
        other = _instance(actor, thread, instance)
        latest = _latest_turn(actor, thread)
        if other is None and _group(latest) == _group(turn):
            if latest.reply_state in OWED:
                raise Refusal(refusals.TURN_IN_PROGRESS, "Stop the reply first, or wait for it.")
            sent = do_send_turn(actor, thread, body=text, via=via, version_of_id=_group(turn))
            do_record_thread_change(actor, thread, kind=kind, text=_said(kind, in_place=True))
            target = thread
        else:
            carried = paths.last_before(thread, turn)
            target = _do_branch(
                actor, thread, at=carried, name=None, instance=other or thread.instance
            )
            sent = do_send_turn(actor, target, body=text, via=via)
            do_record_thread_change(
                actor, target, kind=kind, text=_said(kind, in_place=False, source=thread)
            )
    return NewTurn(turn=sent, thread=selectors.inbox_thread(actor, thread_id=target.pk))


def _said(kind: TrailKind, *, in_place: bool, source: Thread | None = None) -> str:
    """The trail row's text of an edit or a regenerate (R16 labels it)."""
    verb = "edited a turn" if kind == TrailKind.TURN_EDITED else "asked a turn again"
    if in_place or source is None:
        return verb
    return f"{verb} of “{source.name}” in a new branch"


@verb("thread.edit", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def edit_turn(
    actor: Actor, *, thread_id: int, message_id: int, body: object, via: Via = Via.API
) -> NewTurn:
    """R24: a new version of one of the actor's turns with new text: in place while the turn
    is the thread's latest (refused `turn-in-progress` while its reply is owed), else a
    branch carrying the conversation before it. A normal send otherwise (R6, R7, R8–R11)."""
    text = fields.clean_body(body)
    return _new_turn(
        actor,
        thread_id=thread_id,
        message_id=message_id,
        body=text,
        instance=None,
        via=via,
        kind=TrailKind.TURN_EDITED,
    )


@verb("thread.regenerate", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def regenerate_turn(
    actor: Actor,
    *,
    thread_id: int,
    message_id: int,
    instance: str | None = None,
    via: Via = Via.API,
) -> NewTurn:
    """R24: one of the actor's turns (named by itself or its reply) asked again with its own
    text, as `thread.edit`; on another `instance` of the business, always a branch (a
    thread's instance never changes once it has messages)."""
    return _new_turn(
        actor,
        thread_id=thread_id,
        message_id=message_id,
        body=None,
        instance=instance,
        via=via,
        kind=TrailKind.TURN_REGENERATED,
    )


@verb("thread.branch", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def branch_thread(
    actor: Actor,
    *,
    thread_id: int,
    message_id: int,
    name: object = None,
    instance: str | None = None,
) -> Thread:
    """R24: a new thread of the actor's carrying its thread's path up to and including
    `message_id` (any message on it; else `not-found`), on the thread's instance or another
    of the business, with no new turn. Named `name` (R18 as `thread.create`) or after its
    source. One `thread.branched` trail row, on the branch."""
    clean = None if name is None else fields.clean_name(name, what="thread name")
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        at = Message.objects.filter(pk=message_id, business_id=actor.business_id).first()
        if at is None or not paths.holds(thread, at):
            raise Refusal(refusals.NOT_FOUND, "No such message in this conversation.")
        other = _instance(actor, thread, instance)
        branch = _do_branch(actor, thread, at=at, name=clean, instance=other or thread.instance)
        do_record_thread_change(
            actor,
            branch,
            kind=TrailKind.THREAD_BRANCHED,
            text=f"branched “{thread.name}” into “{branch.name}”",
        )
    return selectors.inbox_thread(actor, thread_id=branch.pk)
