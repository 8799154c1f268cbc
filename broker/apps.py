from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate, pre_migrate


class BrokerConfig(AppConfig):
    name = "broker"
    verbose_name = "Mosaic bus broker"

    def ready(self) -> None:
        from broker import checks  # noqa: F401  (registers the system checks)

        pre_migrate.connect(lift_sqlite_guards, sender=self)
        post_migrate.connect(reinstall_guards, sender=self)


def lift_sqlite_guards(*, using: str, plan: list[Any] | None = None, **kwargs: Any) -> None:
    """Before a `migrate` that applies anything on SQLite, drop the database guards.

    SQLite alters most columns by rebuilding the table: copy, drop the old, rename the new. The
    rename re-reads every trigger, and one on another table that reads the rebuilt table (the
    message checks read `broker_message`, `broker_thread`, `broker_instance`) names a table that
    is gone at that moment, so the migration would fail. `reinstall_guards` puts the whole set
    back at the end; should the migration fail instead, the guards stay missing and start-up
    refuses (`mosaic.E003`) until a `migrate` succeeds. PostgreSQL alters tables in place and
    keeps its guards throughout.
    """
    from django.db import connections

    from broker import guards

    connection = connections[using]
    if connection.vendor == "sqlite" and plan:
        guards.uninstall(connection)


def reinstall_guards(*, using: str, **kwargs: Any) -> None:
    """After every `migrate` (and `flush`), install the database guards again.

    A migration that rebuilds a guarded table drops its triggers with the old table (SQLite),
    so the guards are installed anew at the end of every run rather than trusted to survive it.
    Installing replaces what is there, so a run that changed nothing leaves the same guards.
    Nothing is installed while migration 0002 is not applied (a fresh database, or one
    migrated back before the guards).
    """
    from django.db import connections
    from django.db.migrations.recorder import MigrationRecorder

    from broker import guards

    connection = connections[using]
    if connection.vendor not in guards.VENDORS:
        return
    if ("broker", guards.INSTALLED_BY) not in MigrationRecorder(connection).applied_migrations():
        return
    guards.install(connection)
