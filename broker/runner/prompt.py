"""The prompt of a turn: the chat completions `messages` a model is sent (SPEC §7)."""

from __future__ import annotations

from openai.types.chat import ChatCompletionMessageParam

from broker.models import MessageClass
from broker.runner.turns import TESTER_LINE, Turn


def system_prompt(turn: Turn) -> str:
    """The first message of the prompt. A tester turn's begins with the tester line (SPEC §7)."""
    lines = [
        f"You are {turn.instance}, an assistant on the Mosaic bus, answering in the thread "
        f"“{turn.thread_name}”. Reply to the last user message; the earlier messages are the "
        "thread's history.",
    ]
    if turn.is_tester:
        lines.insert(0, TESTER_LINE)
    return "\n".join(lines)


def prompt_messages(turn: Turn) -> list[ChatCompletionMessageParam]:
    """The chat completions `messages` for a turn: system, the history, then the turn itself."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": system_prompt(turn)}
    ]
    for entry in turn.history:
        if entry.message_class == MessageClass.REQUEST:
            messages.append({"role": "user", "content": entry.body})
        elif entry.message_class == MessageClass.RESULT:
            messages.append({"role": "assistant", "content": entry.body})
        elif entry.message_class == MessageClass.NOTICE:
            messages.append({"role": "system", "content": f"Notice: {entry.body}"})
    messages.append({"role": "user", "content": turn.body})
    return messages
