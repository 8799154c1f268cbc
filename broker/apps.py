from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class BrokerConfig(AppConfig):
    name = "broker"
    verbose_name = "Mosaic bus broker"

    def ready(self) -> None:
        from broker import checks  # noqa: F401  (registers the system checks)

        post_migrate.connect(reinstall_guards, sender=self)


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
