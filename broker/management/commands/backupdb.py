"""`manage.py backupdb PATH`: a consistent copy of the SQLite database while it serves.

SQLite's online backup API copies the database as one read transaction sees it: writers go on
meanwhile (WAL), and the copy holds every transaction committed before it began and none after.
The copy is written beside PATH and renamed into place once whole, so PATH never holds half a
database. PostgreSQL has its own tools for this (`pg_dump`; docs/operations.md, "Backup and
restore").
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections


class Command(BaseCommand):
    help = "Copy the SQLite database to PATH, consistently, while it serves."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="where the copy goes (a new file)")
        parser.add_argument(
            "--database", default=DEFAULT_DB_ALIAS, help="the database to copy (default: default)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        if connection.vendor != "sqlite":
            raise CommandError(
                f"backupdb copies a SQLite database; this one is {connection.vendor}. "
                "Back PostgreSQL up with pg_dump (docs/operations.md, Backup and restore)."
            )
        target = Path(options["path"])
        if target.exists():
            raise CommandError(f"{target} exists; give the copy a new path.")
        if not target.parent.is_dir():
            raise CommandError(f"{target.parent} is not a directory.")
        partial = target.with_name(f"{target.name}.partial")
        partial.unlink(missing_ok=True)
        connection.ensure_connection()
        source = connection.connection
        try:
            with closing(sqlite3.connect(partial)) as copy:
                # One step (pages=-1): the whole database as one read transaction sees it.
                source.backup(copy)
                (verdict,) = copy.execute("PRAGMA integrity_check").fetchone()
            if verdict != "ok":
                raise CommandError(f"The copy failed its integrity check: {verdict}")
            partial.rename(target)
        finally:
            partial.unlink(missing_ok=True)
        self.stdout.write(f"Copied the database to {target} ({target.stat().st_size} bytes).")
