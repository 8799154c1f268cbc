"""A turn's steps: the tool calls the assistant made while answering it (SPEC §7.2).

The thread's messages API gives each REQUEST message (a turn) its finished steps, in id order;
`steps_of` reads them from that message. `describe_step` writes one as a person reads it,
`create_task(title="book the photographer") refused (invalid)`, for failures, reports and the
judge.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A step's outcomes (SPEC §7.2).
OK = "ok"
REFUSED = "refused"
ERROR = "error"
OUTCOMES = (OK, REFUSED, ERROR)
# The longest argument value, and result, written out in a description.
SHOWN_VALUE = 80
SHOWN_RESULT = 300


@dataclass(frozen=True)
class Step:
    """One tool call of a turn: which tool, with what arguments, and how it ended.

    `arguments` is the parsed JSON object the model sent, or the text it sent when that was no
    JSON object; `code` is the broker's refusal code, or the error's (`unknown-tool`, …)."""

    tool: str
    arguments: Any = None
    outcome: str | None = None
    code: str | None = None
    result: Any = None
    call_id: str = ""
    round: int = 1
    id: int | None = None
    started_at: str | None = None
    ended_at: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        return cls(
            tool=str(data.get("tool") or ""),
            arguments=data.get("arguments"),
            outcome=data.get("outcome"),
            code=data.get("code"),
            result=data.get("result"),
            call_id=str(data.get("call_id") or ""),
            round=int(data.get("round") or 1),
            id=data.get("id"),
            started_at=data.get("started_at"),
            ended_at=data.get("ended_at"),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "round": self.round,
            "tool": self.tool,
            "arguments": self.arguments,
            "outcome": self.outcome,
            "code": self.code,
            "result": self.result,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }


def steps_of(message: Mapping[str, Any]) -> tuple[Step, ...]:
    """The steps of a turn as its message carries them (none when it carries none)."""
    found = message.get("steps")
    if not isinstance(found, list):
        return ()
    return tuple(Step.from_json(step) for step in found if isinstance(step, dict))


def _value(value: Any, limit: int = SHOWN_VALUE) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_call(step: Step) -> str:
    """`tool(name="value", …)`; arguments that were no JSON object are shown as the text sent."""
    if isinstance(step.arguments, dict):
        told = ", ".join(f"{name}={_value(value)}" for name, value in step.arguments.items())
    elif step.arguments is None:
        told = ""
    else:
        told = f"not an object: {_value(step.arguments)}"
    return f"{step.tool}({told})"


def describe_step(step: Step, *, with_result: bool = False) -> str:
    """The call and its outcome, `create_task(title="x") refused (invalid)`; `with_result`
    adds what the tool answered (the refusal's sentence, the ids it made)."""
    told = f"{describe_call(step)} {step.outcome or 'running'}"
    if step.code:
        told += f" ({step.code})"
    if with_result and step.result is not None:
        result = step.result
        detail = result.get("detail") if isinstance(result, dict) else None
        told += f": {detail}" if isinstance(detail, str) else f": {_value(result, SHOWN_RESULT)}"
    return told


def describe_steps(steps: Sequence[Step], *, with_result: bool = False) -> str:
    """Every step of a turn, `; `-separated, or `none`."""
    if not steps:
        return "none"
    return "; ".join(describe_step(step, with_result=with_result) for step in steps)
