"""The database guards of SPEC §3 are a checked invariant (`mosaic.E003`): every missing trigger
or function is named by `guards.missing`, fails `manage.py check`, keeps listeners from
starting, and comes back with the next `migrate`.

Guards are removed here the ways they are lost in practice: a migration that rebuilds a table
(SQLite drops the old table's triggers with it), and a hand-dropped or disabled trigger.
"""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection, models
from django.db.migrations.recorder import MigrationRecorder
from django.db.models.signals import post_migrate, pre_migrate

from broker import guards
from broker.apps import reinstall_guards
from broker.boot import refuse_unguarded_database
from broker.models import Decision, Message

# (trigger, table) of every guard trigger on this pass's database.
TRIGGERS = [
    (name, table) for kind, name, table in guards.expected(connection.vendor) if kind == "trigger"
]


def drop_trigger(name: str, table: str) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"DROP TRIGGER {name}")
        else:
            cursor.execute(f"DROP TRIGGER {name} ON {table}")


def table_triggers(table: str) -> list[str]:
    """The names of this table's guard triggers, as `missing` reports them."""
    return [f"trigger {name} on {table}" for name, on in TRIGGERS if on == table]


def rebuild_table(model: type[models.Model]) -> None:
    """What a migration that rebuilds the table does to its triggers.

    On SQLite this is the rebuild itself: Django's schema editor copies the table into a new
    one, drops the old and renames the new (`AddField` with a default does it). PostgreSQL
    alters tables in place; the closest it comes is a migration that drops and recreates the
    table, which loses its triggers the same way, so there they are dropped as that would.
    """
    if connection.vendor == "sqlite":
        with connection.schema_editor() as editor:
            editor._remake_table(model)
    else:
        for name, table in TRIGGERS:
            if table == model._meta.db_table:
                drop_trigger(name, table)


def guard_errors() -> list[str]:
    """The `mosaic.E003` errors of `manage.py check`, as their messages."""
    return [message.msg for message in run_checks() if message.id == "mosaic.E003"]


@pytest.mark.django_db
def test_missing_fully_migrated_database_reports_nothing() -> None:
    """SPEC §3: the migrated test database has every guard; the check and boot agree."""
    assert guards.missing(connection) == []
    assert guard_errors() == []
    refuse_unguarded_database()


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "table"), TRIGGERS, ids=[name for name, _ in TRIGGERS])
def test_missing_one_trigger_dropped_names_it(name: str, table: str) -> None:
    """SPEC §3: each guard trigger, item by item, is named when it is gone (and only it)."""
    drop_trigger(name, table)

    assert guards.missing(connection) == [f"trigger {name} on {table}"]
    assert guards.installed(connection)


@pytest.mark.django_db
@pytest.mark.parametrize("table", ["broker_thread", "broker_task"])
def test_delete_guard_of_threads_and_tasks_is_checked(table: str) -> None:
    """SPEC §3: the delete guards of threads and tasks are in the checked set: without one,
    `manage.py check` fails naming it, as for every other guard."""
    name = f"{table}_no_delete"
    assert (name, table) in TRIGGERS

    drop_trigger(name, table)

    assert guard_errors() == [f"database guard missing: trigger {name} on {table}"]


@pytest.mark.django_db(transaction=True)
def test_rebuild_guarded_table_check_fails_then_migrate_restores() -> None:
    """SPEC §3: a table rebuild loses its guards; the check names each, `migrate` reinstalls."""
    rebuild_table(Decision)

    lost = table_triggers("broker_decision")
    assert lost and guards.missing(connection) == lost
    assert guard_errors() == [f"database guard missing: {name}" for name in lost]
    with pytest.raises(SystemCheckError, match=re.escape("mosaic.E003")):
        call_command("check")

    # As typed on the command line: `migrate` runs the checks first, and must not be refused
    # for what it is about to repair.
    call_command("migrate", interactive=False, verbosity=0, skip_checks=False)

    assert guards.missing(connection) == []
    assert guard_errors() == []
    call_command("check")


@pytest.mark.django_db
def test_migrate_twice_guards_unchanged() -> None:
    """SPEC §3: reinstalling after a `migrate` that changed nothing is harmless."""
    call_command("migrate", interactive=False, verbosity=0)
    call_command("migrate", interactive=False, verbosity=0)

    assert guards.missing(connection) == []


@pytest.mark.django_db
def test_refuse_unguarded_database_trigger_dropped_raises_naming_it() -> None:
    """SPEC §3: no listener or runner starts while a guard is missing."""
    name, table = TRIGGERS[0]
    drop_trigger(name, table)

    with pytest.raises(
        ImproperlyConfigured, match=re.escape(f"mosaic.E003): trigger {name} on {table}")
    ):
        refuse_unguarded_database()


@pytest.mark.django_db
def test_check_broker_migration_pending_reports_no_guard_errors() -> None:
    """Until every broker migration is applied the `migrate` still due installs the guards, so
    the check must not refuse the commands (`makemigrations`, `migrate`) run before it."""
    name, table = TRIGGERS[0]
    drop_trigger(name, table)
    MigrationRecorder.Migration.objects.filter(
        app="broker", name="0004_immutable_owner_and_business"
    ).delete()

    assert guard_errors() == []
    # Start-up has no such leniency: an unfinished database is not guarded.
    with pytest.raises(ImproperlyConfigured, match=re.escape(name)):
        refuse_unguarded_database()


@pytest.mark.django_db
def test_reinstall_guards_before_guard_migration_installs_nothing() -> None:
    """A database migrated back before 0002 stays without guards after `migrate`'s signal."""
    name, table = TRIGGERS[0]
    drop_trigger(name, table)
    MigrationRecorder.Migration.objects.filter(app="broker", name=guards.INSTALLED_BY).delete()

    reinstall_guards(using=connection.alias)

    assert guards.missing(connection) == [f"trigger {name} on {table}"]


@pytest.mark.postgres
@pytest.mark.django_db
def test_missing_postgres_trigger_disabled_names_it() -> None:
    """SPEC §3: a disabled trigger refuses nothing, so it counts as missing."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE broker_event DISABLE TRIGGER broker_event_append_only")

    assert guards.missing(connection) == ["trigger broker_event_append_only on broker_event"]


@pytest.mark.postgres
@pytest.mark.django_db
def test_missing_postgres_function_dropped_names_it_and_its_triggers() -> None:
    """SPEC §3: on PostgreSQL the functions are guards too; dropping one takes its triggers."""
    with connection.cursor() as cursor:
        cursor.execute("DROP FUNCTION broker_thread_keeps_owner() CASCADE")

    assert guards.missing(connection) == [
        "function broker_thread_keeps_owner()",
        "trigger broker_thread_keeps_owner on broker_thread",
    ]


@pytest.mark.django_db(transaction=True)
def test_flush_guards_partly_missing_all_back() -> None:
    """SPEC §3: `flush` lifts and reinstalls the whole set, so it never leaves a gap behind."""
    name, table = TRIGGERS[0]
    drop_trigger(name, table)

    call_command("flush", interactive=False, verbosity=0)

    assert guards.missing(connection) == []


@pytest.mark.django_db(transaction=True)
def test_migrate_rebuilding_table_other_guards_read_succeeds_guards_back() -> None:
    """SPEC §3: a migration may rebuild even a table other guards read (`broker_message`).

    On SQLite the rebuild's rename re-reads every trigger, and the thread and instance checks
    name `broker_message`: with the guards in place it fails. `migrate` lifts them first on
    SQLite (`pre_migrate`) and reinstalls them at its end (`post_migrate`); on PostgreSQL the
    table is altered in place and the guards stay. The signals are sent as `migrate` sends
    them around a plan with one migration in it.
    """
    plan = [(object(), False)]
    pre_migrate.send(
        sender=apps.get_app_config("broker"),
        app_config=apps.get_app_config("broker"),
        verbosity=0,
        interactive=False,
        using=connection.alias,
        apps=apps,
        plan=plan,
    )
    if connection.vendor == "sqlite":
        with connection.schema_editor() as editor:
            editor._remake_table(Message)
    post_migrate.send(
        sender=apps.get_app_config("broker"),
        app_config=apps.get_app_config("broker"),
        verbosity=0,
        interactive=False,
        using=connection.alias,
        apps=apps,
        plan=plan,
    )

    assert guards.missing(connection) == []
