"""The runner: a dispatcher that finds pending threads and a pool of workers that run them.

Usable in-process (`start()` / `stop(timeout)`, all threads, safe inside the ASGI server's
process) and as its own process (`manage.py runassistant`). Any number of runners may work
against one PostgreSQL database: the one-open-claim-per-thread-and-instance constraint and
`claim.open` decide who answers, and `one_result_per_message` backs that up.
"""

from __future__ import annotations

import itertools
import json
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, close_old_connections, connection

from broker import events
from broker.models import Instance
from runner.backends import ReplyBackend, backend_for, backend_from_settings
from runner.backends.base import EndpointRefused
from runner.claims import reap_expired
from runner.lease import LeaseKeeper
from runner.nudges import LayerNudges
from runner.pending import PendingThread, pending_threads
from runner.retention import DailyTesterPurge, RetentionThread
from runner.run import RunOutcome, run_thread

logger = logging.getLogger("mosaic.runner")

DEFAULT_CONCURRENCY = 8
# How long an idle dispatcher waits before looking for work again, in seconds. A turn stored
# (see `runner.nudges`), a worker that finishes, or `wake()` cuts the wait short.
POLL_INTERVAL = 0.1
# The longest between two sweeps for dead runs' leases, in seconds.
REAP_INTERVAL = 1.0


class InstanceBackends:
    """Each instance's backend, built from its reply settings and kept while they stay the
    same: a reloaded business file takes effect at the instance's next run."""

    def __init__(self) -> None:
        self._built: dict[tuple[int, str, str], ReplyBackend] = {}
        self._lock = threading.Lock()

    def of(self, candidate: PendingThread) -> ReplyBackend:
        reply = (
            Instance.objects.filter(business_id=candidate.business_id, name=candidate.instance)
            .values_list("reply", flat=True)
            .first()
        )
        return self.get(candidate.business_id, candidate.instance, reply)

    def get(self, business_id: int, instance: str, reply: dict[str, Any] | None) -> ReplyBackend:
        key = (business_id, instance, json.dumps(reply, sort_keys=True))
        with self._lock:
            if key not in self._built:
                self._built[key] = backend_for(reply, instance=instance)
            return self._built[key]


class Runner:
    """Answers pending messages, up to `concurrency` threads at once, until stopped."""

    def __init__(
        self,
        *,
        backend: ReplyBackend | None = None,
        business_id: int | None = None,
        instance: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        # One backend for every turn, or (None) each instance's own (`InstanceBackends`).
        self.backend = backend
        self._backends = InstanceBackends()
        self.business_id = business_id
        self.instance = instance
        self.concurrency = concurrency
        self.poll_interval = poll_interval
        self.name = f"run-{secrets.token_hex(3)}"
        self._runs = itertools.count(1)
        self._queue: queue.SimpleQueue[PendingThread | None] = queue.SimpleQueue()
        # (thread, instance) pairs being worked on: a thread's instance and one it consults
        # (R23) are two pairs, which may run side by side.
        self._busy: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._keeper: LeaseKeeper | None = None
        self._retention: RetentionThread | None = None
        self._lease_seconds = 0.0
        self._nudges = LayerNudges(self.wake)
        self._stop_waking_here: Callable[[], None] = lambda: None

    def __str__(self) -> str:
        scope = f"business {self.business_id}" if self.business_id is not None else "all"
        if self.instance:
            scope += f", instance {self.instance}"
        backend = self.backend.name if self.backend is not None else "per instance"
        return f"{self.name} ({scope}; backend {backend}; concurrency {self.concurrency})"

    # --- control -----------------------------------------------------------------------

    def start(self) -> None:
        """Start the dispatcher, the workers and the lease keeper; returns at once."""
        if self._threads:
            raise RuntimeError("runner already started")
        retention = self.tester_retention()
        self.check_backends()
        self._lease_seconds = float(settings.MOSAIC_CLAIM_LEASE_SECONDS)
        self._keeper = LeaseKeeper(lease_seconds=self._lease_seconds)
        self._keeper.start()
        self._threads = [
            threading.Thread(target=self._dispatch, name=f"{self.name}-dispatch", daemon=True)
        ] + [
            threading.Thread(target=self._work, name=f"{self.name}-worker-{i}", daemon=True)
            for i in range(self.concurrency)
        ]
        for thread in self._threads:
            thread.start()
        self._stop_waking_here = events.wake_runners_here(self.wake)
        self._nudges.start()
        if retention is not None:
            self._retention = RetentionThread(retention)
            self._retention.start()
        logger.info("runner %s started", self)

    def tester_retention(self) -> DailyTesterPurge | None:
        """The daily tester-data purge `MOSAIC_TESTER_RETENTION_DAYS` asks for (unset: None);
        a negative number of days stops the start with `ImproperlyConfigured`."""
        days: int | None = settings.MOSAIC_TESTER_RETENTION_DAYS
        if days is None:
            return None
        try:
            return DailyTesterPurge(days)
        except ValueError as invalid:
            raise ImproperlyConfigured(f"MOSAIC_TESTER_RETENTION_DAYS: {invalid}.") from invalid

    def check_backends(self) -> None:
        """Build the backend of every instance this runner serves and ask each model server
        whether it takes the key and serves the model. A refusal, or a setting that cannot
        work (an unset key variable), stops the start with `ImproperlyConfigured`."""
        if self.backend is not None:
            backends = [self.backend]
        else:
            instances = Instance.objects.all()
            if self.business_id is not None:
                instances = instances.filter(business_id=self.business_id)
            if self.instance is not None:
                instances = instances.filter(name=self.instance)
            backends = [
                self._backends.get(business_id, name, reply)
                for business_id, name, reply in instances.values_list(
                    "business_id", "name", "reply"
                )
            ] or [backend_from_settings()]
        checked: set[int] = set()
        for backend in backends:
            check = getattr(backend, "check", None)
            if check is None or id(backend) in checked:
                continue
            checked.add(id(backend))
            try:
                check()
            except EndpointRefused as refused:
                raise ImproperlyConfigured(str(refused)) from refused

    def stop(self, timeout: float | None = None) -> bool:
        """Stop: cancel turns in flight, release their claims, join every thread.

        Messages not answered stay pending for the next runner. True when every thread ended
        within `timeout` seconds (daemon threads left behind never block the process's exit).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        self._stopping.set()
        self._stop_waking_here()
        self._nudges.stop(None if deadline is None else max(0.0, deadline - time.monotonic()))
        self._wake.set()
        if self._retention is not None:
            self._retention.stop()
        if self._keeper is not None:
            self._keeper.cancel_all()
        while True:
            try:
                dropped = self._queue.get_nowait()
            except queue.Empty:
                break
            if dropped is not None:
                self._done(dropped)
        for _ in range(self.concurrency):
            self._queue.put(None)
        for thread in [*self._threads, *([self._retention] if self._retention else [])]:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self._keeper is not None:
            self._keeper.stop(None if deadline is None else max(0.0, deadline - time.monotonic()))
        stopped = not any(thread.is_alive() for thread in self._threads)
        logger.info("runner %s stopped%s", self.name, "" if stopped else " (threads left)")
        return stopped

    def wake(self) -> None:
        """Look for work now (for example on a channel-layer nudge) instead of at the next poll."""
        self._wake.set()

    @property
    def busy(self) -> frozenset[int]:
        """The threads this runner is working on now."""
        with self._lock:
            return frozenset(thread_id for thread_id, _ in self._busy)

    # --- threads -----------------------------------------------------------------------

    def _dispatch(self) -> None:
        next_reap = 0.0
        try:
            while not self._stopping.is_set():
                self._wake.clear()
                close_old_connections()
                try:
                    if time.monotonic() >= next_reap:
                        reap_expired(business_id=self.business_id)
                        next_reap = time.monotonic() + min(REAP_INTERVAL, self._lease_seconds / 3)
                    self._fill()
                except DatabaseError:
                    logger.warning("runner %s could not reach the database", self.name)
                self._wake.wait(self.poll_interval)
        finally:
            connection.close()

    def _fill(self) -> None:
        """Queue pending threads for the idle workers."""
        with self._lock:
            busy = set(self._busy)
        free = self.concurrency - len(busy)
        if free <= 0:
            return
        for candidate in pending_threads(
            limit=free,
            business_id=self.business_id,
            instance=self.instance,
            exclude=busy,
        ):
            with self._lock:
                self._busy.add(candidate.pair)
            self._queue.put(candidate)

    def _work(self) -> None:
        try:
            while (candidate := self._queue.get()) is not None:
                try:
                    if not self._stopping.is_set():
                        self._run(candidate)
                finally:
                    # Each unit of work gives its connection back: nothing idles in a
                    # transaction or holds a connection across the ASGI server's lifetime.
                    connection.close()
                    self._done(candidate)
        finally:
            connection.close()

    def _run(self, candidate: PendingThread) -> RunOutcome | None:
        assert self._keeper is not None
        close_old_connections()
        try:
            backend = self.backend or self._backends.of(candidate)
            return run_thread(
                candidate,
                run=f"{self.name}-{next(self._runs)}",
                backend=backend,
                keeper=self._keeper,
                shutting_down=self._stopping,
            )
        except Exception:
            # Claiming failed (database unavailable, a lock timeout): the next scan retries.
            logger.exception("runner %s: thread %s not taken up", self.name, candidate.thread_id)
            return None

    def _done(self, candidate: PendingThread) -> None:
        with self._lock:
            self._busy.discard(candidate.pair)
        self._wake.set()
