"""What a reply backend is: given a turn, a reply (with what the server reported about it), a
classified failure, or a cancellation (SPEC §7.1)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.steps import ToolCall
from broker.tools import Toolbox
from runner.turns import Turn

# Called with the whole reply so far (not a fragment), as often as the backend likes; the run
# decides how often a draft is stored and shown.
Draft = Callable[[str], None]


def no_drafts(text: str) -> None:
    """A `Draft` for callers that show none."""


@dataclass(frozen=True)
class Reply:
    """A finished reply and what the server reported about it (unknown: empty or None)."""

    text: str
    model: str = ""
    # The server's `finish_reason`: `stop`, `length` (cut off at the token limit), …
    finish_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # From sending the request to the first text, in milliseconds.
    first_token_ms: int | None = None


class ReplyFailed(Exception):
    """The backend could not produce a reply.

    `sentence` says why, for people (never an exception's repr). A `transient` failure
    (connection, timeout, 408, 429, 5xx) is retried after a back-off — at least `retry_after`
    seconds when the server said so; any other fails the turn at once.
    """

    def __init__(self, sentence: str, *, transient: bool, retry_after: float | None = None):
        super().__init__(sentence)
        self.sentence = sentence
        self.transient = transient
        self.retry_after = retry_after


class EndpointRefused(Exception):
    """The model server refused a runner's configuration (its key, its model): the runner
    cannot start. The message says which, for the operator."""


class TurnCancelled(Exception):
    """The turn was cancelled (its claim ended, or the runner is stopping); nothing is sent."""


@dataclass(frozen=True)
class CallResult:
    """How a tool call went (SPEC §7.2): its outcome (`ok`, `refused`, `error`) and what the
    model is told, as the content of a `tool` message."""

    outcome: str
    content: str


class TurnTools(Protocol):
    """What a backend may do besides replying, as the run that holds the thread (SPEC §7.2):
    the tools its instance is offered, and calling one. A call that was made already in an
    earlier attempt of the turn is not made again; its result is returned."""

    @property
    def toolbox(self) -> Toolbox: ...

    def call(self, call: ToolCall) -> CallResult:
        """Make the call and return how it went: a refusal or a bad call is a result, never an
        exception. Raises `TurnCancelled` when the run's claim ended meanwhile."""
        ...


class ReplyBackend(Protocol):
    """A pluggable reply backend. `cancel` is set when the reply is no longer wanted: a
    backend that waits on anything checks it and raises `TurnCancelled` (closing any request
    it has open). A backend that can stream calls `draft` with the text so far."""

    name: str

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply: ...
