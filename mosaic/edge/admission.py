"""Whether a request arriving now is admitted to the HTTP workers, or refused at once.

A pure policy: no threads, no clock of its own (every call is given `now`), so that it can be
tested step by step. `mosaic.edge.handler.WorkerPool` asks it at each arrival, tells it when a job
starts on a worker and when it ends, and does only the dispatching.

Two rules refuse, both at arrival, so that a refused request is told at once instead of after
a wait it was never going to survive:

- **The budget.** The expected wait of a new arrival is the time until the soonest worker is
  free plus the queue ahead of it at the recent service time, per worker. Past `budget`
  (`MOSAIC_HTTP_QUEUE_SECONDS`), it is refused. A running job's remaining time is taken to be
  what it has run already: a stall (a slow commit, a database failing over) refuses no one
  until it has lasted the budget, and then refuses at once instead of queueing more.
- **Sustained overload** (after CoDel: a queue that never empties is a standing queue, not a
  burst). Once the budget has refused someone, more arrive than the workers serve, and a
  queue of a whole budget would only make every answer late for as long as the overload
  lasts and the server owe it when it ends. Then only `floor_per_worker` queued requests per
  worker are kept — enough that no worker ever waits for work, so the server still serves
  its capacity — and the rest are refused at once. The overload ends when an arrival finds a
  worker free. It is the refusals, not the queue, that tell it: the standing queue of a
  closed-loop load at capacity (each client waiting for its answer before sending again)
  refuses no one, and neither does the queue a stall leaves behind.

A job that starts later than `budget` after its admission (a stall that outlasted the
estimate) is refused then: the bound on every answer stays.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

# Queued requests per worker kept in a sustained overload.
FLOOR_PER_WORKER = 2
# How many recent service times the estimate is the median of: one slow request moves it not.
SERVICE_SAMPLES = 32


@dataclass
class AdmissionPolicy:
    """The queue of one worker pool: admitted jobs waiting (`queued`) and running (`started`)."""

    workers: int
    budget: float
    floor_per_worker: int = FLOOR_PER_WORKER
    queued: int = 0
    overloaded: bool = False
    # When each running job started.
    started: list[float] = field(default_factory=list)
    services: deque[float] = field(default_factory=lambda: deque(maxlen=SERVICE_SAMPLES))

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
            self.queued += 1
            return True
        if self.expected_wait(now) > self.budget:
            # It would not be served in time: told now rather than after the wait. More
            # arrive than are served: the overload is sustained.
            self.overloaded = True
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
        if now - admitted_at > self.budget:
            self.overloaded = True
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
