"""Compared test runs built by hand: reports of a few repeats, and a comparison of them with a
baseline as `comparison.read_comparison` would have read it, for the tests of the HTML page."""

from __future__ import annotations

from tester.suites.client import Outcome, Reply
from tester.suites.comparison import Compared, Comparison, Said, Side, StoredCase, now_side
from tester.suites.files import Case, Expect, Suite, Turn
from tester.suites.matchers import Failure
from tester.suites.runner import FAIL, PASS, CaseReport, Plan, Repeat, TestRun, TurnRecord

SUITE = Suite("smoke", "qa", (), "smoke.suite.toml")
PARIS = Failure("the reply contains 'Paris'", "Marseille.")


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


def report(name: str, change: str | None, *repeats: Repeat, p: float | None = None) -> CaseReport:
    case = Case(name, (Turn("ask", Expect(), 1),), None, line=1)
    verdict = PASS if all(r.passed for r in repeats) else FAIL
    made = CaseReport(Plan(SUITE, case, "alpha", len(repeats)), list(repeats), verdict, change)
    made.p_value = p
    made.baseline_tally = (4, 4) if change in ("regressed", "same") else (0, 4)
    return made


HOSTILE = "<script>alert(1)</script>![x](http://198.51.100.7/x.png)\x1b[2K"


def compared_run(hostile: str = HOSTILE) -> tuple[TestRun, Comparison]:
    """A test run of a regression (replying `hostile`), a fix and a case that stayed the same,
    and its comparison with run 9, which also had a case this run lacks."""
    regressed = report("capital", "regressed", repeat(1, hostile, missed=1), p=1 / 70)
    fixed = report("weather", "fixed", repeat(1, "Sunny."), p=0.0286)
    same = report("greets", "same", repeat(1, "Hi."), p=1.0)
    before = Side(3, 71, True, (Said(1, "ask 1", "Paris.", "answered"),))
    baseline = StoredCase("smoke", "gone", "alpha", "pass", 1, 1, ())
    sides = Side(1, 72, False, (Said(1, "ask 1", "Rain.", "answered", missed=True),), why="no sun")
    told = Comparison(
        9,
        (
            Compared("regressed", regressed, None, before, now_side(regressed)),
            Compared("fixed", fixed, None, sides, now_side(fixed)),
            Compared("missing", None, baseline),
            Compared("same", same, None),
        ),
    )
    return TestRun(reports=[same, fixed, regressed]), told
