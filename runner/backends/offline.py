"""The offline default: deterministic replies from the thread's own history, no network.

It greets, answers questions from what was said earlier in the thread, summarises the thread,
lists what it can do, and creates a task from a human's `task: …` turn. A tester's `task:` is
refused by R15 — a tester turn carries no human request — and the reply says so plainly.

It streams like a model would (SPEC §7.1): a few words per draft, `pace` seconds apart, so the
Console shows drafts with no model server. The reply itself does not depend on the pace.
"""

from __future__ import annotations

import json
import re
import threading

from broker.models import StepOutcome
from broker.steps import ToolCall
from broker.tools import CREATE_TASK
from runner.backends.base import Draft, Reply, TurnCancelled, TurnTools
from runner.turns import TESTER_LINE, Entry, Turn

GREETINGS = frozenset({"hi", "hello", "hey", "hallo", "good morning", "good afternoon"})
HELP_WORDS = frozenset({"help", "/help", "help?", "what can you do", "what can you do?"})
SUMMARY_WORDS = ("summary", "summarise", "summarize", "recap")
TASK_PREFIX = "task:"
# Words too common to tie a question to an earlier turn.
COMMON_WORDS = (
    "about after again also because been before being could does from have here just like "
    "more much only over said should some than that their them then there these they this "
    "what when where which while will with would your"
)
STOPWORDS = frozenset(COMMON_WORDS.split())
QUOTE_LENGTH = 80
SUMMARY_TURNS = 10
# How many words each draft adds.
DRAFT_WORDS = 3


def quote(text: str, limit: int = QUOTE_LENGTH) -> str:
    """`text` on one line, shortened to `limit` characters, in quotation marks."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return f"“{line}”"


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 4} - STOPWORDS


def turns_label(count: int) -> str:
    return f"{count} turn" if count == 1 else f"{count} turns"


def drafts_of(text: str, words_each: int = DRAFT_WORDS) -> list[str]:
    """The successive drafts of `text`, each `words_each` words longer; the last is `text`."""
    pieces = re.findall(r"\s*\S+\s*", text) or [text]
    return ["".join(pieces[: end + words_each]) for end in range(0, len(pieces), words_each)]


class OfflineBackend:
    """Deterministic: the same thread gives the same reply, every time."""

    name = "offline"

    def __init__(self, *, pace: float = 0.0) -> None:
        if pace < 0:
            raise ValueError("the offline pace must not be negative")
        # Seconds between two drafts; 0 sends them all at once (tests).
        self.pace = pace

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        if cancel.is_set():
            raise TurnCancelled
        text = self.answer(turn, tools)
        for number, so_far in enumerate(drafts_of(text)):
            # The wait is the cancellation check too: a stop ends the reply mid-stream.
            if (number and self.pace and cancel.wait(self.pace)) or cancel.is_set():
                raise TurnCancelled
            draft(so_far)
        return Reply(text=text, model="offline", finish_reason="stop")

    def answer(self, turn: Turn, tools: TurnTools) -> str:
        text = " ".join(turn.body.split())
        lowered = text.lower()
        if lowered.startswith(TASK_PREFIX):
            return self.task(turn, text[len(TASK_PREFIX) :].strip(), tools)
        if lowered.rstrip("!.") in HELP_WORDS:
            return self.help(turn)
        if any(word in lowered for word in SUMMARY_WORDS):
            return self.summary(turn)
        if lowered.rstrip("!.,") in GREETINGS:
            return self.greeting(turn)
        if text.endswith("?"):
            return self.question(turn, text)
        return self.acknowledgement(turn, text)

    def task(self, turn: Turn, title: str, tools: TurnTools) -> str:
        """A `create_task` call, a step of the turn like a model's (SPEC §7.2). Its call id is
        the turn's own, so a retried turn makes it once."""
        if not title:
            return "A task needs a title: write “task: what to do”."
        call = ToolCall(
            call_id=f"offline-task-{turn.message_id}",
            round=1,
            name=CREATE_TASK,
            arguments=json.dumps({"title": title}, ensure_ascii=False),
        )
        called = tools.call(call)
        result = json.loads(called.content)
        if called.outcome == StepOutcome.OK:
            return (
                f"Created task #{result['task']}: {quote(title)}. "
                "It cites your request in this thread."
            )
        if turn.is_tester:
            # R15: a tester turn wrote no `human.input`, so no task can cite it.
            return f"No task was created. {TESTER_LINE}"
        return f"I could not create that task: {result.get('detail', called.outcome)}"

    def help(self, turn: Turn) -> str:
        return "\n".join(
            [
                f"I am {turn.instance}, answering offline from this thread alone. I can:",
                "- summarise the thread: say “summary”;",
                "- create a task from your request: “task: what to do”;",
                "- point you to what was said earlier when you ask a question;",
                f"- count the turns: this is turn {turn.number} of {quote(turn.thread_name)}.",
            ]
        )

    def summary(self, turn: Turn) -> str:
        earlier = turn.earlier_turns
        replies = [entry for entry in turn.history if entry.is_reply]
        lines = [
            f"Thread {quote(turn.thread_name)}: {turns_label(len(earlier))} before this one "
            f"and {len(replies)} repl{'y' if len(replies) == 1 else 'ies'} from me."
        ]
        if not earlier:
            lines.append("Nothing to summarise yet: this is the first turn.")
            return "\n".join(lines)
        shown = earlier[-SUMMARY_TURNS:]
        first_number = turn.number - len(shown)
        lines += [
            f"{first_number + index}. {quote(entry.body, 60)}" for index, entry in enumerate(shown)
        ]
        return "\n".join(lines)

    def greeting(self, turn: Turn) -> str:
        if turn.number == 1:
            return f"Hello! I am {turn.instance}. Say “help” to see what I can do."
        return f"Hello again — this is turn {turn.number} of {quote(turn.thread_name)}."

    def question(self, turn: Turn, text: str) -> str:
        match = self.related_turn(turn, text)
        if match is None:
            return (
                f"You asked {quote(text)}. Nothing earlier in this thread bears on it, and "
                "offline I know only this thread. Say “help” for what I can do."
            )
        number, entry = match
        return (
            f"You asked {quote(text)}. In turn {number} of this thread you wrote "
            f"{quote(entry.body)}; that is what I know about it here."
        )

    def related_turn(self, turn: Turn, text: str) -> tuple[int, Entry] | None:
        """The earlier turn sharing most words with `text` (the latest on a tie), numbered."""
        wanted = words(text)
        earlier = turn.earlier_turns
        first_number = turn.number - len(earlier)
        best: tuple[int, int, Entry] | None = None
        for index, entry in enumerate(earlier):
            shared = len(wanted & words(entry.body))
            if shared and (best is None or shared >= best[0]):
                best = (shared, first_number + index, entry)
        return None if best is None else (best[1], best[2])

    def acknowledgement(self, turn: Turn, text: str) -> str:
        if turn.number == 1:
            return (
                f"Noted: {quote(text)}. This is the first turn of {quote(turn.thread_name)}; "
                "say “help” to see what I can do."
            )
        previous = turn.earlier_turns[-1].body if turn.earlier_turns else ""
        reply = f"Noted (turn {turn.number}): {quote(text)}."
        if previous:
            reply += f" Before this you wrote {quote(previous)}."
        return reply
