"""Fixtures for assistant runs: short leases, real runners, slow backends, a fake model server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from runner.backends import Draft, Reply, TurnCancelled, TurnTools
from runner.backends.offline import OfflineBackend
from runner.service import Runner
from runner.turns import Turn
from tests.support.model_servers import FakeModel, serve_fake_model

LEASE = 1.0


@dataclass
class Deadline:
    """The end of a wait for `what`, `timeout` seconds from now."""

    what: str
    timeout: float
    at: float = field(init=False)

    def __post_init__(self) -> None:
        self.at = time.monotonic() + self.timeout

    def check(self) -> None:
        """Fail, naming what never came, once the deadline has passed."""
        if time.monotonic() > self.at:
            raise AssertionError(f"{self.what}: not within {self.timeout}s")


def wait_for(
    predicate: Callable[[], Any],
    *,
    what: str = "the awaited condition",
    timeout: float = 10.0,
    every: float = 0.02,
) -> Any:
    """Poll until `predicate()` is truthy and return it; fail after `timeout` seconds, naming
    `what` never came."""
    deadline = Deadline(what, timeout)
    while not (value := predicate()):
        deadline.check()
        time.sleep(every)
    return value


async def wait_for_async(
    predicate: Callable[[], Any],
    *,
    what: str = "the awaited condition",
    timeout: float = 10.0,
    every: float = 0.02,
) -> Any:
    """`wait_for` inside an event loop: the loop's other tasks run while it polls."""
    deadline = Deadline(what, timeout)
    while not (value := predicate()):
        deadline.check()
        await asyncio.sleep(every)
    return value


class WatchedRunner(Runner):
    """A runner that counts its looks for pending work, so a test can wait on them."""

    looks = 0

    def _fill(self) -> None:
        super()._fill()
        self.looks += 1


def wait_until_looked_again(runner: WatchedRunner, times: int = 2) -> None:
    """Wait until `runner` has looked for pending work `times` more times and works on nothing:
    whatever it would have taken up by now, it has taken up and finished."""
    looked = runner.looks
    wait_for(
        lambda: runner.looks >= looked + times and not runner.busy,
        what=f"runner {runner.name} looking for work {times} more times, then idle",
    )


@pytest.fixture
def short_lease(settings) -> float:
    """Leases of one second, so dead runs and stops show within a test's patience."""
    settings.MOSAIC_CLAIM_LEASE_SECONDS = LEASE
    return LEASE


@pytest.fixture
def start_runner(short_lease: float) -> Iterator[Callable[..., WatchedRunner]]:
    """Start real runners (threads in this process); every one is stopped at teardown."""
    runners: list[WatchedRunner] = []

    def start(**options: Any) -> WatchedRunner:
        options.setdefault("backend", OfflineBackend())
        options.setdefault("poll_interval", 0.02)
        runner = WatchedRunner(**options)
        runner.start()
        runners.append(runner)
        return runner

    yield start
    for runner in runners:
        assert runner.stop(timeout=10), "a runner's threads did not end"


@dataclass
class GatedBackend:
    """Holds every turn until released, like a slow model; honours cancellation."""

    name: str = "gated"
    release: threading.Event = field(default_factory=threading.Event)
    started: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        self.started.append(turn.message_id)
        while not self.release.wait(0.01):
            if cancel.is_set():
                self.cancelled.append(turn.message_id)
                raise TurnCancelled
        self.answered.append(turn.message_id)
        return Reply(text=f"answer to {turn.message_id}")


@pytest.fixture
def gated() -> Iterator[GatedBackend]:
    backend = GatedBackend()
    yield backend
    backend.release.set()


# --- a fake OpenAI-compatible server on loopback ----------------------------------------


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """An OpenAI-compatible `/v1/chat/completions` on 127.0.0.1: the tests never leave loopback."""
    with serve_fake_model() as model:
        yield model
