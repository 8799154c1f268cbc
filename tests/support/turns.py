"""A turn as the reply backends get it, and tools that record each call, for the backends' tests."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from broker.policy import RoleLists
from broker.steps import ToolCall
from broker.tools import Toolbox, offered_tools
from runner.backends.base import CallResult
from runner.turns import Entry, Turn


@dataclass
class Tools:
    """`TurnTools` that record each call; as the broker does, `create_task` is refused when the
    turn has no request (R15), and every other call is made."""

    request_id: int | None
    toolbox: Toolbox = field(
        default_factory=lambda: offered_tools(
            RoleLists.of(receive_from=["human"], send_to=["human", "reviewer"])
        )
    )
    calls: list[ToolCall] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)

    def call(self, call: ToolCall) -> CallResult:
        self.calls.append(call)
        if call.name == "create_task" and self.request_id is None:
            refused = {"outcome": "refused", "error": "invalid", "detail": "no human request"}
            return CallResult(outcome="refused", content=json.dumps(refused))
        if call.name == "create_task":
            self.titles.append(json.loads(call.arguments)["title"])
            made = {"outcome": "ok", "task": 41 + len(self.titles)}
            return CallResult(outcome="ok", content=json.dumps(made))
        return CallResult(outcome="ok", content=json.dumps({"outcome": "ok"}))


def make_turn(body: str, *earlier: str, tester: bool = False, replies: bool = True) -> Turn:
    """A turn after `earlier` turns (each answered, unless `replies` is false)."""
    sender = "tester" if tester else "human"
    history: list[Entry] = []
    for index, text in enumerate(earlier):
        history.append(Entry(index * 2 + 1, sender, "assistant", "REQUEST", text))
        if replies:
            history.append(Entry(index * 2 + 2, "assistant", sender, "RESULT", f"reply {index}"))
    return Turn(
        message_id=100,
        thread_id=7,
        thread_name="launch",
        instance="assistant",
        from_role=sender,
        body=body,
        request_id=None if tester else 55,
        number=len(earlier) + 1,
        history=tuple(history),
    )
