"""Assistant runners as the tests run them: a short lease, a runner whose looks for work can be
waited on, and a backend that holds every turn until released."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from runner.backends import Draft, Reply, TurnCancelled, TurnTools
from runner.service import Runner
from runner.turns import Turn
from tests.support.waits import wait_for

LEASE = 1.0


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
