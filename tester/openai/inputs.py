"""A chat completions request read as a tester's conversation (SPEC §6.1).

No database is read here. What the request says is the conversation (`model`, `messages`)
and how to answer it (`stream`, `stream_options`). How the instance answers — its prompt, its
sampling, its tools — is the business file's, not the tester's: such fields are ignored and
named, except those whose ignoring would make the answer something other than one reply of
the instance in words (`n` above 1, tools the client brings), which are refused. A system
message is refused: the instance's prompt lives in the business file, and the tester talks as a
human would.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from broker.actions.conversations import ASSISTANT, USER, Exchange

# What a request may say and this endpoint reads.
READ_FIELDS = frozenset({"model", "messages", "stream", "stream_options"})
# Fields that must be absent or empty: the instance's tools are the business file's.
TOOL_FIELDS = ("tools", "functions")
# A message's keys this endpoint reads; `name` and the rest are ignored, but calls an assistant
# message says it made are no reply in words, and are refused.
MESSAGE_FIELDS = frozenset({"role", "content"})
CALL_FIELDS = ("tool_calls", "function_call", "audio")
# A field name the ignored-fields header can carry as it is.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
# The most names the header lists; the rest are counted as "…".
NAMED_MAX = 32

SYSTEM_REFUSED = (
    "A {role} message is refused: the instance's prompt lives in the business file, and the "
    "tester talks as a human would."
)


class Unreadable(Exception):
    """The request is no conversation this endpoint can take: 400, with `param` when one field
    is to blame."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class Asked:
    """A request as a conversation: the instance, what came before, the new turn."""

    model: str
    history: tuple[Exchange, ...]
    turn: str
    stream: bool
    ignored: tuple[str, ...]

    @property
    def ignored_header(self) -> str:
        """`X-Mosaic-Ignored-Fields`: the ignored fields, sorted, comma-separated."""
        named = list(self.ignored[:NAMED_MAX])
        if len(self.ignored) > NAMED_MAX:
            named.append("…")
        return ", ".join(named)


def read_request(data: Any) -> Asked:
    """The conversation `data` holds, or `Unreadable` saying why it is none."""
    if not isinstance(data, dict):
        raise Unreadable("The body must be a JSON object.")
    # A field sent as null sets nothing: not named.
    ignored = {
        _plain(name)
        for name, value in data.items()
        if name not in READ_FIELDS and value is not None
    }
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise Unreadable(
            "`model` must name an instance (GET /v1/models lists them).", param="model"
        )
    _refuse_what_changes_the_answer(data)
    ignored -= set(TOOL_FIELDS)
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise Unreadable("`stream` must be true or false.", param="stream")
    options = data.get("stream_options")
    if options is not None and not (
        isinstance(options, dict) and isinstance(options.get("include_usage", False), bool)
    ):
        raise Unreadable(
            "`stream_options` must be an object; its `include_usage` true or false.",
            param="stream_options",
        )
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Unreadable("`messages` must be a list of at least one message.", param="messages")
    exchanges = []
    for index, message in enumerate(messages):
        exchange, message_ignored = _exchange(message, index)
        exchanges.append(exchange)
        ignored |= message_ignored
    role, turn = exchanges[-1]
    if role != USER:
        raise Unreadable(
            "The last message must be the user's new turn: the tester writes its own turns "
            "and never the assistant's part.",
            param="messages",
        )
    return Asked(
        model=model,
        history=tuple(exchanges[:-1]),
        turn=turn,
        stream=bool(stream),
        ignored=tuple(sorted(ignored)),
    )


def _refuse_what_changes_the_answer(data: dict[str, Any]) -> None:
    n = data.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise Unreadable("`n` must be 1: one conversation, one reply.", param="n")
    for field in TOOL_FIELDS:
        if data.get(field) not in (None, []):
            raise Unreadable(
                f"`{field}` is refused: the instance's tools are the business file's, and its "
                "calls are its own.",
                param=field,
            )
    choice = data.get("tool_choice")
    if choice not in (None, "none", "auto"):
        raise Unreadable(
            "`tool_choice` may only be absent, none or auto: the instance has no tools of the "
            "client's to call.",
            param="tool_choice",
        )


def _exchange(message: Any, index: int) -> tuple[Exchange, set[str]]:
    """One message as (role, text), and the keys of it that are ignored."""
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        raise Unreadable(f"{where} must be an object with a role and content.", param=where)
    role = message.get("role")
    if role in ("system", "developer"):
        raise Unreadable(SYSTEM_REFUSED.format(role=role), param=f"{where}.role")
    if role in ("tool", "function"):
        raise Unreadable(
            f"A {role} message is refused: the instance's tools are the business file's, and "
            "its calls are its own.",
            param=f"{where}.role",
        )
    if role not in (USER, ASSISTANT):
        raise Unreadable(f"{where}.role must be user or assistant.", param=f"{where}.role")
    for field in CALL_FIELDS:
        if message.get(field) not in (None, []):
            raise Unreadable(
                f"{where} carries {field}: a reply of the assistant's is text, and tool calls "
                "are the instance's own.",
                param=f"{where}.{field}",
            )
    ignored = {
        f"messages.{_plain(name)}"
        for name, value in message.items()
        if name not in MESSAGE_FIELDS and value is not None
    } - {f"messages.{field}" for field in CALL_FIELDS}
    return (str(role), _text(message.get("content"), where)), ignored


def _text(content: Any, where: str) -> str:
    """A message's content: a string, or text parts, joined by line breaks."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise Unreadable(
            f"{where}.content must be a string or a list of text parts.", param=f"{where}.content"
        )
    texts = [
        part.get("text") if isinstance(part, dict) and part.get("type") == "text" else None
        for part in content
    ]
    if not all(isinstance(text, str) for text in texts):
        raise Unreadable(
            f"{where}.content may hold only text parts: the tester talks in words.",
            param=f"{where}.content",
        )
    return "\n".join(str(text) for text in texts)


def _plain(name: str) -> str:
    """A field name as the header names it: a plain word, or refused."""
    if not _PLAIN_NAME.fullmatch(name):
        raise Unreadable(
            "Field names are plain words (letters, digits, underscores; at most 64).",
        )
    return name
