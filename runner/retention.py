"""Tester-data retention: with `MOSAIC_TESTER_RETENTION_DAYS` set, a runner purges
the tester's data older than that many days once a day (`broker.actions.tester_purge`).

Every runner of a deployment may purge: the purge works in locked batches and finds nothing left
to do after another's. It runs on a thread of its own, so a large first purge never holds up a
reply.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from broker.actions.tester_purge import PurgeCounts, purge_tester_data

logger = logging.getLogger("mosaic.runner")

PURGE_EVERY = timedelta(days=1)
# How often the thread asks whether a purge is due, in seconds.
CHECK_SECONDS = 60.0


class DailyTesterPurge:
    """Purges tester data older than `days` whenever `PURGE_EVERY` has passed on `clock` since
    the last purge (the first `due` call purges at once)."""

    def __init__(self, days: int, *, clock: Callable[[], datetime] = timezone.now) -> None:
        if days < 0:
            raise ValueError("the tester retention is a number of days, 0 or more")
        self.days = days
        self.clock = clock
        self.next_purge: datetime | None = None

    def due(self) -> dict[str, PurgeCounts] | None:
        """Purge if a purge is due; the counts by business, or None when none was."""
        now = self.clock()
        if self.next_purge is not None and now < self.next_purge:
            return None
        self.next_purge = now + PURGE_EVERY
        purged = purge_tester_data(cut=now - timedelta(days=self.days))
        for slug, counts in purged.items():
            if not counts.empty:
                logger.info("purged %s's tester data: %s", slug, counts.sentence())
        return purged


class RetentionThread(threading.Thread):
    """A daemon thread asking `retention` every `interval` seconds until `stop`."""

    def __init__(self, retention: DailyTesterPurge, interval: float = CHECK_SECONDS) -> None:
        super().__init__(name="mosaic-tester-retention", daemon=True)
        self.retention = retention
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                try:
                    self.retention.due()
                except Exception:  # retried at the next check: a day's work, not a reply
                    logger.exception("tester-data purge failed")
                    self.retention.next_purge = None
                    connection.close()
                self.stopped.wait(self.interval)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
