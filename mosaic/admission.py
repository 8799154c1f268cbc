"""Whether a request arriving now is admitted to the HTTP workers, or refused at once.

A pure policy: no threads, no clock of its own (every call is given `now`), so that it can be
tested step by step. `mosaic.handler.WorkerPool` asks it at each arrival, tells it when a job
starts on a worker and when it ends, and does only the dispatching.

Two rules refuse, both at arrival, so that a refused request is told at once instead of after
a wait it was never going to survive:

- **The budget.** The expected wait of a new arrival is the time until the soonest worker is
  free plus the queue ahead of it at the recent service time, per worker. Past `budget`
  (`MOSAIC_HTTP_QUEUE_SECONDS`), it is refused. A running job's remaining time is taken to be
  what it has run already: a stall (a slow commit, a database failing over) refuses no one
  until it has lasted the budget, and then refuses at once instead of queueing more.
- **Sustained overload** (after CoDel: a queue that does not drain is a standing queue, not a
  burst). When the jobs leaving the queue have waited more than `target` for a whole
  `interval`, and the queue did not shrink over it, more arrive than the workers serve. Then
  only `floor` queued requests per worker are kept — enough that no worker ever waits for
  work, so the server still serves its capacity — and the rest are refused at once. A queue
  that shrinks is a burst being worked off (the queue after a stall) and refuses no one. The
  overload ends when an arrival finds a worker free.

A job that starts later than `budget` after its admission (a stall that outlasted the
estimate) is refused then: the bound on every answer stays.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

# How long a job may leave the queue above the target before the overload counts as sustained,
# and the target: CoDel's figures scaled to requests of milliseconds.
TARGET = 0.05
INTERVAL = 0.1
# Queued requests per worker kept in a sustained overload.
FLOOR_PER_WORKER = 2
# How many recent service times the estimate is the median of: one slow request moves it not.
SERVICE_SAMPLES = 32


@dataclass
class AdmissionPolicy:
    """The queue of one worker pool: admitted jobs waiting (`queued`) and running (`started`)."""

    workers: int
    budget: float
    target: float = TARGET
    interval: float = INTERVAL
    floor_per_worker: int = FLOOR_PER_WORKER
    queued: int = 0
    overloaded: bool = False
    # When each running job started.
    started: list[float] = field(default_factory=list)
    services: deque[float] = field(default_factory=lambda: deque(maxlen=SERVICE_SAMPLES))
    # Since when the jobs leaving the queue have waited above `target`, and the queue then.
    above_since: float | None = None
    queued_then: int = 0

    def service_time(self) -> float:
        """The median of the recent service times; 0 before any (nothing to judge by yet)."""
        return statistics.median(self.services) if self.services else 0.0

    def expected_wait(self, now: float) -> float:
        """Seconds a request arriving now would wait for a worker."""
        free = self.workers - len(self.started) - self.queued
        if free > 0:
            return 0.0
        # The soonest worker to be free is taken to run its job as long again as it has.
        soonest = now - max(self.started) if len(self.started) == self.workers else 0.0
        return soonest + -free * self.service_time() / self.workers

    def admit(self, now: float) -> bool:
        """Whether a request arriving now is admitted; if so it is counted queued."""
        if len(self.started) + self.queued < self.workers:
            # A worker is free: nothing waits, and whatever overload there was is over.
            self.overloaded = False
            self.above_since = None
            self.queued += 1
            return True
        if self.expected_wait(now) > self.budget:
            # It would not be served in time: told now rather than after the wait.
            return False
        if self.overloaded and self.queued >= self.floor_per_worker * self.workers:
            # A standing queue: the workers have their next jobs; more would only wait.
            return False
        self.queued += 1
        return True

    def start(self, *, now: float, admitted_at: float) -> bool:
        """A job leaves the queue; False when it waited past the budget (it is refused then,
        and does not run)."""
        self.queued -= 1
        waited = now - admitted_at
        self._observe(now, waited)
        if waited > self.budget:
            return False
        self.started.append(now)
        return True

    def finish(self, *, now: float, started_at: float) -> None:
        """A job that `start` let run ended."""
        self.started.remove(started_at)
        self.services.append(now - started_at)

    def withdraw(self) -> None:
        """A queued job left before it started (its client went away)."""
        self.queued -= 1

    def _observe(self, now: float, waited: float) -> None:
        """CoDel's measure: how long the job leaving the queue waited in it."""
        if waited <= self.target:
            self.above_since = None
            return
        if self.above_since is None:
            self.above_since, self.queued_then = now, self.queued
            return
        if now - self.above_since >= self.interval:
            if self.queued >= self.queued_then:
                self.overloaded = True
            self.above_since, self.queued_then = now, self.queued
