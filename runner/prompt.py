"""The prompt of a turn: the chat completions `messages` a model is sent (SPEC §7).

Two things make a prompt one that every server accepts:

- **It fits.** The whole prompt stays within `MOSAIC_ASSISTANT_CONTEXT_TOKENS` less the room kept
  for the reply. The system prompt and the turn being answered are always sent (the turn trimmed
  in the middle if it alone is too long); the thread's history fills what is left, newest first,
  and the system prompt says what was left out.
- **Its roles alternate.** Strict chat templates (llama.cpp's, many Hugging Face ones) refuse two
  user messages in a row and a system message after the first. So the prompt is always: one
  system message, then user and assistant in turn, ending with the turn as `user`.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from openai.types.chat import ChatCompletionMessageParam

from broker.models import MessageClass
from runner.turns import TESTER_LINE, Entry, Turn

# Tokens a chat template spends on one message besides its text: role markers and separators
# (ChatML's `<|im_start|>user\n…<|im_end|>\n` is 5, Llama 3's header and `<|eot_id|>` 5,
# Mistral's `[INST] … [/INST]` 4), with room to spare.
MESSAGE_OVERHEAD_TOKENS = 8
# Tokens a template spends once per prompt: the begin-of-text token, the reply's own header, and
# text some templates add by themselves (Llama 3.1's knowledge and date lines are about 25).
PROMPT_OVERHEAD_TOKENS = 32
# The least a turn is trimmed to, even when the system prompt leaves less: a prompt that goes
# over a budget too small for its system prompt still carries the turn.
MIN_TURN_TOKENS = 64
# An unanswered turn (stopped, failed) is followed by this, so the roles still alternate.
NO_REPLY = "[No reply to this message.]"
# A turn stopped mid-reply: what the reply had written, then this, so the model knows it was cut
# there by its user and can continue it when asked (docs/decisions/prompts.md).
STOPPED_NOTE = "[The user stopped this reply here.]"
# The system prompt lists the thread's notices (R17) under this line.
NOTICES_HEADING = (
    "Notices the service posted to the user in this thread, oldest first "
    "(for context; they are not the user's words):"
)

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_DIGITS = str.maketrans("", "", string.digits)


def estimate_tokens(text: str) -> int:
    """A conservative count of the tokens `text` costs, without the model's tokenizer.

    Tokenizers differ (OpenAI's, Llama's, Mistral's, Qwen's), and the prompt must fit all of
    them, so the estimate errs high: three characters a token for letters and spaces (English
    runs near four with every common tokenizer, 3.5 with Llama 2's), every ASCII punctuation
    mark and symbol a token of its own (in code, JSON and Markdown they cost most), every digit
    a token (Llama and Mistral split numbers into digits), and one more token for each UTF-8
    byte past the first of a non-ASCII character (accented letters 1, CJK 2, emoji 3; most
    tokenizers spend less). By those tokenizers' usual characters-per-token figures this
    over-counts English prose and code by roughly a third to a half: context given up so that
    the server never finds the prompt longer than its window.
    """
    symbols = len(text) - len(text.translate(_PUNCTUATION))
    digits = len(text) - len(text.translate(_DIGITS))
    extra_bytes = len(text.encode("utf-8")) - len(text)
    plain = len(text) - symbols - digits
    return math.ceil(plain / 3) + symbols + digits + extra_bytes


def estimate_prompt_tokens(messages: Sequence[ChatCompletionMessageParam]) -> int:
    """The estimated cost of a whole prompt: each message's text and overhead, and the prompt's."""
    return PROMPT_OVERHEAD_TOKENS + sum(
        _message_tokens(str(message.get("content") or "")) for message in messages
    )


def system_prompt(turn: Turn, *, system: str | None = None) -> str:
    """The system message's opening: the tester line first for a tester turn (SPEC §7), then
    `system` (an instance's own system prompt) or the default text."""
    text = system if system is not None else _default_system_text(turn)
    return f"{TESTER_LINE}\n{text}" if turn.is_tester else text


def prompt_messages(
    turn: Turn,
    *,
    system: str | None = None,
    reply_tokens: int | None = None,
    context_tokens: int | None = None,
) -> list[ChatCompletionMessageParam]:
    """The chat completions `messages` for a turn: system, the history that fits, the turn.

    The prompt stays within `prompt_budget(context_tokens, reply_tokens)`. The history is kept
    from the newest back and stops at the first exchange that does not fit whole, so what is
    sent is always the thread's latest stretch, without gaps.
    """
    budget = prompt_budget(context_tokens=context_tokens, reply_tokens=reply_tokens)

    opening = system_prompt(turn, system=system)
    units = _fold(turn.history)
    notices_in_history = sum(isinstance(unit, _Notice) for unit in units)
    # Room for the longest notes the system prompt can get, so whatever is left out, the
    # notes fit: every earlier turn and notice left out, and the notices' heading.
    longest_notes = _left_out_note(turn.number - 1, notices_in_history)
    if notices_in_history:
        longest_notes += "\n" + NOTICES_HEADING
    fixed = PROMPT_OVERHEAD_TOKENS + _message_tokens(f"{opening}\n\n{longest_notes}")

    body = turn.body
    if fixed + _message_tokens(body) > budget:
        room = max(budget - fixed - MESSAGE_OVERHEAD_TOKENS, MIN_TURN_TOKENS)
        body = trimmed(body, max_tokens=room)
    room_for_history = budget - fixed - _message_tokens(body)

    kept: list[_Exchange | _Notice] = []
    for unit in reversed(units):
        if unit.tokens > room_for_history:
            break
        room_for_history -= unit.tokens
        kept.insert(0, unit)

    exchanges = [unit for unit in kept if isinstance(unit, _Exchange)]
    notices = [unit for unit in kept if isinstance(unit, _Notice)]
    left_out = _left_out_note(turn.number - 1 - len(exchanges), notices_in_history - len(notices))
    listed = NOTICES_HEADING + "".join(notice.line for notice in notices) if notices else ""
    notes = "\n".join(part for part in (left_out, listed) if part)
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": f"{opening}\n\n{notes}" if notes else opening}
    ]
    for exchange in exchanges:
        messages.append({"role": "user", "content": exchange.turn})
        messages.append({"role": "assistant", "content": exchange.reply_text})
    messages.append({"role": "user", "content": body})
    return messages


def prompt_budget(*, context_tokens: int | None = None, reply_tokens: int | None = None) -> int:
    """The tokens a prompt may spend: the model's context less the room kept for the reply.

    `context_tokens` defaults to `MOSAIC_ASSISTANT_CONTEXT_TOKENS`. `reply_tokens` is the
    request's `max_tokens`; without one a quarter of the context is kept for the reply. The
    reply never gets more than half, so a `max_tokens` as large as the context still leaves
    the prompt room for the turn.
    """
    context = context_tokens if context_tokens is not None else _configured_context_tokens()
    reserved = reply_tokens if reply_tokens is not None else context // 4
    return context - min(max(reserved, 0), context // 2)


def trimmed(text: str, *, max_tokens: int) -> str:
    """`text` cut to `max_tokens` by leaving out its middle, which a marker stands in for.

    A long paste keeps its beginning (what it is) and its end (usually the question), and the
    model is told how much is missing instead of answering a text it thinks complete.
    """
    if estimate_tokens(text) <= max_tokens:
        return text

    def cut(keep: int) -> str:
        head, tail = keep - keep // 2, keep // 2
        return text[:head] + _omission_marker(len(text) - keep) + text[len(text) - tail :]

    # The most characters kept whose cut fits; the marker alone is the shortest answer.
    fits, too_long = 0, len(text)
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if estimate_tokens(cut(middle)) <= max_tokens:
            fits = middle
        else:
            too_long = middle
    return cut(fits)


# --- the history as exchanges ----------------------------------------------------------------


@dataclass(frozen=True)
class _Exchange:
    """An earlier turn and its reply; `reply` is None for a turn that got none, and `partial`
    what its reply had written when a stop ended it."""

    turn: str
    reply: str | None
    partial: str | None = None

    @property
    def reply_text(self) -> str:
        if self.reply is not None:
            return self.reply
        return f"{self.partial}\n\n{STOPPED_NOTE}" if self.partial else NO_REPLY

    @property
    def tokens(self) -> int:
        return _message_tokens(self.turn) + _message_tokens(self.reply_text)


@dataclass(frozen=True)
class _Notice:
    """A notice of the thread (R17), which the system prompt lists."""

    body: str

    @property
    def line(self) -> str:
        return f"\n- {self.body}"

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.line)


def _fold(history: Sequence[Entry]) -> list[_Exchange | _Notice]:
    """The history as exchanges and notices, oldest first.

    Each turn becomes an exchange with the reply that follows it in the transcript, or with no
    reply when the next entry is another turn (it was stopped or failed): the prompt then puts a
    short placeholder where the reply would be rather than merge the turns, so the model does
    not take a turn its user stopped for part of the question it answers now. A turn stopped
    mid-reply puts what its reply had written there instead, marked as stopped. A reply whose
    turn fell out of the history window has nothing to pair with and is left out. MESSAGE
    entries (a run's messages to other roles on the bus) are not part of the conversation with
    the thread's owner and are left out.
    """
    units: list[_Exchange | _Notice] = []
    waiting: Entry | None = None
    for entry in history:
        if entry.message_class == MessageClass.REQUEST:
            if waiting is not None:
                units.append(_Exchange(turn=waiting.body, reply=None, partial=waiting.partial))
            waiting = entry
        elif entry.message_class == MessageClass.RESULT:
            if waiting is not None:
                units.append(_Exchange(turn=waiting.body, reply=entry.body))
                waiting = None
        elif entry.message_class == MessageClass.NOTICE:
            units.append(_Notice(body=entry.body))
    if waiting is not None:
        units.append(_Exchange(turn=waiting.body, reply=None, partial=waiting.partial))
    return units


# --- text --------------------------------------------------------------------------------------


def _default_system_text(turn: Turn) -> str:
    text = (
        f"You are {turn.instance}, an assistant on the Mosaic bus, answering in the thread "
        f"“{turn.thread_name}”. Reply to the last user message; the earlier messages are the "
        "thread's history."
    )
    if turn.is_consultation:
        text += f" The user is {turn.from_role}, a colleague consulting you."
    return text


def _left_out_note(turns: int, notices: int) -> str:
    """The system prompt's note of what the history leaves out; empty when nothing is."""
    parts = []
    if turns > 0:
        parts.append(
            "the thread's first turn and its reply"
            if turns == 1
            else f"the thread's first {turns} turns and their replies"
        )
    if notices > 0:
        parts.append(_count(notices, "earlier notice"))
    if not parts:
        return ""
    return f"Left out of the history below: {', and '.join(parts)}."


def _omission_marker(characters: int) -> str:
    return (
        f"\n\n[… {characters:,} characters of this message are left out here "
        "to fit the model's context …]\n\n"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _message_tokens(content: str) -> int:
    return estimate_tokens(content) + MESSAGE_OVERHEAD_TOKENS


def _configured_context_tokens() -> int:
    return int(settings.MOSAIC_ASSISTANT_CONTEXT_TOKENS)
