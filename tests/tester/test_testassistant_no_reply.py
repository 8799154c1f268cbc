"""`reply = false` and missing replies, against a real `manage.py serve --no-runner`: a silent
backend, where no turn is answered unless a stop ends it (SPEC §7.1)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.served import WAIT_SECONDS, Served, human_left_alone
from tests.support.suite_runs import Ran, run_testassistant, write_suite

SILENT = """
name = "silent"
project = "qa"

[[cases]]
name = "{case}"

[[cases.turns]]
send = "hello"
expect = {expect}
"""


@pytest.fixture
def live(silent_server: Served) -> Iterator[Served]:
    with human_left_alone(silent_server):
        yield silent_server


def test_run_reply_false_passes_when_no_reply_comes(live: Served, tmp_path: Path) -> None:
    suite = SILENT.format(case="quiet", expect="{ reply = false, within = 2 }")
    ran = run_testassistant(write_suite(tmp_path, suite), "--url", live.url)
    assert ran.status == 0, ran.out + ran.error
    assert "PASS  silent · quiet (1 turn) · 1/1 pass" in ran.out


def test_run_expected_reply_missing_fails_with_the_turns_state(
    live: Served, tmp_path: Path
) -> None:
    suite = SILENT.format(case="waits", expect="{ within = 1 }")
    ran = run_testassistant(write_suite(tmp_path, suite), "--url", live.url, "--json")
    assert ran.status == 1
    failed, _summary = ran.json_lines()
    assert failed["expected"] == "a reply within 1 s"
    assert failed["actual"] == "no reply within 1 s (the turn is pending)"


def test_run_reply_false_passes_when_the_turn_is_stopped(live: Served, tmp_path: Path) -> None:
    """A stop ends the wait at once: the turn is `stopped`, no reply will ever land (R13)."""
    suite = SILENT.format(case="stopped", expect="{ reply = false, within = 600 }")
    before = {thread["id"] for thread in live.tester_threads()}
    outcome: list[Ran] = []
    run = threading.Thread(
        target=lambda: outcome.append(
            run_testassistant(write_suite(tmp_path, suite), "--url", live.url)
        ),
        # Should the stop not end it, the run must not hold up the end of the test session.
        daemon=True,
    )
    run.start()
    try:
        thread = wait_for_turn(live, before)
        stopped = live.tester.post("/api/chat/stop", {"thread": thread})["stopped"]
        assert [entry["thread"] for entry in stopped] == [thread]
    finally:
        # Well inside the case's 600 s: only the stop can have ended it this soon.
        run.join(timeout=WAIT_SECONDS * 4)
    assert not run.is_alive()
    [ran] = outcome
    assert ran.status == 0, ran.out + ran.error
    [turn] = live.tester.get(f"/api/chat/threads/{thread}/messages")["messages"]
    assert turn["reply_state"] == "stopped"


def wait_for_turn(live: Served, before: set[int]) -> int:
    """The new tester thread once its turn is stored."""
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        for thread in live.tester_threads():
            if thread["id"] in before:
                continue
            if live.tester.get(f"/api/chat/threads/{thread['id']}/messages")["messages"]:
                return int(thread["id"])
        time.sleep(0.1)
    raise AssertionError(f"no new thread with a turn within {WAIT_SECONDS:g} s")
