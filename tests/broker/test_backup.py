"""Backup and restore round trips, each while a server writes.

SQLite: `manage.py backupdb` copies the database of a serving server whose tester keeps sending
turns (and whose runner keeps answering them); the copy is whole, holds a prefix of the turns in
the order they committed, and serves once restored. PostgreSQL: the procedure of
docs/operations.md, pg_dump while the server writes, pg_restore into a fresh database, and
`make run`'s steps serve it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.cluster.services import require_binary
from tests.console.api import LiveApi
from tests.console.server import (
    LiveServer,
    create_scratch_database,
    drop_scratch_database,
    fresh_database,
    is_postgres,
    serving,
)
from tests.support.marks import postgres_only

# Turns the tester has sent before the backup starts: the copy must hold at least these.
SENT_BEFORE_BACKUP = 20


class TurnWriter(threading.Thread):
    """Sends tester turns into one thread of the server, one after another, until `stop`."""

    def __init__(self, server: LiveServer) -> None:
        super().__init__(name="backup-writer", daemon=True)
        self.api = LiveApi(server.tester_url)
        project = self.api.create_project("backups")
        self.thread = self.api.create_thread(project, "written during the backup")
        self.sent: list[int] = []
        self.ready = threading.Event()
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                self.sent.append(self.api.send(self.thread, f"turn {len(self.sent)}"))
                if len(self.sent) >= SENT_BEFORE_BACKUP:
                    self.ready.set()
        except BaseException as error:  # reported by `stop`
            self.error = error
            self.ready.set()
        finally:
            self.api.close()

    def stop(self) -> list[int]:
        self.stopped.set()
        self.join(timeout=60)
        assert not self.is_alive(), "the writer did not stop"
        assert self.error is None, f"the writer failed: {self.error!r}"
        return self.sent


@contextmanager
def writing(server: LiveServer) -> Iterator[TurnWriter]:
    """A writer sending turns to `server`; the block starts once it has sent a few."""
    writer = TurnWriter(server)
    writer.start()
    try:
        assert writer.ready.wait(timeout=120), "the writer sent too little"
        assert writer.error is None, f"the writer failed: {writer.error!r}"
        yield writer
    finally:
        writer.stopped.set()


def served_turns(server: LiveServer, thread: int) -> list[int]:
    """The ids of the tester's turns in `thread`, as the tester listener serves them."""
    api = LiveApi(server.tester_url)
    try:
        messages = api.get(f"/api/chat/threads/{thread}/messages?limit=500")["messages"]
    finally:
        api.close()
    return [m["id"] for m in messages if m["from_role"] == "tester"]


def restored_server_serves(database_url: str, workdir: Path, thread: int) -> list[int]:
    """The restored database passes the start checks as it is (guards included), then `make
    run`'s steps (migrate, setupdemo, serve) serve it; the thread's turns as served."""
    workdir.mkdir()
    server = LiveServer(database_url=database_url, workdir=workdir)
    server.manage("check")
    server.prepare()
    server.start()
    try:
        return served_turns(server, thread)
    finally:
        server.stop()


def test_backupdb_copies_sqlite_while_the_server_writes_and_the_copy_serves(
    tmp_path: Path,
) -> None:
    source = LiveServer(database_url=fresh_database("sqlite", tmp_path, "source"), workdir=tmp_path)
    source.start()
    copy = tmp_path / "copy.sqlite3"
    try:
        with writing(source) as writer:
            source.manage("backupdb", str(copy))
            assert writer.is_alive(), "the server was written to throughout the backup"
        sent = writer.stop()
        before = copy.read_bytes()
        with pytest.raises(RuntimeError, match="exists; give the copy a new path"):
            source.manage("backupdb", str(copy))
        assert copy.read_bytes() == before
    finally:
        source.stop()

    with closing(sqlite3.connect(copy)) as database:
        assert database.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert database.execute("PRAGMA foreign_key_check").fetchall() == []
        copied = [
            row[0]
            for row in database.execute(
                "SELECT id FROM broker_message WHERE thread_id = ? AND from_role = 'tester'"
                " ORDER BY id",
                [writer.thread],
            )
        ]
    # A snapshot: every turn sent before the backup, and the rest a prefix of what followed.
    assert len(copied) >= SENT_BEFORE_BACKUP
    assert copied == sent[: len(copied)]

    assert restored_server_serves(f"sqlite:///{copy}", tmp_path / "restored", writer.thread) == (
        copied
    )


@postgres_only
def test_backupdb_on_postgresql_points_at_pg_dump(tmp_path: Path, db: None) -> None:
    with pytest.raises(CommandError, match="pg_dump"):
        call_command("backupdb", str(tmp_path / "copy"))
    assert not (tmp_path / "copy").exists()


@pytest.mark.postgres
def test_pg_dump_while_serving_restores_into_a_fresh_database_that_serves(
    tmp_path: Path,
) -> None:
    pg_dump, pg_restore = require_binary("pg_dump"), require_binary("pg_restore")
    test_url = os.environ["DATABASE_URL"]
    assert is_postgres(test_url)
    dump = tmp_path / "mosaic.dump"
    with serving(tmp_path, "purge_backup_source") as source, writing(source) as writer:
        subprocess.run(
            [pg_dump, "--format=custom", f"--file={dump}", source.database_url],
            check=True,
            timeout=300,
        )
        assert writer.is_alive(), "the server was written to throughout the dump"
        sent = writer.stop()
    restored_url = create_scratch_database(test_url, "purge_backup_restored")
    try:
        subprocess.run(
            [pg_restore, "--no-owner", "--exit-on-error", f"--dbname={restored_url}", str(dump)],
            check=True,
            timeout=300,
        )
        served = restored_server_serves(restored_url, tmp_path / "restored", writer.thread)
    finally:
        drop_scratch_database(test_url, "purge_backup_restored")
    assert len(served) >= SENT_BEFORE_BACKUP
    assert served == sent[: len(served)]
