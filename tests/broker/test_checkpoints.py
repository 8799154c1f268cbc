"""SQLite's WAL checkpoints run off the request path (broker.checkpoints)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.db.backends.sqlite3.base import DatabaseWrapper

from broker import checkpoints


def test_commits_leave_the_log_to_the_checkpoint_thread(tmp_path: Path, django_db_blocker) -> None:
    """On a database file opened as the product opens SQLite, a commit past SQLite's default
    threshold (1,000 pages) still does not checkpoint: the log waits for `checkpoint`, which
    copies all of it without waiting for anyone. (Its own file, so it runs on either pass.)"""
    database = DatabaseWrapper(
        {
            **connection.settings_dict,
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "wal.sqlite3"),
            "OPTIONS": dict(settings.SQLITE_OPTIONS),
        },
        alias="wal",
    )
    with django_db_blocker.unblock():
        busy, log_frames, copied = fill_and_checkpoint(database)
    assert busy == 0
    assert log_frames > 2000
    assert copied == log_frames


def fill_and_checkpoint(database: DatabaseWrapper) -> tuple[int, int, int]:
    try:
        with database.cursor() as cursor:
            cursor.execute("CREATE TABLE filler (body TEXT)")
            for _ in range(6):  # 6 commits of ~2 MB: about 3,000 pages of log
                cursor.execute("BEGIN")
                cursor.executemany("INSERT INTO filler (body) VALUES (?)", [("x" * 2000,)] * 1000)
                cursor.execute("COMMIT")
        return checkpoints.checkpoint(database)
    finally:
        database.close()


def test_the_checkpoint_thread_runs_on_sqlite_only(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = threading.Event()
    monkeypatch.setattr(checkpoints, "checkpoint", lambda: ran.set())
    thread = checkpoints.start_checkpoints(interval=0.01)
    if connection.vendor != "sqlite":
        assert thread is None
        return
    assert thread is not None
    try:
        assert ran.wait(5)
    finally:
        thread.stop()
    assert not thread.is_alive()
