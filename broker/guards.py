"""The invariants the database itself refuses to break (SPEC §3), as SQL for SQLite and PostgreSQL.

- Message, Event, ThreadOpen, TrailRow and Decision are append-only: UPDATE and DELETE (and
  TRUNCATE on PostgreSQL) are refused. One DELETE passes: the tester-data purge's, of a row of a
  tester-owned thread in a transaction that holds a purge permit
  (`broker.actions.tester_purge`); the rows of the human's threads, and every other table's, no
  transaction can delete.
- Threads and tasks are never deleted: DELETE (and TRUNCATE on PostgreSQL) is refused, UPDATE is
  not (a thread is renamed, archived and read). The purge's permit lets a tester-owned thread
  go, as it lets its rows go; a task is the human's (R15), and the purge deletes none.
- R15: a Task's request is a `human.input` event. Events are append-only, so checking the kind
  when the task is written is enough.
- A thread's message has the thread's instance as from_role or to_role.
- A thread's instance belongs to the project's business.
- Immutable once written: a thread's owner (moving a thread would carry it across the wall
  between the human and the tester), a project's business, a thread's instance once the
  thread has messages, and what a branch carries (R24: `branched_from`, `branched_at`).

The last two involve rows of other tables, so the changes that could break them from the other
side are refused too: moving a thread to another instance, renaming an instance, or moving an
instance or a project to another business, while rows depend on it.

Refusals surface as `django.db.IntegrityError` on both vendors: SQLite's `RAISE(ABORT, …)` is a
constraint error, and PostgreSQL's are raised with SQLSTATE class 23 (integrity constraint
violation): `restrict_violation` for append-only and never deleted, `check_violation` for the
rest.

Migration 0002 installs the guards and its reverse drops them; otherwise only the `flush`
command lifts them, for the flush alone, and `migrate` on SQLite, for the migration alone
(`broker.apps`: a table rebuild would trip over the triggers of other tables). The migration
runs this module as it stands, so the SQL here may name only tables that exist once 0001 has
run: a guard on a later table belongs in that table's own migration. Migrations 0004, 0016 and
0018 install the set again for the guards added with them.

A migration that rebuilds a table (SQLite's way to alter most columns) drops that table's
triggers with it, so the guards are an invariant that is checked, not assumed: `missing` names
each absent piece, the system check `mosaic.E003` and the listeners' start-up refuse while any
is missing, and every `migrate` reinstalls them at its end (`broker.apps`).
"""

from __future__ import annotations

from collections.abc import Collection

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

from broker.models import TESTER, PurgePermit

APPEND_ONLY_TABLES = (
    "broker_message",
    "broker_event",
    "broker_threadopen",
    "broker_trailrow",
    "broker_decision",
    "broker_step",
)

# The append-only tables whose rows belong to a thread (`thread_id`): the tester-data purge may
# delete those of a tester-owned thread, under a permit.
PURGEABLE_TABLES = (
    "broker_message",
    "broker_threadopen",
    "broker_trailrow",
    "broker_decision",
    "broker_step",
)

PURGE_PERMIT_TABLE = PurgePermit._meta.db_table

# Tables whose rows change but are never deleted; of them, the purge deletes tester-owned threads.
NEVER_DELETED_TABLES = ("broker_thread", "broker_task")
PURGED_THREADS = "broker_thread"

# Message texts, shared by both vendors.
R15_REFUSED = "broker_task request must be a human.input event (R15)"
MESSAGE_INSTANCE_REFUSED = "broker_message in a thread must have the thread's instance at one end"
THREAD_BUSINESS_REFUSED = "broker_thread instance must belong to the project's business"
THREAD_MESSAGES_REFUSED = "broker_thread instance is immutable once the thread has messages"
INSTANCE_RENAME_REFUSED = "broker_instance name must stay at one end of its threads' messages"
INSTANCE_BUSINESS_REFUSED = "broker_instance business must stay its threads' project's business"
PROJECT_BUSINESS_REFUSED = "broker_project business is immutable"
THREAD_OWNER_REFUSED = "broker_thread owner is immutable"
THREAD_BRANCH_REFUSED = "broker_thread branched_from and branched_at are immutable"

# The branch columns (migration 0018), as `install` names a column it found among the tables:
# the guard that reads them is installed only once they exist, as a later table's guards are.
BRANCH_COLUMNS = "broker_thread.branched_from_id"


def append_only_refused(table: str) -> str:
    return f"{table} is append-only"


def never_deleted_refused(table: str) -> str:
    return f"{table} rows are never deleted"


def _sql_string(text: str) -> str:
    """`text` as the inside of an SQL string literal."""
    return text.replace("'", "''")


# --- SQLite -------------------------------------------------------------------------------------
#
# `RAISE(ABORT, …)` aborts the statement with SQLITE_CONSTRAINT_TRIGGER, which Python's sqlite3
# raises as IntegrityError. The transaction stays open, as with any constraint error. SQLite has
# one writer at a time, so the cross-table checks need no locks.


def _sqlite_trigger(name: str, when: str, condition: str, message: str) -> str:
    return (
        f"CREATE TRIGGER {name} {when}\n"
        f"WHEN {condition}\n"
        f"BEGIN SELECT RAISE(ABORT, '{_sql_string(message)}'); END"
    )


# A delete of a row of a tester-owned thread, while a purge permit exists.
_SQLITE_TESTER_PURGE = f"""EXISTS (SELECT 1 FROM {PURGE_PERMIT_TABLE}) AND EXISTS (
    SELECT 1 FROM broker_thread t WHERE t.id = OLD.thread_id AND t.owner = '{TESTER}'
)"""

# A delete of a tester-owned thread itself, while a purge permit exists.
_SQLITE_TESTER_THREAD_PURGE = (
    f"EXISTS (SELECT 1 FROM {PURGE_PERMIT_TABLE}) AND OLD.owner = '{TESTER}'"
)


def _sqlite_refusal(table: str, event: str, message: str, *, unless: str = "") -> str:
    """The trigger `{table}_no_{event}`: every `event` on `table` refused with `message`, but
    where `unless` holds."""
    when = f"WHEN NOT ({unless})\n" if unless else ""
    return (
        f"CREATE TRIGGER {table}_no_{event.lower()} BEFORE {event} ON {table}\n"
        f"{when}BEGIN SELECT RAISE(ABORT, '{_sql_string(message)}'); END"
    )


def _sqlite_append_only(table: str, *, purgeable: bool) -> tuple[str, ...]:
    """UPDATE and DELETE refused; with `purgeable`, a DELETE of a row of a tester-owned thread
    passes while a purge permit exists (only the purging transaction can see its own)."""
    refused = append_only_refused(table)
    return (
        _sqlite_refusal(table, "UPDATE", refused),
        _sqlite_refusal(table, "DELETE", refused, unless=_SQLITE_TESTER_PURGE if purgeable else ""),
    )


def _sqlite_never_deleted(table: str, *, purgeable: bool) -> str:
    """DELETE refused; with `purgeable`, a tester-owned thread's passes while a purge permit
    exists."""
    unless = _SQLITE_TESTER_THREAD_PURGE if purgeable else ""
    return _sqlite_refusal(table, "DELETE", never_deleted_refused(table), unless=unless)


_SQLITE_TASK_REQUEST = """NOT EXISTS (
    SELECT 1 FROM broker_event e WHERE e.id = NEW.request_id AND e.kind = 'human.input'
)"""

_SQLITE_MESSAGE_INSTANCE = """NEW.thread_id IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM broker_thread t JOIN broker_instance i ON i.id = t.instance_id
    WHERE t.id = NEW.thread_id AND i.name IN (NEW.from_role, NEW.to_role)
)"""

_SQLITE_THREAD_BUSINESS = """NOT EXISTS (
    SELECT 1 FROM broker_instance i JOIN broker_project p ON p.business_id = i.business_id
    WHERE i.id = NEW.instance_id AND p.id = NEW.project_id
)"""

_SQLITE_THREAD_MESSAGES = """NEW.instance_id IS NOT OLD.instance_id AND EXISTS (
    SELECT 1 FROM broker_message m WHERE m.thread_id = OLD.id
)"""

_SQLITE_THREAD_OWNER = "NEW.owner IS NOT OLD.owner"

_SQLITE_INSTANCE_RENAME = """NEW.name IS NOT OLD.name AND EXISTS (
    SELECT 1 FROM broker_thread t JOIN broker_message m ON m.thread_id = t.id
    WHERE t.instance_id = OLD.id AND NEW.name NOT IN (m.from_role, m.to_role)
)"""

_SQLITE_INSTANCE_BUSINESS = """NEW.business_id IS NOT OLD.business_id AND EXISTS (
    SELECT 1 FROM broker_thread t JOIN broker_project p ON p.id = t.project_id
    WHERE t.instance_id = OLD.id AND p.business_id IS NOT NEW.business_id
)"""

_SQLITE_PROJECT_BUSINESS = "NEW.business_id IS NOT OLD.business_id"

_SQLITE_THREAD_BRANCH = (
    "NEW.branched_from_id IS NOT OLD.branched_from_id"
    " OR NEW.branched_at_id IS NOT OLD.branched_at_id"
)

# (name, timing and event, condition, message). `UPDATE OF` fires whenever the column is in the
# SET list, and Django's save() sets every column, so the update conditions compare OLD and NEW.
_SQLITE_CHECKS = (
    (
        "broker_task_request_insert",
        "BEFORE INSERT ON broker_task",
        _SQLITE_TASK_REQUEST,
        R15_REFUSED,
    ),
    (
        "broker_task_request_update",
        "BEFORE UPDATE OF request_id ON broker_task",
        _SQLITE_TASK_REQUEST,
        R15_REFUSED,
    ),
    (
        "broker_message_thread_instance",
        "BEFORE INSERT ON broker_message",
        _SQLITE_MESSAGE_INSTANCE,
        MESSAGE_INSTANCE_REFUSED,
    ),
    (
        "broker_thread_business_insert",
        "BEFORE INSERT ON broker_thread",
        _SQLITE_THREAD_BUSINESS,
        THREAD_BUSINESS_REFUSED,
    ),
    (
        "broker_thread_business_update",
        "BEFORE UPDATE OF project_id, instance_id ON broker_thread",
        _SQLITE_THREAD_BUSINESS,
        THREAD_BUSINESS_REFUSED,
    ),
    (
        "broker_thread_keeps_messages",
        "BEFORE UPDATE OF instance_id ON broker_thread",
        _SQLITE_THREAD_MESSAGES,
        THREAD_MESSAGES_REFUSED,
    ),
    (
        "broker_thread_keeps_owner",
        "BEFORE UPDATE OF owner ON broker_thread",
        _SQLITE_THREAD_OWNER,
        THREAD_OWNER_REFUSED,
    ),
    (
        "broker_instance_keeps_messages",
        "BEFORE UPDATE OF name ON broker_instance",
        _SQLITE_INSTANCE_RENAME,
        INSTANCE_RENAME_REFUSED,
    ),
    (
        "broker_instance_keeps_business",
        "BEFORE UPDATE OF business_id ON broker_instance",
        _SQLITE_INSTANCE_BUSINESS,
        INSTANCE_BUSINESS_REFUSED,
    ),
    (
        "broker_project_keeps_business",
        "BEFORE UPDATE OF business_id ON broker_project",
        _SQLITE_PROJECT_BUSINESS,
        PROJECT_BUSINESS_REFUSED,
    ),
)

# Checks that read a column added after 0001, each installed once the column exists.
_SQLITE_COLUMN_CHECKS = (
    (
        BRANCH_COLUMNS,
        (
            "broker_thread_keeps_branch",
            "BEFORE UPDATE OF branched_from_id, branched_at_id ON broker_thread",
            _SQLITE_THREAD_BRANCH,
            THREAD_BRANCH_REFUSED,
        ),
    ),
)

# (trigger, table)
_SQLITE_TRIGGER_TABLES = (
    *(
        (f"{table}_no_{verb}", table)
        for table in APPEND_ONLY_TABLES
        for verb in ("update", "delete")
    ),
    *((f"{table}_no_delete", table) for table in NEVER_DELETED_TABLES),
    *((name, when.rsplit(" ON ", 1)[1]) for name, when, *_ in _SQLITE_CHECKS),
    *((name, when.rsplit(" ON ", 1)[1]) for _, (name, when, *_) in _SQLITE_COLUMN_CHECKS),
)

SQLITE_TRIGGERS = tuple(name for name, _ in _SQLITE_TRIGGER_TABLES)

SQLITE_UNINSTALL = tuple(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS)


def sqlite_install(tables: Collection[str]) -> tuple[str, ...]:
    """The SQLite guards, installed anew, on those of their tables that exist (`tables`): a
    migration that installs them before a later one adds a table leaves that table's guards to
    the install at the end of every migrate (`broker.apps`). A guard that reads a later column
    waits for it the same way: `tables` names the thread table's columns as `table.column`.

    Before migration 0012 made the permit table, the delete guards refuse every delete: SQLite
    reads a trigger's tables again whenever a table is renamed, and a trigger naming a missing
    table would fail every later migration that rebuilds one.
    """
    purge_permits = PURGE_PERMIT_TABLE in tables
    return (
        # SQLite has no CREATE OR REPLACE TRIGGER: drop first, so installing refreshes every guard.
        *SQLITE_UNINSTALL,
        *(
            statement
            for table in APPEND_ONLY_TABLES
            if table in tables
            for statement in _sqlite_append_only(
                table, purgeable=purge_permits and table in PURGEABLE_TABLES
            )
        ),
        *(
            _sqlite_never_deleted(table, purgeable=purge_permits and table == PURGED_THREADS)
            for table in NEVER_DELETED_TABLES
            if table in tables
        ),
        *(_sqlite_trigger(*check) for check in _SQLITE_CHECKS),
        *(_sqlite_trigger(*check) for column, check in _SQLITE_COLUMN_CHECKS if column in tables),
    )


# --- PostgreSQL ---------------------------------------------------------------------------------
#
# The cross-table checks lock the rows they read FOR SHARE. Under READ COMMITTED a check cannot
# see another transaction's uncommitted rows, so without the lock an insert and a concurrent
# change on the other side (say, a message and a rename of its thread's instance) could each pass
# and both commit. With it, the change waits for the insert to commit and then sees its row, or
# the insert waits for the change and then reads the new value.


def _pg_raise(message: str, errcode: str) -> str:
    return f"RAISE EXCEPTION '{_sql_string(message)}' USING ERRCODE = '{errcode}';"


_PG_APPEND_ONLY = """
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END"""

# A DELETE of a row of a tester-owned thread, by a transaction holding a purge permit of its
# own. Before migration 0012 made the permit table, a delete fails on the missing table: refused
# all the same.
_PG_TESTER_PURGE_ONLY = f"""
BEGIN
    IF EXISTS (
        SELECT 1 FROM {PURGE_PERMIT_TABLE} WHERE txid = txid_current()
    ) AND EXISTS (
        SELECT 1 FROM broker_thread WHERE id = OLD.thread_id AND owner = '{TESTER}'
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END"""

_PG_REFUSE_DELETE = (
    "RAISE EXCEPTION '% rows are never deleted', TG_TABLE_NAME"
    " USING ERRCODE = 'restrict_violation';"
)

_PG_NEVER_DELETED = f"""
BEGIN
    {_PG_REFUSE_DELETE}
END"""

# A DELETE of a tester-owned thread, by a transaction holding a purge permit of its own.
_PG_TESTER_THREAD_PURGE_ONLY = f"""
BEGIN
    IF OLD.owner = '{TESTER}' AND EXISTS (
        SELECT 1 FROM {PURGE_PERMIT_TABLE} WHERE txid = txid_current()
    ) THEN
        RETURN OLD;
    END IF;
    {_PG_REFUSE_DELETE}
END"""

# Each check is a function and a row trigger of the same name: (table, timing and events, body).
_PG_CHECKS = {
    "broker_task_request_human_input": (
        "broker_task",
        "BEFORE INSERT OR UPDATE OF request_id",
        f"""
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM broker_event WHERE id = NEW.request_id AND kind = 'human.input'
    ) THEN
        {_pg_raise(R15_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
    "broker_message_thread_instance": (
        "broker_message",
        "BEFORE INSERT",
        f"""
DECLARE
    thread_instance bigint;
    instance_name text;
BEGIN
    IF NEW.thread_id IS NULL THEN
        RETURN NEW;
    END IF;
    SELECT instance_id INTO thread_instance FROM broker_thread
    WHERE id = NEW.thread_id FOR SHARE;
    SELECT name INTO instance_name FROM broker_instance
    WHERE id = thread_instance FOR SHARE;
    IF instance_name IS NULL OR instance_name NOT IN (NEW.from_role, NEW.to_role) THEN
        {_pg_raise(MESSAGE_INSTANCE_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
    "broker_thread_business": (
        "broker_thread",
        "BEFORE INSERT OR UPDATE OF project_id, instance_id",
        f"""
DECLARE
    instance_business bigint;
    project_business bigint;
BEGIN
    SELECT business_id INTO instance_business FROM broker_instance
    WHERE id = NEW.instance_id FOR SHARE;
    SELECT business_id INTO project_business FROM broker_project
    WHERE id = NEW.project_id FOR SHARE;
    IF instance_business IS NULL OR instance_business IS DISTINCT FROM project_business THEN
        {_pg_raise(THREAD_BUSINESS_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
    "broker_thread_keeps_messages": (
        "broker_thread",
        "BEFORE UPDATE OF instance_id",
        f"""
BEGIN
    IF NEW.instance_id IS DISTINCT FROM OLD.instance_id AND EXISTS (
        SELECT 1 FROM broker_message WHERE thread_id = OLD.id
    ) THEN
        {_pg_raise(THREAD_MESSAGES_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
    "broker_thread_keeps_owner": (
        "broker_thread",
        "BEFORE UPDATE OF owner",
        f"""
BEGIN
    IF NEW.owner IS DISTINCT FROM OLD.owner THEN
        {_pg_raise(THREAD_OWNER_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
    "broker_instance_keeps_dependents": (
        "broker_instance",
        "BEFORE UPDATE OF name, business_id",
        f"""
BEGIN
    IF NEW.name IS DISTINCT FROM OLD.name AND EXISTS (
        SELECT 1 FROM broker_thread t JOIN broker_message m ON m.thread_id = t.id
        WHERE t.instance_id = OLD.id AND NEW.name NOT IN (m.from_role, m.to_role)
    ) THEN
        {_pg_raise(INSTANCE_RENAME_REFUSED, "check_violation")}
    END IF;
    IF NEW.business_id IS DISTINCT FROM OLD.business_id AND EXISTS (
        SELECT 1 FROM broker_thread t JOIN broker_project p ON p.id = t.project_id
        WHERE t.instance_id = OLD.id AND p.business_id IS DISTINCT FROM NEW.business_id
    ) THEN
        {_pg_raise(INSTANCE_BUSINESS_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
    "broker_project_keeps_business": (
        "broker_project",
        "BEFORE UPDATE OF business_id",
        f"""
BEGIN
    IF NEW.business_id IS DISTINCT FROM OLD.business_id THEN
        {_pg_raise(PROJECT_BUSINESS_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
    "broker_thread_keeps_branch": (
        "broker_thread",
        "BEFORE UPDATE OF branched_from_id, branched_at_id",
        f"""
BEGIN
    IF NEW.branched_from_id IS DISTINCT FROM OLD.branched_from_id
        OR NEW.branched_at_id IS DISTINCT FROM OLD.branched_at_id THEN
        {_pg_raise(THREAD_BRANCH_REFUSED, "check_violation")}
    END IF;
    RETURN NEW;
END""",
    ),
}

# The checks of `_PG_CHECKS` that read a column added after 0001: each trigger is installed
# once its column exists (the function whenever: its body is read when it runs).
_PG_COLUMN_CHECKS = {"broker_thread_keeps_branch": BRANCH_COLUMNS}

# (trigger, table, timing and events, level, function)
_PG_TRIGGERS = (
    *(
        (f"{table}_append_only", table, "BEFORE UPDATE OR DELETE", "ROW", "broker_append_only")
        for table in APPEND_ONLY_TABLES
        if table not in PURGEABLE_TABLES
    ),
    *(
        (f"{table}_append_only", table, "BEFORE UPDATE", "ROW", "broker_append_only")
        for table in PURGEABLE_TABLES
    ),
    *(
        (f"{table}_no_delete", table, "BEFORE DELETE", "ROW", "broker_tester_purge_only")
        for table in PURGEABLE_TABLES
    ),
    *(
        (f"{table}_no_truncate", table, "BEFORE TRUNCATE", "STATEMENT", "broker_append_only")
        for table in APPEND_ONLY_TABLES
    ),
    *(
        (
            f"{table}_no_delete",
            table,
            "BEFORE DELETE",
            "ROW",
            "broker_tester_thread_purge_only"
            if table == PURGED_THREADS
            else "broker_never_deleted",
        )
        for table in NEVER_DELETED_TABLES
    ),
    *(
        (f"{table}_no_truncate", table, "BEFORE TRUNCATE", "STATEMENT", "broker_never_deleted")
        for table in NEVER_DELETED_TABLES
    ),
    *((name, table, events, "ROW", name) for name, (table, events, _) in _PG_CHECKS.items()),
)

_PG_FUNCTIONS = {
    "broker_append_only": _PG_APPEND_ONLY,
    "broker_tester_purge_only": _PG_TESTER_PURGE_ONLY,
    "broker_never_deleted": _PG_NEVER_DELETED,
    "broker_tester_thread_purge_only": _PG_TESTER_THREAD_PURGE_ONLY,
    **{name: body for name, (_, _, body) in _PG_CHECKS.items()},
}


def postgresql_install(tables: Collection[str]) -> tuple[str, ...]:
    """The PostgreSQL guards, installed anew (replacing what is there), on those of their
    tables that exist, as `sqlite_install`."""
    return (
        *(
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql\n"
            f"AS $guard${body}\n$guard$"
            for name, body in _PG_FUNCTIONS.items()
        ),
        *(
            f"CREATE OR REPLACE TRIGGER {name} {events} ON {table} "
            f"FOR EACH {level} EXECUTE FUNCTION {function}()"
            for name, table, events, level, function in _PG_TRIGGERS
            if table in tables and _PG_COLUMN_CHECKS.get(name, table) in tables
        ),
    )


POSTGRESQL_UNINSTALL = (
    *(f"DROP TRIGGER IF EXISTS {name} ON {table}" for name, table, *_ in _PG_TRIGGERS),
    *(f"DROP FUNCTION IF EXISTS {name}()" for name in _PG_FUNCTIONS),
)


# --- Install and uninstall ----------------------------------------------------------------------

VENDORS = ("sqlite", "postgresql")

# The migration that first installs the guards: from then on the database must have them all.
INSTALLED_BY = "0002_database_guards"

_UNINSTALL = {"sqlite": SQLITE_UNINSTALL, "postgresql": POSTGRESQL_UNINSTALL}


def install(target: BaseDatabaseSchemaEditor | BaseDatabaseWrapper) -> None:
    """Create every guard; existing ones are replaced, so installing twice is harmless."""
    connection = _connection(target)
    tables = set(connection.introspection.table_names())
    if "broker_thread" in tables:
        with connection.cursor() as cursor:
            described = connection.introspection.get_table_description(cursor, "broker_thread")
        tables |= {f"broker_thread.{column.name}" for column in described}
    _execute(target, {"sqlite": sqlite_install(tables), "postgresql": postgresql_install(tables)})


def install_in_migration(apps: object, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """A migration's `RunPython` step that installs every guard anew, on SQLite and PostgreSQL
    (another vendor has none to install)."""
    if schema_editor.connection.vendor in VENDORS:
        install(schema_editor)


def uninstall(target: BaseDatabaseSchemaEditor | BaseDatabaseWrapper) -> None:
    """Drop every guard that exists. Only migration 0002's reverse and `flush` call this."""
    _execute(target, _UNINSTALL)


def installed(target: BaseDatabaseSchemaEditor | BaseDatabaseWrapper) -> bool:
    """Whether any guard is present; False on a vendor without guards.

    Only `flush` asks this, to know whether there is anything to lift. Whether the database is
    guarded is `missing`'s answer: one trigger present says nothing about the others.
    """
    connection = _connection(target)
    if connection.vendor not in VENDORS:
        return False
    return len(missing(connection)) < len(expected(connection.vendor))


def missing(target: BaseDatabaseSchemaEditor | BaseDatabaseWrapper) -> list[str]:
    """Each guard absent from the database, by name, in install order; empty when all are there.

    A trigger counts only on its own table, and on PostgreSQL only while enabled (`ALTER TABLE
    … DISABLE TRIGGER` lifts a guard as surely as dropping it). On a vendor without guards the
    whole set is missing, so a check built on this fails closed.
    """
    connection = _connection(target)
    if connection.vendor not in VENDORS:
        return [f"every guard (no database guards for {connection.vendor})"]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT 'trigger', name, tbl_name FROM sqlite_master WHERE type = 'trigger'"
            )
        else:
            cursor.execute(
                "SELECT 'trigger', t.tgname, c.relname FROM pg_trigger t"
                " JOIN pg_class c ON c.oid = t.tgrelid"
                " WHERE NOT t.tgisinternal AND t.tgenabled <> 'D' AND pg_table_is_visible(c.oid)"
                " UNION ALL SELECT 'function', p.proname, '' FROM pg_proc p"
                " WHERE pg_function_is_visible(p.oid) AND p.prorettype = 'trigger'::regtype"
            )
        present = {tuple(row) for row in cursor.fetchall()}
    return [
        f"{kind} {name} on {table}" if table else f"{kind} {name}()"
        for kind, name, table in expected(connection.vendor)
        if (kind, name, table) not in present
    ]


def expected(vendor: str) -> tuple[tuple[str, str, str], ...]:
    """Every guard of `vendor` as (kind, name, table); a function's table is empty."""
    if vendor == "sqlite":
        return tuple(("trigger", name, table) for name, table in _SQLITE_TRIGGER_TABLES)
    return (
        *(("function", name, "") for name in _PG_FUNCTIONS),
        *(("trigger", name, table) for name, table, *_ in _PG_TRIGGERS),
    )


def _execute(
    target: BaseDatabaseSchemaEditor | BaseDatabaseWrapper,
    statements: dict[str, tuple[str, ...]],
) -> None:
    connection = _connection(target)
    if connection.vendor not in statements:
        # Fail closed: a database without the guards would accept rewrites of the record.
        raise NotImplementedError(f"no database guards for {connection.vendor}")
    with connection.cursor() as cursor:
        for statement in statements[connection.vendor]:
            # No parameters: the SQL holds no placeholders, and plpgsql's `%` must reach the
            # server as is.
            cursor.execute(statement)


def _connection(target: BaseDatabaseSchemaEditor | BaseDatabaseWrapper) -> BaseDatabaseWrapper:
    if isinstance(target, BaseDatabaseSchemaEditor):
        return target.connection
    return target
