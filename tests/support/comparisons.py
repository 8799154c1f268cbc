"""Compared test runs built by hand, for the tests of the `--html` comparison: reports of a few
repeats, the listener's answers shaped as it serves them (`/api/suite-runs/ID/comparison/OTHER`
and `…/cases/CASEID`), and a stand-in listener that answers them from a table, refuses what it
is told to and keeps what it was asked."""

from __future__ import annotations

from typing import Any

from tester.suites.client import ListenerError, Outcome, Reply
from tester.suites.comparison import Comparison, read_comparison
from tester.suites.expectation_keys import Expect
from tester.suites.files import Case, Suite, Turn
from tester.suites.matchers import Failure
from tester.suites.runner import FAIL, PASS, CaseReport, Plan, Repeat, TestRun, TurnRecord

SUITE = Suite("smoke", "qa", (), "smoke.suite.toml")
PARIS = Failure("the reply contains 'Paris'", "Marseille.")
HOSTILE = "<script>alert(1)</script>![x](http://198.51.100.7/x.png)\x1b[2K"


def turn(number: int, sent: str, reply: str | None, *, turn_id: int) -> TurnRecord:
    answer = None
    if reply is not None:
        answer = Reply(reply, {"id": turn_id + 1, "body": reply}, seconds=0.5)
    outcome = Outcome({"id": turn_id}, answer, "answered" if answer else "failed", None, 0.5)
    return TurnRecord(number, sent, outcome)


def repeat(number: int, *replies: str, missed: int | None = None) -> Repeat:
    turns = [
        turn(index, f"ask {index}", reply, turn_id=1000 * number + 2 * index)
        for index, reply in enumerate(replies, start=1)
    ]
    failure = PARIS if missed else None
    return Repeat(number, 500 + number, "alpha", turns, failure=failure, failed_turn=missed)


def report(
    name: str,
    change: str | None,
    *repeats: Repeat,
    p: float | None = None,
    case_id: int | None = None,
) -> CaseReport:
    """A case of this test run; `case_id`, its stored case (None: never stored)."""
    case = Case(name, (Turn("ask", Expect(), 1),), None, line=1)
    verdict = PASS if all(r.passed for r in repeats) else FAIL
    made = CaseReport(Plan(SUITE, case, "alpha", len(repeats)), list(repeats), verdict, change)
    made.p_value = p
    made.baseline_tally = (4, 4) if change in ("regressed", "same") else (0, 4)
    made.case_id = case_id
    return made


def result(passed: int, runs: int) -> dict[str, Any]:
    """One run's result of a compared case, as the listener serves it."""
    verdict = "pass" if passed == runs else "fail" if passed == 0 else "flaky"
    return {"id": 0, "verdict": verdict, "passed_runs": passed, "runs": runs}


def compared(
    case_id: int,
    name: str,
    change: str,
    *,
    now: tuple[int, int] | None,
    other: tuple[int, int] | None,
    p: float | None = None,
) -> dict[str, Any]:
    """A compared case as the listener serves it."""
    return {
        "id": case_id,
        "suite": "smoke",
        "case": name,
        "instance": "alpha",
        "change": change,
        "now": None if now is None else result(*now),
        "other": None if other is None else result(*other),
        "p_value": p,
    }


def said(
    sent: str | None, reply: str | None, *, state: str = "answered", passed: bool = True
) -> dict[str, Any]:
    """One run's side of a turn, as the listener serves it."""
    return {"sent": sent, "reply": reply, "state": state, "passed": passed}


def shown(
    number: int, thread: int | None, *, passed: bool | None, readable: bool = True
) -> dict[str, Any]:
    """The repeat the listener shows of one run's case."""
    return {"repeat": number, "thread": thread, "passed": passed, "readable": readable}


def replies(
    now: dict[str, Any] | None,
    other: dict[str, Any] | None,
    *turns: tuple[dict[str, Any] | None, dict[str, Any] | None],
    more: bool = False,
) -> dict[str, Any]:
    """A compared case's replies as the listener serves them: `turns` as (this run's side,
    the other run's), numbered from 1."""
    return {
        "case": {},
        "now": now,
        "other": other,
        "turns": [
            {"turn": number, "now": mine, "other": theirs}
            for number, (mine, theirs) in enumerate(turns, start=1)
        ],
        "more": more,
    }


class Listener:
    """`TesterClient`'s reads of a comparison answered from a table: `pages` of each part
    (`False`, every change but `same`; `True`, the `same` ones), each page's `more` saying
    whether another of its part follows, and `cases` (case id → the replies' answer, or the
    refusal to raise). What was asked is kept, in order."""

    def __init__(
        self,
        counts: dict[str, int],
        pages: dict[bool, list[list[dict[str, Any]]]],
        cases: dict[int, dict[str, Any] | ListenerError],
    ) -> None:
        self.counts = counts
        self.pages = pages
        self.cases = cases
        self.asked: list[str] = []

    def comparison_page(
        self, run_id: int, other_id: int, *, same: bool, after: int | None
    ) -> dict[str, Any]:
        self.asked.append(f"{run_id}/{other_id} same={same} after={after}")
        pages = self.pages.get(same, [[]])
        index = 0
        if after is not None:
            index = next(at for at, page in enumerate(pages) if page and page[-1]["id"] == after)
            index += 1
        page = pages[index] if index < len(pages) else []
        return {"counts": self.counts, "cases": page, "more": index + 1 < len(pages)}

    def compared_case(self, run_id: int, other_id: int, case_id: int) -> dict[str, Any]:
        self.asked.append(f"{run_id}/{other_id} case {case_id}")
        found = self.cases[case_id]
        if isinstance(found, ListenerError):
            raise found
        return found


def compared_run(hostile: str = HOSTILE) -> tuple[TestRun, Comparison]:
    """A test run of a regression (replying `hostile`), a fix and a case that stayed the same,
    and the listener's comparison of it (run 10) with run 9, which also had a case this run
    lacks, as the client reads it."""
    regressed = report("capital", "regressed", repeat(1, hostile, missed=1), p=1 / 70, case_id=102)
    fixed = report("weather", "fixed", repeat(1, "Sunny."), p=0.0286, case_id=101)
    same = report("greets", "same", repeat(1, "Hi."), p=1.0, case_id=100)
    listener = Listener(
        {"regressed": 1, "fixed": 1, "changed": 0, "new": 0, "missing": 1, "same": 1},
        {
            False: [
                [
                    compared(102, "capital", "regressed", now=(0, 1), other=(4, 4), p=1 / 70),
                    compared(101, "weather", "fixed", now=(1, 1), other=(0, 4), p=0.0286),
                    compared(7, "gone", "missing", now=None, other=(1, 1)),
                ]
            ],
            True: [[compared(100, "greets", "same", now=(1, 1), other=(1, 1), p=1.0)]],
        },
        {
            102: replies(
                shown(1, 501, passed=False),
                shown(3, 71, passed=True),
                (said("ask 1", hostile, passed=False), said("ask 1", "Paris.")),
            ),
            101: replies(
                shown(1, 501, passed=True),
                shown(1, 72, passed=False),
                (said("ask 1", "Sunny."), said("ask 1", "Rain.", passed=False)),
            ),
        },
    )
    told = read_comparison(listener, run_id=10, baseline=9)  # type: ignore[arg-type]
    return TestRun(reports=[same, fixed, regressed]), told
