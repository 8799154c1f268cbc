"""`access_*` functions fetch a record and authorise the actor for it, or refuse.

Every broker verb is declared with `@verb`, which applies R22 and the tester switch before the
verb runs and logs each refusal to `mosaic.security` (code and actor, never content).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from broker import policy, refusals
from broker.actors import Actor, ActorKind
from broker.models import Business, Instance, Message, Project, RoleDefinition, Thread, ThreadClaim
from broker.policy import RoleLists
from broker.refusals import Refusal

security_log = logging.getLogger("mosaic.security")

P = ParamSpec("P")
R = TypeVar("R")

# Every verb of the broker and the kinds of actor it serves; R22's list is in policy.
VERBS: dict[str, frozenset[ActorKind]] = {}
# A verb that R22 and the tester switch treat as another (`counts_as`), mapped to that verb.
COUNTS_AS: dict[str, str] = {}
# The verbs whose own read carries the tester switch (`switch_in_read`).
_SWITCH_IN_READ: set[str] = set()


def verb(
    name: str, *kinds: ActorKind, switch_in_read: bool = False, counts_as: str | None = None
) -> Callable[[Callable[Concatenate[Actor, P], R]], Callable[Concatenate[Actor, P], R]]:
    """Declare a broker verb served to `kinds` of actor; a name declared twice raises.

    `switch_in_read`: the verb's own read refuses the tester while it is off — `access_thread`
    from the thread's own row, the trail's read by reading the tester's rows only while it is
    on — so the verb costs no separate switch read.

    `counts_as`: the verb is another face of that one, declared before it: it serves the same
    kinds with the same switch, and R22 allows or refuses it, and its refusals are logged, as
    that verb.
    """
    if name in VERBS:
        raise ValueError(f"The verb {name!r} is declared twice.")
    if counts_as is not None:
        if kinds or switch_in_read or counts_as not in VERBS or counts_as in COUNTS_AS:
            raise ValueError(f"{name!r} counts as {counts_as!r}: declare only that verb first.")
        kinds = tuple(VERBS[counts_as])
        switch_in_read = counts_as in _SWITCH_IN_READ
    allowed = frozenset(kinds)
    decided_as = counts_as or name

    def decorate(func: Callable[Concatenate[Actor, P], R]) -> Callable[Concatenate[Actor, P], R]:
        @functools.wraps(func)
        def checked(actor: Actor, /, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                access_verb(actor, decided_as, allowed, switch=not switch_in_read)
                return func(actor, *args, **kwargs)
            except Refusal as refusal:
                security_log.info(
                    "refused verb=%s code=%s actor=%s business=%s",
                    decided_as,
                    refusal.code,
                    actor,
                    actor.business_id,
                )
                raise

        return checked

    VERBS[name] = allowed
    if counts_as is not None:
        COUNTS_AS[name] = counts_as
    if switch_in_read:
        _SWITCH_IN_READ.add(name)
    return decorate


def access_verb(
    actor: Actor, name: str, allowed: frozenset[ActorKind], *, switch: bool = True
) -> None:
    """Refuse a verb the actor may not call (R22), and every tester call while it is off
    (`switch`; otherwise the verb's thread read checks it)."""
    code = policy.verb_refusal(actor, name, allowed)
    if code is not None:
        raise Refusal(code, f"{name} is not available to the {actor.kind.value}.")
    if switch:
        access_tester_switch(actor)


def access_tester_switch(actor: Actor) -> None:
    """Refuse every call of the tester while its business has it off (one read)."""
    if (
        actor.is_tester
        and not Business.objects.filter(pk=actor.business_id, tester_enabled=True).exists()
    ):
        raise _tester_off()


def _tester_off() -> Refusal:
    return Refusal(refusals.TESTER_OFF, "The tester is off for this business.")


def access_human_actor(*, username: str) -> Actor:
    """The human actor for a signed-in user: the human of exactly one business."""
    business = _business_by("human", username) if username else None
    if business is None:
        raise Refusal(refusals.NOT_AUTHENTICATED, "This user is not the human of a business.")
    business_id, _ = business
    return Actor.human(business_id=business_id, username=username)


def access_tester_actor(*, business_slug: str) -> Actor:
    """The tester actor of a business, built on its own (L5); refused while the tester is off."""
    business = _business_by("slug", business_slug)
    if business is None:
        raise Refusal(refusals.NOT_FOUND, "No such business.")
    business_id, tester_enabled = business
    if not tester_enabled:
        raise Refusal(refusals.TESTER_OFF, "The tester is off for this business.")
    return Actor.tester(business_id=business_id)


def _business_by(column: Literal["human", "slug"], value: str) -> tuple[int, bool] | None:
    """(id, tester switch) of the business whose unique `column` is `value`, or None.

    Written as SQL: it is the listeners' read of every request, and the ORM took four times
    as long to build it as the database to answer it (0.45 against 0.12 ms of CPU).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, tester_enabled FROM {Business._meta.db_table} WHERE {column} = %s",
            [value],
        )
        row = cursor.fetchone()
    return None if row is None else (row[0], bool(row[1]))


# The columns of `access_thread`'s read, in order: the thread's own, then what a turn decides on.
_THREAD_COLUMNS = (
    "id",
    "project_id",
    "name",
    "owner",
    "instance_id",
    "created_at",
    "archived_at",
    "read_up_to",
    "active_at",
    "pinned_at",
    "branched_from_id",
    "branched_at_id",
)
_INSTANCE_COLUMNS = ("id", "business_id", "name", "role_id")
_ROLE_COLUMNS = ("id", "business_id", "name", "receive_from", "send_to", "cross_role")


# The key of each business's stream lock: (STREAM_LOCK, business id) in PostgreSQL's two-key
# advisory lock space (`broker.actions.streams.do_lock_streams` says what it is for).
STREAM_LOCK = 0x4D42
TAKE_STREAM_LOCK = "pg_advisory_xact_lock(%s::integer, %s::integer)"


def stream_lock_key(business_id: int) -> list[int]:
    return [STREAM_LOCK, business_id & 0x7FFFFFFF]


def _thread_read(*, lock: bool, take_streams: bool) -> str:
    """The one read behind `access_thread`, written out (see its docstring)."""
    tables = {
        "thread": Thread._meta.db_table,
        "project": Project._meta.db_table,
        "business": Business._meta.db_table,
        "instance": Instance._meta.db_table,
        "role": RoleDefinition._meta.db_table,
        "claim": ThreadClaim._meta.db_table,
    }
    columns = ", ".join(
        [
            # Evaluated as the row is read, before FOR UPDATE locks it: the stream lock first.
            *([TAKE_STREAM_LOCK] if take_streams else []),
            *(f"t.{column}" for column in _THREAD_COLUMNS),
            "b.tester_enabled",
            *(f"i.{column}" for column in _INSTANCE_COLUMNS),
            *(f"r.{column}" for column in _ROLE_COLUMNS),
            f"(SELECT c.run FROM {tables['claim']} c"
            " WHERE c.thread_id = t.id AND c.ended_at IS NULL LIMIT 1)",
        ]
    )
    sql = (
        f"SELECT {columns} FROM {tables['thread']} t"
        f" JOIN {tables['project']} p ON p.id = t.project_id"
        f" JOIN {tables['business']} b ON b.id = p.business_id"
        f" JOIN {tables['instance']} i ON i.id = t.instance_id"
        f" JOIN {tables['role']} r ON r.id = i.role_id"
        " WHERE t.id = %s AND p.business_id = %s"
    )
    if lock and connection.features.has_select_for_no_key_update:
        # NO KEY: a row that only references the thread (a turn's progress) still inserts.
        sql += " FOR NO KEY UPDATE OF t"
    return sql


def access_thread(
    actor: Actor, *, thread_id: int, lock: bool = False, take_streams: bool = False
) -> Thread:
    """R1: the actor's own thread, or a refusal. The one owner check for every thread verb.

    A thread of another business is `not-found`, as a missing one: nothing is revealed across
    businesses. Within the business the other side's thread is `thread-not-owned` (SPEC R1).
    The tester is refused `tester-off` while its business has it off, read from the same row,
    before anything else is told. `lock` holds the thread's row until the transaction ends
    (FOR NO KEY UPDATE, as every lock of a thread's row: it excludes every other writer of the
    row but not the key check of an insert that references it — see `runner.claims`);
    `take_streams` takes the business's stream lock before it in the same statement
    (PostgreSQL; see `broker.actions.streams.appending_to_thread`).

    One query: the thread, its instance with the role's lists (`thread.instance.role`), the
    business's tester switch, and the run holding its open claim (`thread.holder`, "" when
    none). It is written as SQL because it is the read of every turn, and building it through
    the ORM cost ten times running it (docs/benchmarks.md, P1c).
    """
    take_streams = take_streams and lock and connection.vendor == "postgresql"
    key = stream_lock_key(actor.business_id) if take_streams else []
    with connection.cursor() as cursor:
        cursor.execute(
            _thread_read(lock=lock, take_streams=take_streams),
            [*key, thread_id, actor.business_id],
        )
        row = cursor.fetchone()
    if row is None:
        # While the tester is off it learns nothing, not even that the id is unknown.
        access_tester_switch(actor)
        raise Refusal(refusals.NOT_FOUND, "No such thread.")
    values = iter(row[1:] if take_streams else row)
    thread_values = [next(values) for _ in _THREAD_COLUMNS]
    tester_enabled = bool(next(values))
    instance_values = [next(values) for _ in _INSTANCE_COLUMNS]
    role_values = [next(values) for _ in _ROLE_COLUMNS]
    holder = next(values)
    thread = _loaded(Thread, _THREAD_COLUMNS, thread_values)
    if actor.is_tester and not tester_enabled:
        raise _tester_off()
    if thread.owner != policy.owner(actor):
        raise Refusal(refusals.THREAD_NOT_OWNED, "This thread belongs to someone else.")
    thread.instance = _loaded(Instance, _INSTANCE_COLUMNS, instance_values)
    thread.instance.role = _loaded(RoleDefinition, _ROLE_COLUMNS, role_values)
    thread.holder = holder or ""  # type: ignore[attr-defined]
    return thread


M = TypeVar("M", bound=models.Model)


def _loaded(model: type[M], columns: tuple[str, ...], values: list[Any]) -> M:
    """A model instance from its columns' raw values, converted as the ORM converts them."""
    # The thread's own connection, looked up once: each attribute read through Django's
    # `connection` proxy looks it up again, and a turn's read converts twenty-two values.
    db = connections[DEFAULT_DB_ALIAS]
    converted = [
        _converted(db, model._meta.get_field(column), value)
        for column, value in zip(columns, values, strict=True)
    ]
    return model.from_db(db.alias, list(columns), converted)


def _converted(db: BaseDatabaseWrapper, field: Any, value: object) -> object:
    """A column's value as the ORM would give it (the backend's and the field's converters)."""
    converters = db.ops.get_db_converters(field.cached_col) + field.get_db_converters(db)
    for convert in converters:
        value = convert(value, field.cached_col, db)
    return value


def access_claim(actor: Actor, *, claim_id: int) -> ThreadClaim:
    """The run's own open claim, locked; a claim that ended or whose lease ran out refuses.

    Every write a run makes names its claim and comes through here, so a stopped, revoked or
    expired run can write nothing (`claim-ended`).
    """
    claim = (
        ThreadClaim.objects.select_for_update(of=("self",))
        .select_related("thread__project", "thread__instance", "instance")
        .filter(
            pk=claim_id,
            run=actor.run,
            instance__name=actor.role,
            instance__business_id=actor.business_id,
        )
        .first()
    )
    if claim is None:
        raise Refusal(refusals.NOT_FOUND, "No such claim for this run.")
    if claim.ended_at is not None:
        raise Refusal(refusals.CLAIM_ENDED, f"The claim ended: {claim.end_reason}.")
    if claim.lease_expires_at <= timezone.now():
        raise Refusal(refusals.CLAIM_ENDED, "The claim's lease ran out.")
    return claim


def access_message(actor: Actor, *, message_id: int) -> Message:
    """A message of the actor's business, by id (what a reply may name as in_reply_to)."""
    message = Message.objects.filter(pk=message_id, business_id=actor.business_id).first()
    if message is None:
        raise Refusal(refusals.NOT_FOUND, "No such message.")
    return message


def access_instance(actor: Actor, *, name: str) -> Instance:
    instance = Instance.objects.filter(business_id=actor.business_id, name=name).first()
    if instance is None:
        raise Refusal(refusals.NOT_FOUND, f"No instance named {name!r}.")
    return instance


def roles_of(business_id: int) -> dict[str, RoleLists]:
    """Each instance's address mapped to its role's lists, as the messaging check reads them."""
    return {
        instance.name: lists_of(instance)
        for instance in Instance.objects.filter(business_id=business_id).select_related("role")
    }


def lists_of(instance: Instance) -> RoleLists:
    """The instance's role lists (its role already loaded)."""
    return RoleLists.of(
        receive_from=instance.role.receive_from,
        send_to=instance.role.send_to,
        cross_role=instance.role.cross_role,
    )


def check_messaging(
    actor: Actor,
    *,
    sender: str,
    recipient: str,
    thread_owner: str | None,
    roles: dict[str, RoleLists] | None = None,
) -> dict[str, RoleLists]:
    """Refuse a message the lists do not allow (R8–R11); returns the lists it read.

    `roles` defaults to every instance of the business; a caller that knows both ends may pass
    the lists of the instances among them (`human` and `tester` have none).
    """
    if roles is None:
        roles = roles_of(actor.business_id)
    code = policy.messaging_refusal(
        sender=sender, recipient=recipient, roles=roles, thread_owner=thread_owner
    )
    if code is not None:
        raise Refusal(code, f"{sender} may not message {recipient} here.")
    return roles


def lease_deadline() -> datetime:
    seconds: float = settings.MOSAIC_CLAIM_LEASE_SECONDS
    return timezone.now() + timedelta(seconds=seconds)
