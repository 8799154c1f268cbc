"""The runner, expectations and reports over a stand-in listener (pure: no server)."""

from __future__ import annotations

import re
import threading
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from tester.suites import reports
from tester.suites.client import ListenerError, Outcome, Reply, TesterClient
from tester.suites.expectations import Failure, first_failure
from tester.suites.files import Expect, Suite, load_suite
from tester.suites.runner import ERROR, FAILED, PASSED, run_suites, selected

WAIT = 30.0


def outcome(body: str | None, state: str = "answered", failure: str | None = None) -> Outcome:
    reply = None if body is None else Reply(body=body, message={"body": body})
    return Outcome(turn={"id": 1}, reply=reply, state=state, failure=failure)


@pytest.mark.parametrize(
    ("expect", "came", "failure"),
    [
        (Expect(), outcome("hi"), None),
        (Expect(contains=("a", "b")), outcome("a b"), None),
        (Expect(contains=("a", "z")), outcome("a b"), Failure("the reply contains 'z'", "a b")),
        (
            Expect(not_contains=("b",)),
            outcome("a b"),
            Failure("the reply does not contain 'b'", "a b"),
        ),
        (Expect(matches=re.compile("^a")), outcome("a b"), None),
        (
            Expect(matches=re.compile("^b")),
            outcome("a b"),
            Failure("the reply matches '^b'", "a b"),
        ),
        (
            Expect(within=2),
            outcome(None, "pending"),
            Failure("a reply within 2 s", "no reply within 2 s (the turn is pending)"),
        ),
        (
            Expect(),
            outcome(None, "failed", "the model server refused the key"),
            Failure("a reply within 30 s", "the turn failed: the model server refused the key"),
        ),
        (
            Expect(),
            outcome(None, "stopped"),
            Failure("a reply within 30 s", "the turn was stopped"),
        ),
        (Expect(reply=False), outcome(None, "working"), None),
        (Expect(reply=False), outcome(None, "stopped"), None),
        (Expect(reply=False), outcome(None, "failed", "x"), None),
        (Expect(reply=False, within=5), outcome("hi"), Failure("no reply within 5 s", "hi")),
    ],
)
def test_first_failure_names_the_first_unmet_expectation(
    expect: Expect, came: Outcome, failure: Failure | None
) -> None:
    assert first_failure(expect, came) == failure


class StandInThread:
    def __init__(self, client: StandIn, name: str) -> None:
        self.client = client
        self.name = name
        self.id = len(client.threads) + 1

    def __enter__(self) -> StandInThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def ask(self, body: str, *, within: float) -> Outcome:
        self.client.sent.append((self.name, body))
        return self.client.answer(self.name, body)


class StandIn:
    """The listener as the runner sees it; `answer` says what each turn gets."""

    def __init__(self, answer: Callable[[str, str], Outcome]) -> None:
        self.answer = answer
        self.threads: list[str] = []
        self.sent: list[tuple[str, str]] = []
        self.projects: list[str] = []
        self.lock = threading.Lock()

    def project_id(self, name: str) -> int:
        self.projects.append(name)
        return 1

    def new_thread(self, *, project: int, name: str, instance: str | None) -> StandInThread:
        with self.lock:
            thread = StandInThread(self, name)
            self.threads.append(name)
        return thread


def suite(tmp_path: Path, cases: int, turns: int = 1) -> Suite:
    text = 'name = "s"\nproject = "p"\n' + "".join(
        f'[[cases]]\nname = "case {c}"\n'
        + "".join(f'[[cases.turns]]\nsend = "turn {t}"\n' for t in range(turns))
        for c in range(cases)
    )
    path = tmp_path / "s.suite.toml"
    path.write_text(text)
    return load_suite(path)


def run(client: StandIn, suites: list[Suite], **options: Any) -> Any:
    return run_suites(suites, cast(TesterClient, client), **options)


def test_run_suites_with_jobs_runs_cases_at_once(tmp_path: Path) -> None:
    """With --jobs 2, case 0's turn is answered only once case 1's turn was sent: they can pass
    only side by side."""
    second_sent = threading.Event()

    def answer(thread: str, body: str) -> Outcome:
        if thread.startswith("s · case 1"):
            second_sent.set()
        elif not second_sent.wait(WAIT):
            return outcome(None, "pending")
        return outcome("hi")

    client = StandIn(answer)
    done = run(client, [suite(tmp_path, 2)], jobs=2)
    assert [result.status for result in done.results] == [PASSED, PASSED]
    assert [result.case.name for result in done.results] == ["case 0", "case 1"]


def test_run_suites_sends_a_cases_turns_in_order_and_stops_at_its_first_failure(
    tmp_path: Path,
) -> None:
    client = StandIn(lambda thread, body: outcome(None if body == "turn 1" else "ok", "pending"))
    done = run(client, [suite(tmp_path, 1, turns=3)])
    [result] = done.results
    assert (result.status, result.turn, result.sent) == (FAILED, 2, "turn 1")
    assert [body for _, body in client.sent] == ["turn 0", "turn 1"]
    assert client.threads == ["s · case 0"]
    assert client.projects == ["p"]


def test_run_suites_halts_on_a_listener_refusal(tmp_path: Path) -> None:
    """A refusal is no verdict on the assistant: it ends the run, later cases are not run."""

    def answer(thread: str, body: str) -> Outcome:
        raise ListenerError("tester-off", "The tester is off for this business.")

    done = run(StandIn(answer), [suite(tmp_path, 3)])
    assert [result.status for result in done.results] == [ERROR]
    assert done.refusal is not None and done.refusal.code == "tester-off"
    assert (done.not_run, done.failed, done.passed) == (2, 0, 0)


def test_run_suites_refused_project_runs_nothing(tmp_path: Path) -> None:
    client = StandIn(lambda thread, body: outcome("hi"))

    def refuse(name: str) -> int:
        raise ListenerError("unreachable", "the tester listener did not answer")

    client.project_id = refuse  # type: ignore[method-assign]
    done = run(client, [suite(tmp_path, 2)])
    assert (done.results, done.not_run, client.sent) == ([], 2, [])


def test_selected_keeps_cases_whose_suite_and_name_contain_the_keyword(tmp_path: Path) -> None:
    suites = [suite(tmp_path, 12)]
    assert [case.name for _, case in selected(suites, "case 1")] == ["case 1", "case 10", "case 11"]
    assert len(selected(suites, "s · ")) == 12
    assert len(selected(suites, None)) == 12


def test_junit_counts_failures_and_errors_per_suite(tmp_path: Path) -> None:
    verdicts = {"turn 0": outcome("fine"), "turn 1": outcome(None, "stopped")}
    client = StandIn(lambda thread, body: verdicts[body])
    passed = run(client, [suite(tmp_path, 1)]).results
    failed = run(client, [suite(tmp_path, 1, turns=2)]).results

    def refuse(thread: str, body: str) -> Outcome:
        raise ListenerError("x", "y")

    refused = run(StandIn(refuse), [suite(tmp_path, 1)]).results
    root = reports.junit([*passed, *failed, *refused]).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    [testsuite] = root.findall("testsuite")
    kinds = [[child.tag for child in case] for case in testsuite.findall("testcase")]
    assert kinds == [[], ["failure"], ["error"]]
    error = testsuite.findall("testcase")[2].find("error")
    assert error is not None and (error.get("type"), error.get("message")) == ("x", "y")
    path = tmp_path / "out" / "junit.xml"
    reports.write_junit(failed, path)
    assert ElementTree.parse(path).getroot().get("failures") == "1"


def test_line_shortens_a_long_reply_to_one_line(tmp_path: Path) -> None:
    client = StandIn(lambda thread, body: outcome("word\n" * 100))
    [result] = run(client, [suite(tmp_path, 1)]).results
    assert reports.line(result) == "PASS  s · case 0 (1 turn)"
    long = Failure("the reply contains 'x'", "word\n" * 100)
    shown = reports.line(
        type(result)(result.suite, result.case, FAILED, 0.0, turn=1, sent="hi", failure=long)
    )
    assert shown.endswith("…”") and "\n" not in shown
    assert shown.startswith("FAIL  s · case 0: turn 1 “hi”: expected the reply contains 'x'; got")


def test_line_of_a_refused_case_names_the_refusal(tmp_path: Path) -> None:
    def refuse(thread: str, body: str) -> Outcome:
        raise ListenerError("tester-off", "The tester is off.")

    [result] = run(StandIn(refuse), [suite(tmp_path, 1)]).results
    assert reports.line(result) == "ERROR s · case 0: tester-off: The tester is off."
    assert reports.as_json(result)["error"] == "tester-off"
