"""SPEC §3 in the database: append-only tables, threads and tasks never deleted, R15, and a
thread's consistency.

Rows are written straight through the ORM or raw SQL, bypassing the broker: these tests prove
the database itself refuses, whatever the code path. Each refused write runs in its own
`transaction.atomic()` so that, on PostgreSQL, the test's transaction stays usable afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from broker import actions, guards
from broker.actors import Actor
from broker.models import (
    Business,
    Decision,
    Event,
    EventKind,
    Instance,
    Message,
    MessageClass,
    Project,
    RoleDefinition,
    Task,
    Thread,
    ThreadOpen,
    TrailRow,
)
from tests.broker import factories
from tests.support.marks import postgres_only


def refused(message: str) -> pytest.RaisesExc[IntegrityError]:
    return pytest.raises(IntegrityError, match=re.escape(message))


# The column each test rewrites, and the value it tries to write.
REWRITES: dict[type[models.Model], tuple[str, object]] = {
    Message: ("body", "rewritten"),
    Event: ("kind", EventKind.TASK_CREATED.value),
    ThreadOpen: ("by", "mallory"),
    TrailRow: ("text", "rewritten"),
    Decision: ("body", "rewritten"),
}


def make_project(business: Business, name: str = "product") -> Project:
    return Project.objects.create(business=business, name=name, created_by=business.human)


def make_thread(business: Business, *, name: str = "chat", instance: str = "assistant") -> Thread:
    project = Project.objects.filter(business=business).first() or make_project(business)
    return Thread.objects.create(
        project=project,
        name=name,
        owner=business.human,
        instance=Instance.objects.get(business=business, name=instance),
    )


def make_instance(business: Business, name: str) -> Instance:
    role = RoleDefinition.objects.get(business=business, name="assistant")
    return Instance.objects.create(business=business, name=name, role=role)


def make_message(
    thread: Thread | None, *, business: Business, from_role: str, to_role: str
) -> Message:
    return Message.objects.create(
        business=business,
        thread=thread,
        from_role=from_role,
        from_run="" if from_role in ("human", "tester") else "run-1",
        to_role=to_role,
        message_class=MessageClass.REQUEST,
        body="hello",
    )


@pytest.fixture
def records(business: Business) -> dict[type[models.Model], models.Model]:
    """One row of each append-only model, with nothing pointing at it (so deletes reach SQL)."""
    thread = make_thread(business)
    return {
        Message: make_message(thread, business=business, from_role="human", to_role="assistant"),
        Event: Event.objects.create(business=business, kind=EventKind.HUMAN_INPUT),
        ThreadOpen: ThreadOpen.objects.create(thread=thread, by="ada"),
        TrailRow: TrailRow.objects.create(
            business=business,
            thread=thread,
            from_role="human",
            from_run="",
            to_role="assistant",
            actor_role="human",
            actor_run="",
            text="ada to assistant",
        ),
        Decision: Decision.objects.create(
            business=business,
            thread=thread,
            from_role="assistant",
            from_run="run-1",
            route_to="human",
            body="ship it?",
        ),
    }


def snapshot(row: models.Model) -> dict[str, Any]:
    return type(row)._default_manager.filter(pk=row.pk).values().get()


def raw(sql: str, params: list[object]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def column(model: type[models.Model], field: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(field).column)


# Every way a row can be rewritten or removed: (row, field, value) -> None.
def save_changed(row: models.Model, field: str, value: object) -> None:
    setattr(row, field, value)
    row.save()


def queryset_update(row: models.Model, field: str, value: object) -> None:
    type(row)._default_manager.filter(pk=row.pk).update(**{field: value})


def instance_delete(row: models.Model, field: str, value: object) -> None:
    row.delete()


def queryset_delete(row: models.Model, field: str, value: object) -> None:
    type(row)._default_manager.filter(pk=row.pk).delete()


def bulk_update(row: models.Model, field: str, value: object) -> None:
    setattr(row, field, value)
    type(row)._default_manager.bulk_update([row], [field])


def raw_update(row: models.Model, field: str, value: object) -> None:
    model = type(row)
    raw(
        f"UPDATE {model._meta.db_table} SET {column(model, field)} = %s WHERE id = %s",
        [value, row.pk],
    )


def raw_delete(row: models.Model, field: str, value: object) -> None:
    raw(f"DELETE FROM {type(row)._meta.db_table} WHERE id = %s", [row.pk])


WRITES = [
    save_changed,
    queryset_update,
    instance_delete,
    queryset_delete,
    bulk_update,
    raw_update,
    raw_delete,
]


@pytest.mark.parametrize("write", WRITES, ids=lambda write: write.__name__)
@pytest.mark.parametrize("model", list(REWRITES), ids=lambda model: model.__name__)
def test_write_append_only_row_refused(
    records: dict[type[models.Model], models.Model],
    model: type[models.Model],
    write: Callable[[models.Model, str, object], None],
) -> None:
    """SPEC §3 append-only: no UPDATE or DELETE, by any ORM path or raw SQL."""
    row = records[model]
    field, value = REWRITES[model]
    before = snapshot(row)

    with refused(guards.append_only_refused(model._meta.db_table)), transaction.atomic():
        write(row, field, value)

    assert snapshot(row) == before


def settle_foreign_keys() -> None:
    """Run the deferred foreign-key checks of the fixture's inserts now.

    PostgreSQL refuses to TRUNCATE a table with pending trigger events before any trigger of
    ours runs; settling them first lets the TRUNCATE reach the guard.
    """
    raw("SET CONSTRAINTS ALL IMMEDIATE", [])


@postgres_only
@pytest.mark.parametrize("model", list(REWRITES), ids=lambda model: model.__name__)
def test_truncate_append_only_table_refused(
    records: dict[type[models.Model], models.Model], model: type[models.Model]
) -> None:
    """SPEC §3 append-only: TRUNCATE, even CASCADE past the foreign keys, is refused."""
    table = model._meta.db_table
    settle_foreign_keys()

    with refused(guards.append_only_refused(table)), transaction.atomic():
        raw(f"TRUNCATE {table} CASCADE", [])

    assert model._default_manager.filter(pk=records[model].pk).exists()


@postgres_only
def test_truncate_cascading_into_append_only_table_refused(
    records: dict[type[models.Model], models.Model],
) -> None:
    """SPEC §3 append-only: a TRUNCATE of a parent table cannot empty its append-only children."""
    settle_foreign_keys()
    with pytest.raises(IntegrityError, match="is append-only"), transaction.atomic():
        raw("TRUNCATE broker_business CASCADE", [])

    assert all(type(row)._default_manager.filter(pk=row.pk).exists() for row in records.values())


def test_create_append_only_rows_accepted(records: dict[type[models.Model], models.Model]) -> None:
    """SPEC §3 append-only: inserting is how the record grows."""
    assert {type(row) for row in records.values()} == set(REWRITES)
    assert all(row.pk is not None for row in records.values())


# --- R15: a task's request is a human.input event ---------------------------------------------

NOT_HUMAN_INPUT = [kind for kind in EventKind if kind != EventKind.HUMAN_INPUT]


def create_task(business: Business, request: Event) -> None:
    Task.objects.create(business=business, request=request, title="t", created_by_run="run-1")


def insert_task(business: Business, request: Event) -> None:
    raw(
        "INSERT INTO broker_task (business_id, request_id, title, created_by_run, created_at)"
        " VALUES (%s, %s, %s, %s, %s)",
        [business.pk, request.pk, "t", "run-1", timezone.now()],
    )


@pytest.mark.parametrize("kind", NOT_HUMAN_INPUT, ids=str)
@pytest.mark.parametrize("insert", [create_task, insert_task], ids=lambda f: f.__name__)
def test_create_task_request_not_human_input_refused(
    business: Business, kind: EventKind, insert: Callable[[Business, Event], None]
) -> None:
    """R15: the database refuses a task whose request is not a `human.input` event."""
    request = Event.objects.create(business=business, kind=kind)

    with refused(guards.R15_REFUSED), transaction.atomic():
        insert(business, request)

    assert not Task.objects.exists()


@pytest.mark.parametrize("insert", [create_task, insert_task], ids=lambda f: f.__name__)
def test_create_task_request_human_input_accepted(
    business: Business, insert: Callable[[Business, Event], None]
) -> None:
    """R15: a task made from a `human.input` event is stored."""
    request = Event.objects.create(business=business, kind=EventKind.HUMAN_INPUT)

    insert(business, request)

    assert Task.objects.get().request == request


def test_update_task_request_to_task_created_refused(business: Business) -> None:
    """R15: a stored task cannot be pointed at a non-`human.input` event afterwards."""
    task = Task.objects.create(
        business=business,
        request=Event.objects.create(business=business, kind=EventKind.HUMAN_INPUT),
        title="t",
        created_by_run="run-1",
    )
    created = Event.objects.create(business=business, kind=EventKind.TASK_CREATED)

    with refused(guards.R15_REFUSED), transaction.atomic():
        Task.objects.filter(pk=task.pk).update(request=created)

    task.refresh_from_db()
    assert task.request.kind == EventKind.HUMAN_INPUT


def test_save_task_unchanged_request_accepted(business: Business) -> None:
    """R15: saving a valid task again (Django writes every column) passes the check."""
    task = Task.objects.create(
        business=business,
        request=Event.objects.create(business=business, kind=EventKind.HUMAN_INPUT),
        title="t",
        created_by_run="run-1",
    )
    task.title = "renamed"
    task.save()

    assert Task.objects.get().title == "renamed"


# --- A thread's message has the thread's instance at one end ----------------------------------


@pytest.mark.parametrize(
    ("from_role", "to_role"),
    [("human", "helper"), ("helper", "human"), ("tester", "human"), ("human", "human")],
)
def test_create_thread_message_without_thread_instance_refused(
    business: Business, from_role: str, to_role: str
) -> None:
    """SPEC §3: a thread's message has the thread's instance as from_role or to_role."""
    make_instance(business, "helper")
    thread = make_thread(business)

    with refused(guards.MESSAGE_INSTANCE_REFUSED), transaction.atomic():
        make_message(thread, business=business, from_role=from_role, to_role=to_role)

    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("from_role", "to_role"),
    [("human", "assistant"), ("assistant", "human"), ("assistant", "tester")],
)
def test_create_thread_message_with_thread_instance_accepted(
    business: Business, from_role: str, to_role: str
) -> None:
    """SPEC §3: either end may be the thread's instance."""
    thread = make_thread(business)

    make_message(thread, business=business, from_role=from_role, to_role=to_role)

    assert Message.objects.get().thread == thread


def test_create_message_outside_thread_accepted(business: Business) -> None:
    """SPEC §3: the thread rule binds only messages that have a thread."""
    make_instance(business, "helper")

    make_message(None, business=business, from_role="assistant", to_role="helper")

    assert Message.objects.get().thread is None


def test_update_thread_instance_under_messages_refused(business: Business) -> None:
    """SPEC §3: moving a thread to another instance would orphan its messages' ends."""
    helper = make_instance(business, "helper")
    thread = make_thread(business)
    make_message(thread, business=business, from_role="human", to_role="assistant")

    with refused(guards.THREAD_MESSAGES_REFUSED), transaction.atomic():
        Thread.objects.filter(pk=thread.pk).update(instance=helper)

    assert Thread.objects.get().instance.name == "assistant"


def test_update_thread_instance_to_other_end_of_its_messages_refused(business: Business) -> None:
    """SPEC §3: once a thread has messages its instance is fixed, even for an instance that is
    at the other end of every message (a thread's instance is whom its turns go to)."""
    helper = make_instance(business, "helper")
    thread = make_thread(business)
    make_message(thread, business=business, from_role="assistant", to_role="helper")

    with refused(guards.THREAD_MESSAGES_REFUSED), transaction.atomic():
        Thread.objects.filter(pk=thread.pk).update(instance=helper)

    assert Thread.objects.get().instance.name == "assistant"


def test_update_thread_instance_without_messages_accepted(business: Business) -> None:
    """SPEC §3: a thread with no messages yet may change instance within its business."""
    helper = make_instance(business, "helper")
    thread = make_thread(business)

    thread.instance = helper
    thread.save()

    assert Thread.objects.get().instance == helper


def test_rename_instance_under_thread_messages_refused(business: Business) -> None:
    """SPEC §3: renaming the instance would leave its threads' messages naming nobody."""
    thread = make_thread(business)
    make_message(thread, business=business, from_role="human", to_role="assistant")

    with refused(guards.INSTANCE_RENAME_REFUSED), transaction.atomic():
        Instance.objects.filter(business=business, name="assistant").update(name="renamed")

    assert Instance.objects.filter(business=business, name="assistant").exists()


def test_save_instance_unchanged_name_accepted(business: Business) -> None:
    """SPEC §3: saving an instance (every column written) passes while its name stays."""
    thread = make_thread(business)
    make_message(thread, business=business, from_role="human", to_role="assistant")
    instance = Instance.objects.get(business=business, name="assistant")

    instance.save()

    assert Instance.objects.get(pk=instance.pk).name == "assistant"


# --- A thread's instance belongs to the project's business -----------------------------------


def test_create_thread_instance_of_other_business_refused(
    business: Business, other_business: Business
) -> None:
    """SPEC §3: a thread's instance belongs to the project's business."""
    project = make_project(business)
    foreign = Instance.objects.get(business=other_business, name="assistant")

    with refused(guards.THREAD_BUSINESS_REFUSED), transaction.atomic():
        Thread.objects.create(project=project, name="chat", owner="ada", instance=foreign)

    assert not Thread.objects.exists()


def test_create_thread_instance_of_project_business_accepted(business: Business) -> None:
    """SPEC §3: the project's own business's instance is accepted."""
    thread = make_thread(business)

    assert thread.instance.business == thread.project.business == business


@pytest.mark.parametrize("how", ["save", "update"])
def test_update_thread_instance_to_other_business_refused(
    business: Business, other_business: Business, how: str
) -> None:
    """SPEC §3: a thread cannot be moved onto another business's instance."""
    thread = make_thread(business)
    foreign = Instance.objects.get(business=other_business, name="assistant")

    with refused(guards.THREAD_BUSINESS_REFUSED), transaction.atomic():
        if how == "save":
            thread.instance = foreign
            thread.save()
        else:
            Thread.objects.filter(pk=thread.pk).update(instance=foreign)

    assert Thread.objects.get().instance.business == business


def test_update_thread_project_to_other_business_refused(
    business: Business, other_business: Business
) -> None:
    """SPEC §3: a thread cannot be moved into another business's project."""
    thread = make_thread(business)
    foreign = make_project(other_business)

    with refused(guards.THREAD_BUSINESS_REFUSED), transaction.atomic():
        Thread.objects.filter(pk=thread.pk).update(project=foreign)

    assert Thread.objects.get().project.business == business


def test_update_instance_business_under_threads_refused(
    business: Business, other_business: Business
) -> None:
    """SPEC §3: an instance with threads cannot leave their projects' business."""
    make_instance(business, "helper")
    make_thread(business, instance="helper")

    with refused(guards.INSTANCE_BUSINESS_REFUSED), transaction.atomic():
        Instance.objects.filter(business=business, name="helper").update(business=other_business)

    assert Instance.objects.get(name="helper").business == business


def test_update_project_business_under_threads_refused(
    business: Business, other_business: Business
) -> None:
    """SPEC §3: a project with threads cannot leave their instances' business."""
    thread = make_thread(business)

    with refused(guards.PROJECT_BUSINESS_REFUSED), transaction.atomic():
        Project.objects.filter(pk=thread.project_id).update(business=other_business)

    assert Project.objects.get(pk=thread.project_id).business == business


def test_update_project_business_without_threads_refused(
    business: Business, other_business: Business
) -> None:
    """SPEC §3: a project's business is immutable, threads or not."""
    project = make_project(business)

    with refused(guards.PROJECT_BUSINESS_REFUSED), transaction.atomic():
        Project.objects.filter(pk=project.pk).update(business=other_business)

    assert Project.objects.get(pk=project.pk).business == business


def test_save_project_unchanged_business_accepted(business: Business) -> None:
    """SPEC §3: saving a project again (every column written) passes while its business stays."""
    project = make_project(business)
    project.name = "renamed"
    project.save()

    assert Project.objects.get(pk=project.pk).name == "renamed"


# --- A thread's owner is immutable ------------------------------------------------------------


def save_owner(thread: Thread, owner: str) -> None:
    thread.owner = owner
    thread.save()


def update_owner(thread: Thread, owner: str) -> None:
    Thread.objects.filter(pk=thread.pk).update(owner=owner)


def raw_update_owner(thread: Thread, owner: str) -> None:
    raw("UPDATE broker_thread SET owner = %s WHERE id = %s", [owner, thread.pk])


@pytest.mark.parametrize(
    "write", [save_owner, update_owner, raw_update_owner], ids=lambda f: f.__name__
)
@pytest.mark.parametrize(
    ("before", "after"), [("tester", "ada"), ("ada", "tester"), ("ada", "grace")]
)
def test_update_thread_owner_refused(
    business: Business, before: str, after: str, write: Callable[[Thread, str], None]
) -> None:
    """SPEC §3 (R9): a thread never changes owner; tester to human would carry it across the
    wall, by any ORM path or raw SQL."""
    thread = Thread.objects.create(
        project=make_project(business),
        name="chat",
        owner=before,
        instance=Instance.objects.get(business=business, name="assistant"),
    )

    with refused(guards.THREAD_OWNER_REFUSED), transaction.atomic():
        write(thread, after)

    assert Thread.objects.get(pk=thread.pk).owner == before


def test_save_thread_unchanged_owner_accepted(business: Business) -> None:
    """SPEC §3: saving a thread again (every column written) passes while its owner stays."""
    thread = make_thread(business)
    thread.name = "renamed"
    thread.save()

    assert Thread.objects.get(pk=thread.pk).name == "renamed"


# --- Threads and tasks are never deleted ------------------------------------------------------


def make_task(business: Business) -> Task:
    return Task.objects.create(
        business=business,
        request=Event.objects.create(business=business, kind=EventKind.HUMAN_INPUT),
        title="t",
        created_by_run="run-1",
    )


DELETES = [instance_delete, queryset_delete, raw_delete]
TRUNCATE_REFUSED = r"is append-only|rows are never deleted"


@pytest.mark.parametrize("owner", ["ada", "tester"])
@pytest.mark.parametrize("delete", DELETES, ids=lambda delete: delete.__name__)
def test_delete_thread_refused(
    business: Business, owner: str, delete: Callable[[models.Model, str, object], None]
) -> None:
    """SPEC §3: a thread is never deleted, the human's nor the tester's (but by the purge, under
    its permit: tests/broker/test_tester_purge.py), by any ORM path or raw SQL."""
    thread = Thread.objects.create(
        project=make_project(business),
        name="chat",
        owner=owner,
        instance=Instance.objects.get(business=business, name="assistant"),
    )

    with refused(guards.never_deleted_refused("broker_thread")), transaction.atomic():
        delete(thread, "name", None)

    assert Thread.objects.filter(pk=thread.pk).exists()


def test_raw_delete_of_a_thread_with_messages_refused(business: Business) -> None:
    """SPEC §3: a database shell's `DELETE FROM broker_thread` (where foreign keys may be off,
    as in sqlite3's shell, or deferred, as Django makes them) cannot leave a thread's messages
    pointing at nothing: the guard refuses the delete itself."""
    thread = make_thread(business)
    message = make_message(thread, business=business, from_role="human", to_role="assistant")

    with refused(guards.never_deleted_refused("broker_thread")), transaction.atomic():
        raw("DELETE FROM broker_thread", [])

    assert Message.objects.get(pk=message.pk).thread == thread


@pytest.mark.parametrize("delete", DELETES, ids=lambda delete: delete.__name__)
def test_delete_task_refused(
    business: Business, delete: Callable[[models.Model, str, object], None]
) -> None:
    """SPEC §3 (R15): a task, made from the human's input, is never deleted."""
    task = make_task(business)

    with refused(guards.never_deleted_refused("broker_task")), transaction.atomic():
        delete(task, "title", None)

    assert Task.objects.filter(pk=task.pk).exists()


@postgres_only
@pytest.mark.parametrize("model", [Thread, Task], ids=lambda model: model.__name__)
def test_truncate_thread_or_task_table_refused(
    business: Business, model: type[models.Model]
) -> None:
    """SPEC §3: TRUNCATE empties no thread or task table, CASCADE or not."""
    row = make_thread(business) if model is Thread else make_task(business)
    settle_foreign_keys()

    # CASCADE reaches the append-only tables that point at threads; whichever guard fires first
    # refuses the whole statement.
    with pytest.raises(IntegrityError, match=TRUNCATE_REFUSED), transaction.atomic():
        raw(f"TRUNCATE {model._meta.db_table} CASCADE", [])

    assert model._default_manager.filter(pk=row.pk).exists()


def test_thread_rename_archive_and_task_update_still_pass(human: Actor) -> None:
    """SPEC §6.2: a thread's rename and archive are updates, which its delete guard leaves be;
    so is a raw UPDATE of a thread or a task."""
    thread = factories.thread(human, factories.project(human), "chat")
    actions.send_to_thread(human, thread_id=thread.pk, body="hello")

    actions.change_thread(human, thread_id=thread.pk, name="renamed", archived=True)
    raw("UPDATE broker_thread SET name = %s WHERE id = %s", ["again", thread.pk])
    task = make_task(Business.objects.get(pk=human.business_id))
    raw("UPDATE broker_task SET title = %s WHERE id = %s", ["retitled", task.pk])

    stored = Thread.objects.get(pk=thread.pk)
    assert (stored.name, stored.archived) == ("again", True)
    assert Task.objects.get(pk=task.pk).title == "retitled"


# --- Flush: the one command that lifts the guards ---------------------------------------------


def assert_guarded() -> None:
    """The guards are installed and refusing, on a fresh row of its own."""
    assert guards.installed(connection)
    business = Business.objects.create(slug="after-flush", human="grace-hopper")
    event = Event.objects.create(business=business, kind=EventKind.HUMAN_INPUT)
    with refused(guards.append_only_refused("broker_event")), transaction.atomic():
        Event.objects.filter(pk=event.pk).update(kind=EventKind.TASK_CREATED)


def test_flush_guarded_tables_emptied_and_guards_back(
    transactional_db: None, records: dict[type[models.Model], models.Model], business: Business
) -> None:
    """SPEC §3: flush (tests' teardown) empties the tables, threads and tasks among them, then
    every guard returns."""
    make_task(business)

    call_command("flush", interactive=False, verbosity=0)

    assert not any(model._default_manager.exists() for model in (*REWRITES, Thread, Task))
    assert not Business.objects.exists()
    assert guards.missing(connection) == []
    assert_guarded()


def test_flush_failing_guards_kept(
    transactional_db: None,
    records: dict[type[models.Model], models.Model],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPEC §3 append-only: a flush that fails leaves the rows and the guards in place."""

    def broken(sql_list: list[str]) -> None:
        raise RuntimeError("flush interrupted")

    monkeypatch.setattr(connection.ops, "execute_sql_flush", broken)

    with pytest.raises(CommandError):
        call_command("flush", interactive=False, verbosity=0)

    monkeypatch.undo()
    assert all(type(row)._default_manager.filter(pk=row.pk).exists() for row in records.values())
    assert_guarded()
