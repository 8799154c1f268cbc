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


class Checkpoints(threading.Thread):
    """A daemon thread running `checkpoint` every `interval` seconds until `stop`."""

    def __init__(self, interval: float) -> None:
        super().__init__(name="mosaic-wal-checkpoints", daemon=True)
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                try:
                    checkpoint()
                except Exception:  # a failed checkpoint is retried; the log waits meanwhile
                    logger.exception("WAL checkpoint failed")
                    connection.close()
        finally:
            connection.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop, and wait up to `timeout` seconds for a checkpoint under way to end."""
        self.stopped.set()
        if self.is_alive():
            self.join(timeout)


def start_checkpoints(interval: float = CHECKPOINT_SECONDS) -> Checkpoints | None:
    """On SQLite, a started `Checkpoints` thread; None on any other database."""
    if connection.vendor != "sqlite":
        return None
    thread = Checkpoints(interval)
    thread.start()
    return thread
