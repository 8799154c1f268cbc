"""What a reply backend is: given a turn, the text of the reply, or an error, or a cancellation."""

from __future__ import annotations

import threading
from typing import Protocol

from broker.runner.turns import Turn


class ReplyFailed(Exception):
    """The backend could not produce a reply (network, timeout, bad answer). Retried later."""


class TurnCancelled(Exception):
    """The turn was cancelled (its claim ended, or the runner is stopping); nothing is sent."""


class TurnTools(Protocol):
    """What a backend may do besides replying, as the run that holds the thread."""

    def create_task(self, title: str) -> int:
        """Create a task from this turn's human request (R15) and return its id.

        Refuses (`broker.refusals.Refusal`) when the turn carries no human request, as a
        tester's never does.
        """
        ...


class ReplyBackend(Protocol):
    """A pluggable reply backend. `cancel` is set when the reply is no longer wanted: a
    backend that waits on anything checks it and raises `TurnCancelled`."""

    name: str

    def reply(self, turn: Turn, *, tools: TurnTools, cancel: threading.Event) -> str: ...
