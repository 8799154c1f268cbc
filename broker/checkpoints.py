"""SQLite's WAL checkpoints, off the request path.

In WAL mode a commit appends to the log, and a checkpoint copies the log back into the database
file and syncs it. SQLite runs one on the committing connection whenever the log passes
`wal_autocheckpoint` pages: with its default of 1,000, every few hundred sends one of them paid
for a checkpoint and its sync, which was most of the send → frame p99 on SQLite (P2: 11 ms,
against 6 ms with no checkpoint on the request path). A long-lived process (the listeners, the
runner) checkpoints instead on a thread of its own every `CHECKPOINT_SECONDS`, PASSIVE: it never
waits for a reader or a writer. The connections' own threshold is raised to the settings'
`wal_autocheckpoint`, which still bounds the log of a process without this thread (a CLI command,
the test suite).
"""

from __future__ import annotations

import logging
import threading

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger("mosaic.broker")

CHECKPOINT_SECONDS = 1.0


def checkpoint(database: BaseDatabaseWrapper = connection) -> tuple[int, int, int]:
    """One PASSIVE checkpoint (by default on this thread's connection): (busy, frames in the
    log, frames copied to the database)."""
    with database.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
        busy, log_frames, copied = cursor.fetchone()
    return busy, log_frames, copied


def start_checkpoints(interval: float = CHECKPOINT_SECONDS) -> threading.Thread | None:
    """On SQLite, a daemon thread checkpointing every `interval` seconds; None elsewhere."""
    if connection.vendor != "sqlite":
        return None
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(interval):
            try:
                checkpoint()
            except Exception:  # a failed checkpoint is retried; the log waits meanwhile
                logger.exception("WAL checkpoint failed")
                connection.close()

    thread = threading.Thread(target=run, name="mosaic-wal-checkpoints", daemon=True)
    thread.stop = stop  # type: ignore[attr-defined]
    thread.start()
    return thread
