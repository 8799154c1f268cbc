"""Waiting for what a test expects to happen: polling a condition until a deadline, naming what
never came."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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
