"""Django's flush, with the database guards lifted for the flush alone.

The guards (`broker.guards`) refuse DELETE and TRUNCATE on the append-only tables, so Django's
flush — DELETE on SQLite, TRUNCATE on PostgreSQL — and with it every `TransactionTestCase`
teardown would fail. This command lifts them (as `migrate` does on SQLite). It drops the guards,
runs Django's flush and reinstalls them, all in one transaction: other connections never see the
tables unguarded, and if the flush fails the drop is rolled back with it. Asked interactively,
the tables stay locked until the answer. A database without the guards (migration 0002 not
applied) is flushed as it is.
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands import flush
from django.db import connections, transaction

from broker import guards


class Command(flush.Command):
    help = f"{flush.Command.help} Lifts the broker's database guards for the flush only."

    def handle(self, **options: Any) -> None:
        database = options["database"]
        connection = connections[database]
        if not guards.installed(connection):
            super().handle(**options)
            return
        # Both vendors roll back DDL, so a failure anywhere brings the guards back with the rows.
        # No try/finally: on PostgreSQL a failed statement aborts the transaction, and a
        # reinstall in `finally` would then fail too and hide the original error.
        with transaction.atomic(using=database):
            guards.uninstall(connection)
            super().handle(**options)
            guards.install(connection)
