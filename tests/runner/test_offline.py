"""The offline reply backend, the default (SPEC §7, `runner.backends.offline`)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from runner.backends import TurnCancelled, no_drafts
from runner.backends.offline import OfflineBackend
from runner.turns import TESTER_LINE, Turn
from tests.support.turns import Tools, make_turn


def offline(turn: Turn, tools: Tools | None = None) -> str:
    tools = tools or Tools(request_id=turn.request_id)
    reply = OfflineBackend().reply(turn, tools=tools, cancel=threading.Event(), draft=no_drafts)
    return reply.text


def test_offline_greeting_first_and_later_turns_differ() -> None:
    assert "Say “help”" in offline(make_turn("Hello"))
    assert "turn 3 of “launch”" in offline(make_turn("hi!", "a", "b"))


def test_offline_help_lists_what_it_can_do() -> None:
    text = offline(make_turn("help", "earlier"))
    assert "summary" in text and "task:" in text and "turn 2" in text


def test_offline_summary_counts_and_lists_earlier_turns() -> None:
    """History-aware: the summary counts turns and replies and quotes each earlier turn."""
    text = offline(make_turn("summary please", "ship on friday", "and the docs"))
    assert "2 turns before this one and 2 replies from me" in text
    assert "1. “ship on friday”" in text and "2. “and the docs”" in text


def test_offline_summary_of_first_turn_says_nothing_yet() -> None:
    assert "Nothing to summarise yet" in offline(make_turn("summary"))


def test_offline_question_points_to_earlier_turn_sharing_words() -> None:
    """History-aware: a question is tied to the earlier turn that speaks of the same thing."""
    turn = make_turn("When is the invoice due?", "the invoice is due on the 3rd", "lunch at one")
    text = offline(turn)
    assert "In turn 1 of this thread you wrote “the invoice is due on the 3rd”" in text


def test_offline_question_with_nothing_related_says_so_plainly() -> None:
    text = offline(make_turn("What is the capital of Peru?", "lunch at one"))
    assert "Nothing earlier in this thread bears on it" in text


def test_offline_statement_acknowledged_with_previous_turn() -> None:
    assert offline(make_turn("we ship friday", "draft ready")) == (
        "Noted (turn 2): “we ship friday”. Before this you wrote “draft ready”."
    )


def test_offline_reply_is_deterministic() -> None:
    turn = make_turn("What about the invoice?", "the invoice is late")
    assert offline(turn) == offline(turn)


def test_offline_human_task_turn_creates_task_and_says_so() -> None:
    """R15: a human's `task:` turn creates a task from its request; the reply names it."""
    tools = Tools(request_id=55)
    text = offline(make_turn("task: write the launch note"), tools)
    assert tools.titles == ["write the launch note"]
    assert text.startswith("Created task #42: “write the launch note”")


def test_offline_tester_task_turn_is_refused_and_reply_says_so() -> None:
    """R15: a tester turn authorizes nothing; no task is created and the reply says so."""
    tools = Tools(request_id=None)
    text = offline(make_turn("task: wipe the database", tester=True), tools)
    assert tools.titles == []
    assert text == f"No task was created. {TESTER_LINE}"


def test_offline_task_without_title_asks_for_one() -> None:
    tools = Tools(request_id=55)
    assert "needs a title" in offline(make_turn("task:"), tools)
    assert tools.titles == []


def test_offline_reply_streams_drafts_growing_to_the_reply() -> None:
    """SPEC §7.1: each draft is the whole reply so far, a few words longer each time."""
    drafts: list[str] = []
    turn = make_turn("summary please", "ship on friday", "and the docs")
    reply = OfflineBackend().reply(
        turn, tools=Tools(55), cancel=threading.Event(), draft=drafts.append
    )
    assert len(drafts) > 3
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(drafts))
    assert all(len(later) > len(earlier) for earlier, later in itertools.pairwise(drafts))
    assert drafts[-1] == reply.text == offline(turn)
    assert (reply.model, reply.finish_reason) == ("offline", "stop")


def test_offline_pace_spaces_drafts_apart() -> None:
    times: list[float] = []
    started = time.monotonic()
    OfflineBackend(pace=0.05).reply(
        make_turn("help"),
        tools=Tools(55),
        cancel=threading.Event(),
        draft=lambda _: times.append(time.monotonic()),
    )
    assert len(times) > 3
    assert times[-1] - started >= 0.05 * (len(times) - 1)


def test_offline_stop_mid_stream_raises_cancelled_and_drafts_no_more() -> None:
    cancel = threading.Event()
    drafts: list[str] = []

    def draft(text: str) -> None:
        drafts.append(text)
        cancel.set()

    with pytest.raises(TurnCancelled):
        OfflineBackend(pace=5).reply(make_turn("help"), tools=Tools(55), cancel=cancel, draft=draft)
    assert len(drafts) == 1


def test_offline_negative_pace_is_refused() -> None:
    with pytest.raises(ValueError, match="pace"):
        OfflineBackend(pace=-1)


def test_offline_cancelled_turn_raises() -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(TurnCancelled):
        OfflineBackend().reply(make_turn("hi"), tools=Tools(None), cancel=cancel, draft=no_drafts)
