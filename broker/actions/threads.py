"""Projects and threads: creating them (R2, R18); opening, renaming, archiving and marking a
thread read (R1); a human's or tester's turn in its own thread (`thread.send`, R6, R7); and the
trail row of an owner's change to its thread (`do_record_thread_change`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from broker import fields, policy, refusals, selectors
from broker.access import access_instance, access_thread, check_messaging, lists_of, verb
from broker.actions.streams import (
    appending,
    appending_to_thread,
    do_record_event,
    do_record_message,
    do_record_trail,
)
from broker.actors import Actor, ActorKind
from broker.models import (
    Business,
    Creator,
    EventKind,
    Message,
    MessageClass,
    Project,
    Thread,
    ThreadOpen,
    TrailKind,
    Via,
)
from broker.refusals import Refusal


@dataclass(frozen=True)
class SentTurn:
    """A human's or tester's turn in a thread; `request` is the `human.input` id or None (R7)."""

    message: Message
    request: int | None


@verb("project.create", ActorKind.HUMAN, ActorKind.TESTER)
def create_project(actor: Actor, *, name: object) -> Project:
    """Create a project of the actor's business; both sides see every project."""
    clean = fields.clean_name(name, what="project name")
    try:
        with transaction.atomic():
            return Project.objects.create(
                business_id=actor.business_id, name=clean, created_by=policy.owner(actor)
            )
    except IntegrityError:
        raise Refusal(refusals.PROJECT_EXISTS, "A project with this name exists.") from None


# The project a thread made with none named goes to, one a side: made on first use by that
# side. A name the other side took is passed over for the next, "Chats (2)" and on, so neither
# side's chats are ever filed in a project of the other's.
DEFAULT_PROJECTS = {Creator.HUMAN: "Chats", Creator.TESTER: "Tester chats"}
DEFAULT_PROJECT_NAMES = 50


def _default_project(actor: Actor) -> Project:
    """The actor's side's default project (`DEFAULT_PROJECTS`), found or made: the first of
    its names that is free or already the side's own. A project made meanwhile by the same
    side (another tab) is the one."""
    side = Creator.TESTER if actor.is_tester else Creator.HUMAN
    projects = Project.objects.filter(business_id=actor.business_id)
    for n in range(1, DEFAULT_PROJECT_NAMES + 1):
        name = DEFAULT_PROJECTS[side] if n == 1 else f"{DEFAULT_PROJECTS[side]} ({n})"
        found = projects.filter(name=name).first()
        if found is None:
            try:
                with transaction.atomic():
                    return Project.objects.create(
                        business_id=actor.business_id, name=name, created_by=policy.owner(actor)
                    )
            except IntegrityError:
                found = projects.get(name=name)
        if found.creator == side:
            return found
    raise Refusal(refusals.PROJECT_EXISTS, "Every name for a default project is taken.")


@verb("thread.create", ActorKind.HUMAN, ActorKind.TESTER)
def create_thread(
    actor: Actor, *, project_id: int | None, name: object, instance: str | None = None
) -> Thread:
    """R2: a thread owned by `owner(actor)`, in any project of the business; with no project
    named, in the actor's side's default project (`DEFAULT_PROJECTS`), never the other side's.

    R18: a name the other side already used in the project refuses `thread-exists`, and
    nothing else about that thread is told.
    """
    clean = fields.clean_name(name, what="thread name")
    project = (
        _default_project(actor)
        if project_id is None
        else Project.objects.filter(pk=project_id, business_id=actor.business_id).first()
    )
    if project is None:
        raise Refusal(refusals.NOT_FOUND, "No such project.")
    if instance is None:
        instance = Business.objects.values_list("default_instance", flat=True).get(
            pk=actor.business_id
        )
    target = access_instance(actor, name=instance)
    try:
        with transaction.atomic():
            # Its last activity is its creation until its first message (`Thread.active_at`).
            return Thread.objects.create(
                project=project,
                name=clean,
                owner=policy.owner(actor),
                instance=target,
                active_at=timezone.now(),
            )
    except IntegrityError:
        raise Refusal(refusals.THREAD_EXISTS, "A thread with this name exists here.") from None


@verb("thread.open", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def open_thread(actor: Actor, *, thread_id: int) -> ThreadOpen:
    """R1, R2: record that the actor opened its own thread, `by = owner(actor)`."""
    thread = access_thread(actor, thread_id=thread_id)
    return ThreadOpen.objects.create(thread=thread, by=policy.owner(actor))


@verb("thread.send", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def send_to_thread(actor: Actor, *, thread_id: int, body: object, via: Via = Via.API) -> SentTurn:
    """A turn in the actor's own thread, addressed to the thread's instance.

    R6: stored with the actor's own role and run, whichever channel (`via`, kept beside them)
    it came through. R7: a human's turn writes one `human.input` event and returns its id; a
    tester's writes none and returns None. R9: the lists read the tester as `human` in its own
    thread. One read (the thread, its instance's lists, the tester switch and the claim's
    holder) and the rows it stores.
    """
    text = fields.clean_body(body)
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        return do_send_turn(actor, thread, body=text, via=via, last_write=True)


def do_send_turn(
    actor: Actor,
    thread: Thread,
    *,
    body: str,
    via: Via,
    version_of_id: int | None = None,
    last_write: bool = False,
) -> SentTurn:
    """The actor's turn in its thread, as `thread.send` stores it (R6, R7, R8–R11 checked
    here); `version_of_id`: the first version of the turn this one is a new version of (R24);
    `last_write`: the transaction writes nothing after the turn (`do_store_message`).

    Precondition: inside `appending`, the thread the actor's (R1), read and locked with its
    instance's role and `holder` (`appending_to_thread`), or made in this transaction with
    its instance's role loaded and no claim (`holder` ""); `body` clean.
    """
    instance = thread.instance
    # The sender is the human or the tester, who have no lists: the instance's are all the
    # check reads.
    check_messaging(
        actor,
        sender=actor.role,
        recipient=instance.name,
        thread_owner=thread.owner,
        roles={instance.name: lists_of(instance)},
    )
    request = None
    if actor.is_human:
        request = do_record_event(
            actor.business_id,
            EventKind.HUMAN_INPUT,
            {"thread": thread.pk, "by": actor.username},
        )
    message = do_record_message(
        actor,
        thread=thread,
        to_role=instance.name,
        message_class=MessageClass.REQUEST,
        body=body,
        request=request,
        holder=getattr(thread, "holder", "") or "",
        via=via,
        version_of_id=version_of_id,
        last_write=last_write,
    )
    return SentTurn(message=message, request=request.pk if request else None)


@verb("thread.rename", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def rename_thread(actor: Actor, *, thread_id: int, name: object) -> Thread:
    """R1: rename the actor's own thread, with one `thread.renamed` trail row. The name's
    limits are those of `thread.create`; R18: a name taken in the project, whoever took it,
    refuses `thread-exists` and tells nothing else. The same name again changes nothing."""
    clean = fields.clean_name(name, what="thread name")
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        if clean == thread.name:
            return thread
        before = thread.name
        thread.name = clean
        try:
            with transaction.atomic():
                thread.save(update_fields=["name"])
        except IntegrityError:
            raise Refusal(refusals.THREAD_EXISTS, "A thread with this name exists here.") from None
        do_record_thread_change(
            actor, thread, kind=TrailKind.THREAD_RENAMED, text=f"renamed “{before}” to “{clean}”"
        )
        return thread


@dataclass(frozen=True)
class Flag:
    """A flag the owner sets on its thread or clears (archived, pinned): the time column that
    holds it (null: cleared), and the trail row each way."""

    column: str
    on: tuple[TrailKind, str]
    off: tuple[TrailKind, str]


ARCHIVED = Flag(
    "archived_at",
    on=(TrailKind.THREAD_ARCHIVED, "archived the thread"),
    off=(TrailKind.THREAD_UNARCHIVED, "brought the thread back from the archive"),
)
PINNED = Flag(
    "pinned_at",
    on=(TrailKind.THREAD_PINNED, "pinned the thread"),
    off=(TrailKind.THREAD_UNPINNED, "unpinned the thread"),
)


def _set_flag(actor: Actor, *, thread_id: int, flag: Flag, on: bool) -> Thread:
    """R1: set or clear `flag` on the actor's own thread, with one trail row (R16). Asking for
    the state it is in changes nothing."""
    with appending_to_thread(actor, thread_id=thread_id) as thread:
        if on == (getattr(thread, flag.column) is not None):
            return thread
        setattr(thread, flag.column, timezone.now() if on else None)
        thread.save(update_fields=[flag.column])
        kind, text = flag.on if on else flag.off
        do_record_thread_change(actor, thread, kind=kind, text=text)
        return thread


@verb("thread.archive", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def archive_thread(actor: Actor, *, thread_id: int, archived: bool) -> Thread:
    """R1: archive the actor's own thread (lists leave it out) or bring it back, with one
    `thread.archived` / `thread.unarchived` trail row. Asking for the state it is in changes
    nothing."""
    return _set_flag(actor, thread_id=thread_id, flag=ARCHIVED, on=archived)


@verb("thread.pin", ActorKind.HUMAN, ActorKind.TESTER, switch_in_read=True)
def pin_thread(actor: Actor, *, thread_id: int, pinned: bool) -> Thread:
    """R1: pin the actor's own thread (the inbox lists it first) or unpin it, with one
    `thread.pinned` / `thread.unpinned` trail row. Asking for the state it is in changes
    nothing. Not activity: the thread keeps its place among the pinned or the others."""
    return _set_flag(actor, thread_id=thread_id, flag=PINNED, on=pinned)


def change_thread(
    actor: Actor,
    *,
    thread_id: int,
    name: object = None,
    archived: bool | None = None,
    pinned: bool | None = None,
) -> Thread:
    """Rename, archive and/or pin the actor's own thread in one transaction (`rename_thread`,
    `archive_thread`, `pin_thread`: each its own verb, so R22 decides each); the thread as its
    list shows it. Nothing asked: `invalid`."""
    if name is None and archived is None and pinned is None:
        raise Refusal(refusals.INVALID, "Give the thread's new name, archived, pinned, or more.")
    with appending(actor.business_id):
        if name is not None:
            rename_thread(actor, thread_id=thread_id, name=name)
        if archived is not None:
            archive_thread(actor, thread_id=thread_id, archived=archived)
        if pinned is not None:
            pin_thread(actor, thread_id=thread_id, pinned=pinned)
    return selectors.inbox_thread(actor, thread_id=thread_id)


def do_record_thread_change(actor: Actor, thread: Thread, *, kind: TrailKind, text: str) -> None:
    """The trail row of a change the owner made to its thread, labelled like its turns (R16):
    the owner to the thread's instance; R20 decides who sees it, as for every row.

    Precondition: inside `appending`, the change stored and the thread's instance loaded.
    """
    do_record_trail(
        actor,
        business_id=actor.business_id,
        thread=thread,
        message=None,
        to_role=thread.instance.name,
        text=text,
        kind=kind,
    )


@verb("thread.mark_read", counts_as="thread.open")
def mark_read(actor: Actor, *, thread_id: int, up_to: int) -> Thread:
    """R1: move the owner's read mark of its own thread forward to message `up_to`, which must
    be a message of that thread (else `invalid`); an older one leaves the mark where it is.

    Reading is opening (it counts as `thread.open`): the mark is the newest message the owner
    has opened. It is not bus traffic and writes no trail row. Returns the thread as its list
    shows it.
    """
    with transaction.atomic():
        thread = access_thread(actor, thread_id=thread_id)
        if not Message.objects.filter(pk=up_to, thread=thread).exists():
            raise Refusal(refusals.INVALID, "up_to must be a message of this thread.")
        # Forward only, decided by the database: two marks racing keep the greater.
        Thread.objects.filter(pk=thread.pk).filter(
            Q(read_up_to__isnull=True) | Q(read_up_to__lt=up_to)
        ).update(read_up_to=up_to)
    return selectors.inbox_thread(actor, thread_id=thread_id)
