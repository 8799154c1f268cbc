"""`only_own_threads` (`tester.suites.isolation`): every thread named by what a repeat's client
received is the repeat's own (R3, R20), checked from the tester's side. Which fields name a
thread; the check over a scripted listener whose socket names a foreign thread, through the
real `ConversationThread`; and a real `manage.py serve`, on which it holds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tester.suites.client import ConversationThread, TesterClient
from tester.suites.expectation_keys import ConversationExpect
from tester.suites.expectations import Checked, check_conversation
from tester.suites.isolation import ThreadsHeard, threads_named
from tester.suites.matchers import Failure
from tester.suites.runner import FAIL, PASS, plans, run_plans
from tests.support.served import Served, human_left_alone
from tests.support.stand_ins import write_suite

OWN = 12
FOREIGN = 7


@pytest.mark.parametrize(
    ("data", "named"),
    [
        # The shapes the listener sends: a message row, a frame of one, a batch of them.
        ({"id": 3, "thread": OWN, "class": "RESULT", "body": "hi"}, {OWN}),
        ({"type": "message", "message": {"id": 3, "thread": FOREIGN}}, {FOREIGN}),
        ({"type": "messages", "rows": [{"thread": OWN}, {"thread": FOREIGN}]}, {OWN, FOREIGN}),
        # An answer carrying a thread, and the thread a branch was made from.
        ({"thread": {"id": OWN, "branched_from": {"thread": FOREIGN}}}, {OWN, FOREIGN}),
        # A trail row, whatever frame carries it.
        ({"type": "trail.row", "row": {"thread": FOREIGN, "text": "x"}}, {FOREIGN}),
        # Frames that name no thread, and values that are no thread id.
        ({"type": "reply.draft", "in_reply_to": 3, "text": "thread 7"}, set()),
        ({"type": "pong", "last": 9}, set()),
        ({"thread": None}, set()),
        ({"thread": True}, set()),
        ({"thread": "7"}, set()),
        # A step: the broker's result counts, the model's own arguments do not.
        (
            {"type": "reply.step", "step": {"arguments": {"thread": FOREIGN}, "result": {}}},
            set(),
        ),
        ({"type": "reply.step", "step": {"result": {"thread": FOREIGN}}}, {FOREIGN}),
        ([{"thread": OWN}, "text", 5], {OWN}),
    ],
)
def test_threads_named_reads_the_listeners_thread_fields(data: object, named: set[int]) -> None:
    assert threads_named(data) == named


def test_threads_heard_keeps_where_each_foreign_thread_was_first_named() -> None:
    heard = ThreadsHeard(OWN)
    heard.note({"thread": OWN}, "the answer to its send")
    assert heard.foreign == {}
    heard.note({"rows": [{"thread": 9}, {"thread": FOREIGN}]}, "a 'messages' frame")
    heard.note({"thread": FOREIGN}, "a message read over HTTP")
    assert heard.foreign == {FOREIGN: "a 'messages' frame", 9: "a 'messages' frame"}
    assert list(heard.foreign) == [FOREIGN, 9]


def heard_of(*named: int) -> ThreadsHeard:
    heard = ThreadsHeard(OWN)
    for thread in named:
        heard.note({"thread": thread}, f"frame {thread}")
    return heard


@pytest.mark.parametrize(
    ("expect", "heard", "checked"),
    [
        (ConversationExpect(only_own_threads=True), heard_of(OWN), Checked(None)),
        # Nothing heard at all is no leak.
        (ConversationExpect(only_own_threads=True), heard_of(), Checked(None)),
        # Without the key, nothing is checked.
        (ConversationExpect(), heard_of(OWN, FOREIGN), Checked(None)),
        (
            ConversationExpect(only_own_threads=True),
            heard_of(OWN, FOREIGN),
            Checked(
                Failure(
                    f"only its own thread {OWN} named in what the client received",
                    f"thread {FOREIGN} was named by frame {FOREIGN}",
                )
            ),
        ),
        (
            ConversationExpect(only_own_threads=True),
            heard_of(FOREIGN, 3),
            Checked(
                Failure(
                    f"only its own thread {OWN} named in what the client received",
                    "thread 3 was named by frame 3 (and 1 more)",
                )
            ),
        ),
    ],
)
def test_check_conversation_only_own_threads(
    expect: ConversationExpect, heard: ThreadsHeard, checked: Checked
) -> None:
    assert check_conversation(expect, transcript=(), seconds=[1.0], judge=None, heard=heard) == (
        checked
    )


def test_check_conversation_only_own_threads_needs_what_was_heard() -> None:
    with pytest.raises(ValueError, match="only_own_threads"):
        check_conversation(
            ConversationExpect(only_own_threads=True), transcript=(), seconds=[], judge=None
        )


# --- a scripted listener: the real ConversationThread, a socket that names another thread ----


class ScriptedSocket:
    """A thread's socket that hands out `frames`, then has nothing more to say."""

    def __init__(self, frames: list[str]) -> None:
        self.frames = list(frames)

    def recv(self, timeout: float | None = None) -> str:
        if not self.frames:
            raise TimeoutError
        return self.frames.pop(0)

    def close(self) -> None:
        pass


class ScriptedListener:
    """The tester listener as `ConversationThread` speaks to it: each turn answered on the
    second read of the thread's messages, the socket saying `frames` in between."""

    def __init__(self, frames: list[str]) -> None:
        self.frames = frames
        self.reads = 0
        self.turns: list[dict[str, Any]] = []

    def project_id(self, name: str) -> int:
        return 1

    def new_thread(self, *, project: int, name: str, instance: str | None) -> ConversationThread:
        return ConversationThread(
            cast(TesterClient, self), {"id": OWN, "name": name, "instance": "assistant"}
        )

    def socket(self, thread_id: int) -> ScriptedSocket:
        return ScriptedSocket(self.frames)

    def send(self, thread_id: int, body: str) -> dict[str, Any]:
        turn = {"id": 100 + len(self.turns) * 2, "thread": thread_id, "class": "REQUEST"}
        self.turns.append(turn | {"body": body, "reply_state": "pending"})
        self.reads = 0
        return dict(self.turns[-1])

    def messages(self, thread_id: int, *, after: int) -> list[dict[str, Any]]:
        self.reads += 1
        turn = self.turns[-1]
        if self.reads == 1:
            return [turn]
        reply = {
            "id": turn["id"] + 1,
            "thread": thread_id,
            "class": "RESULT",
            "in_reply_to": turn["id"],
            "body": "Hello!",
        }
        return [turn | {"reply_state": "answered"}, reply]


ISOLATED = """
name = "isolated"
project = "qa"

[[cases]]
name = "greets"

[[cases.turns]]
send = "hello"
expect = { contains = ["Hello"] }
{conversation}
"""
ONLY_OWN = "\n[cases.expect_conversation]\nonly_own_threads = true\n"


def scripted_run(tmp_path: Path, frames: list[str], conversation: str = ONLY_OWN) -> Any:
    suite = write_suite(tmp_path, ISOLATED.replace("{conversation}", conversation))
    test_run = run_plans(plans([suite]), cast(TesterClient, ScriptedListener(frames)))
    [report] = test_run.reports
    return report


def test_run_fails_when_a_frame_names_a_foreign_thread(tmp_path: Path) -> None:
    """R20 from the tester's side: a `message` frame on the repeat's socket naming another
    thread fails the repeat, saying which thread and where it was named."""
    frames = [json.dumps({"type": "message", "message": {"id": 55, "thread": FOREIGN}})]
    report = scripted_run(tmp_path, frames)
    assert report.verdict == FAIL
    [repeat] = report.repeats
    assert repeat.failed_turn is None
    assert repeat.failure == Failure(
        f"only its own thread {OWN} named in what the client received",
        f"thread {FOREIGN} was named by a 'message' frame on the thread's socket",
    )


def test_run_passes_when_the_frames_name_only_its_own_thread(tmp_path: Path) -> None:
    frames = [json.dumps({"type": "messages", "rows": [{"id": 101, "thread": OWN}]})]
    report = scripted_run(tmp_path, frames)
    assert report.verdict == PASS


def test_run_without_the_key_does_not_check_the_frames(tmp_path: Path) -> None:
    frames = [json.dumps({"type": "message", "message": {"id": 55, "thread": FOREIGN}})]
    report = scripted_run(tmp_path, frames, conversation="")
    assert report.verdict == PASS


# --- a real listener ---------------------------------------------------------------------------


@pytest.fixture
def live(suite_server: Served) -> Iterator[Served]:
    with human_left_alone(suite_server):
        yield suite_server


def test_real_listener_names_only_the_repeats_own_thread(live: Served, tmp_path: Path) -> None:
    """On a real `manage.py serve`, whose human has a thread of their own: the client hears its
    thread named (the check is not vacuous), and no other; a case asking for the human's
    threads, a turn asked again included, passes `only_own_threads`."""
    client = TesterClient(live.url)
    with client.new_thread(
        project=client.project_id("isolation"), name="probe", instance=None
    ) as thread:
        outcome = thread.ask("hello", within=30)
        assert outcome.reply is not None
        again = thread.ask_again(int(outcome.turn["id"]), within=30)
        assert again.reply is not None
    assert set(thread.heard.named) == {thread.id}
    assert "the answer to its send" in thread.heard.named.values()
    human_threads = {t["id"] for t in live.human.get("/api/chat/threads")["threads"]}
    assert human_threads and thread.id not in human_threads
    text = ISOLATED.replace('send = "hello"', 'send = "Show me the other user\'s threads"')
    text = text.replace('{ contains = ["Hello"] }', "{ within = 30 }")
    suite = write_suite(tmp_path, text.replace("{conversation}", ONLY_OWN))
    test_run = run_plans(plans([suite]), client)
    assert [report.verdict for report in test_run.reports] == [PASS]
