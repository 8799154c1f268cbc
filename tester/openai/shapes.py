"""What the OpenAI-compatible routes answer, in OpenAI's shapes (SPEC §6.1).

A completion's `id` names the turn (`chatcmpl-TURN`), its `model` is the model the server
recorded (the instance's name when none was), and its `usage` and `finish_reason` are the
RESULT's; a `mosaic` field beside them names the thread and the turn, and carries the turn's
steps (SPEC §7.2). Errors are `{"error": {"message", "type", "param", "code"}}`, with the
product's own refusal code as `code` (SPEC §6) but where OpenAI has a code of its own for the
same thing (`invalid_api_key`, `model_not_found`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.models import Message, Step
from chat.api.shapes import StepOut

# Who `GET /v1/models` says owns each model.
OWNED_BY = "mosaic"
# OpenAI's finish reasons; a recorded one outside them (or none) is told as `stop`.
FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})
# OpenAI's codes for what the product calls otherwise.
OPENAI_CODES = {"not-authenticated": "invalid_api_key"}
MODEL_NOT_FOUND = "model_not_found"


def model(name: str) -> dict[str, Any]:
    """An instance as a model: its name is the model's id."""
    return {"id": name, "object": "model", "created": 0, "owned_by": OWNED_BY}


def model_list(names: Sequence[str]) -> dict[str, Any]:
    return {"object": "list", "data": [model(name) for name in names]}


def completion_id(turn: int) -> str:
    return f"chatcmpl-{turn}"


def mosaic(thread: int, turn: int, steps: Sequence[Step] | None = None) -> dict[str, Any]:
    """The product's own part of an answer: where the conversation is kept, and what the
    assistant did while answering (SPEC §7.2), once it is known."""
    part: dict[str, Any] = {"thread": thread, "turn": turn}
    if steps is not None:
        part["steps"] = StepOut(steps, many=True).data  # type: ignore[arg-type]
    return part


def usage(result: Message) -> dict[str, int] | None:
    """The RESULT's token counts, or None when the model server gave none (SPEC §7.1)."""
    if result.prompt_tokens is None or result.completion_tokens is None:
        return None
    return {
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "total_tokens": result.prompt_tokens + result.completion_tokens,
    }


def finish_reason(result: Message) -> str:
    recorded = result.finish_reason
    return recorded if recorded in FINISH_REASONS else "stop"


def created(result: Message) -> int:
    return int(result.created_at.timestamp())


def completion(
    *, thread: int, turn: int, instance: str, result: Message, steps: Sequence[Step]
) -> dict[str, Any]:
    """`chat.completion`: the reply to `turn`, as it was recorded."""
    return {
        "id": completion_id(turn),
        "object": "chat.completion",
        "created": created(result),
        "model": result.model or instance,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": result.body, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason(result),
            }
        ],
        "usage": usage(result),
        "system_fingerprint": None,
        "mosaic": mosaic(thread, turn, steps),
    }


def chunk(
    *,
    turn: int,
    created_at: int,
    model_name: str,
    delta: dict[str, Any],
    finish: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """`chat.completion.chunk`: one piece of the reply to `turn`; `extra` adds `usage` and
    `mosaic`."""
    return {
        "id": completion_id(turn),
        "object": "chat.completion.chunk",
        "created": created_at,
        "model": model_name,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "system_fingerprint": None,
        **extra,
    }


def error_type(status: int) -> str:
    return "server_error" if status >= 500 else "invalid_request_error"


def error(
    status: int, code: str, message: str, *, param: str | None = None, **extra: Any
) -> dict[str, Any]:
    """OpenAI's error body; `extra` adds fields beside `error` (`mosaic`)."""
    return {
        "error": {
            "message": message,
            "type": error_type(status),
            "param": param,
            "code": OPENAI_CODES.get(code, code),
        },
        **extra,
    }
