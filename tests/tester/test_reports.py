"""How a test run is told: lines, the instance matrix, JSON records, the stored record, JUnit
and the HTML page, from reports built by hand (pure)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from dataclasses import replace
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from broker.suite_fields import (
    CASE_RECORD_MAX,
    FAILURE_KEYS,
    CaseCost,
    CaseRecord,
    clean_case,
    record_size,
)
from tester.suites import reports
from tester.suites.client import Outcome, Reply
from tester.suites.costs import Price
from tester.suites.expectation_keys import Expect
from tester.suites.files import Case, Suite, Turn
from tester.suites.html_report import page, write_html
from tester.suites.judge import Vote
from tester.suites.matchers import Failure
from tester.suites.runner import (
    COST_LIMIT,
    ERROR,
    FAIL,
    FLAKY,
    PASS,
    VERDICTS,
    CaseReport,
    Plan,
    Problem,
    Repeat,
    TestRun,
    TurnRecord,
)

GREETS = Case("greets", (Turn("hello", Expect(contains=("Ada",)), 8),), None, line=4)
ASKS = Case("asks", (Turn("who am I?", Expect(), 16),), None, line=12)
SUITE = Suite("smoke", "qa", (GREETS, ASKS), "suites/smoke.suite.toml")
USAGE = {"prompt_tokens": 11, "completion_tokens": 3}
MISSED = Failure("the reply contains 'Ada'", "Bye.")
REFUSED = Problem("tester-off", "The tester is off.")


def turn(
    body: str | None,
    *,
    sent: str = "hello",
    failure: Failure | None = None,
    votes: tuple[Vote, ...] = (),
) -> TurnRecord:
    reply = None
    if body is not None:
        message = {"id": 21, "body": body, "usage": USAGE, "model": "qwen", "finish_reason": "stop"}
        reply = Reply(body, message, seconds=1.25, first_token_seconds=0.5)
    outcome = Outcome({"id": 20}, reply, "answered" if reply else "pending", None, 1.25)
    return TurnRecord(1, sent, outcome, failure, votes)


def passed(number: int, thread: int, *, body: str = "Hi, Ada.", instance: str = "alpha") -> Repeat:
    return Repeat(number, thread, instance, [turn(body)], seconds=1.5)


def failed(
    number: int, thread: int, *, failure: Failure = MISSED, instance: str = "alpha"
) -> Repeat:
    return Repeat(
        number,
        thread,
        instance,
        [turn(failure.actual, failure=failure, votes=(Vote(False, "rude to the user"),))],
        failure=failure,
        failed_turn=1,
        seconds=1.5,
    )


def errored(number: int) -> Repeat:
    return Repeat(number, problem=REFUSED)


# What the runner keeps of a turn the judge could not grade: the turn, its reply, the votes.
UNJUDGED = Problem(
    "judge",
    'the judge m at http://judge/v1/chat/completions did not answer {"pass": true|false, '
    '"reason": "…"}: it said “Looks fine.” — the reply: “Paris.”',
)


def unjudged(number: int, thread: int) -> Repeat:
    return Repeat(
        number,
        thread,
        "alpha",
        [
            turn(
                "Paris.",
                sent="capital?",
                failure=Failure("a verdict", UNJUDGED.detail),
                votes=(Vote(None, "Looks fine."),),
            )
        ],
        failed_turn=1,
        problem=UNJUDGED,
        seconds=1.5,
    )


def report(
    repeats: list[Repeat],
    verdict: str,
    *,
    case: Case = GREETS,
    instance: str | None = "alpha",
    change: str | None = None,
) -> CaseReport:
    return CaseReport(Plan(SUITE, case, instance, len(repeats)), repeats, verdict, change)


def flaky() -> CaseReport:
    return report([passed(1, 10), failed(2, 11), passed(3, 12)], FLAKY, change="regressed")


CONVERSATION_MISS = Repeat(
    1,
    13,
    "alpha",
    [turn("Hi, Ada.")],
    failure=Failure("the judge passes the conversation (Polite.)", "the judge failed it: rude"),
    conversation_votes=(Vote(False, "rude"),),
)


# --- lines ------------------------------------------------------------------------------------

MISS_TOLD = "turn 1 “hello”: expected the reply contains 'Ada'; got “Bye.”"
TWO_OF_THREE = "95% interval 21–94%"


@pytest.mark.parametrize(
    ("made", "options", "told"),
    [
        (
            report([passed(1, 10)], PASS),
            {},
            "PASS  smoke · greets (1 turn) · 1/1 pass, 95% interval 21–100%",
        ),
        (
            report([passed(n, 10 + n) for n in (1, 2, 3)], PASS, change="fixed"),
            {"compared": True},
            "PASS  smoke · greets (1 turn) · 3/3 pass, 95% interval 44–100% · fixed",
        ),
        (
            report([passed(1, 10)], PASS),
            {"with_instance": True},
            "PASS  smoke · greets [alpha] (1 turn) · 1/1 pass, 95% interval 21–100%",
        ),
        (
            flaky(),
            {"compared": True},
            f"FLAKY smoke · greets: repeat 2, {MISS_TOLD} · 2/3 flaky, {TWO_OF_THREE} · regressed",
        ),
        # Not compared: the change is not told, whatever the report holds.
        (flaky(), {}, f"FLAKY smoke · greets: repeat 2, {MISS_TOLD} · 2/3 flaky, {TWO_OF_THREE}"),
        (
            report([failed(1, 10)], FAIL),
            {},
            f"FAIL  smoke · greets: {MISS_TOLD} · 0/1 fail, 95% interval 0–79%",
        ),
        (
            report([CONVERSATION_MISS], FAIL),
            {},
            "FAIL  smoke · greets: the conversation: expected the judge passes the conversation "
            "(Polite.); got “the judge failed it: rude” · 0/1 fail, 95% interval 0–79%",
        ),
        (
            report([errored(1)], ERROR),
            {},
            "ERROR smoke · greets: tester-off: The tester is off. · 0/1 error, 95% interval 0–79%",
        ),
        (
            report([passed(1, 10), errored(2)], ERROR),
            {},
            "ERROR smoke · greets: repeat 2: tester-off: The tester is off. · 1/2 error, "
            "95% interval 9–91%",
        ),
        # A judge that could not grade a turn: the turn, the judge's answer and the reply.
        (
            report([passed(1, 10), unjudged(2, 11)], ERROR),
            {},
            f"ERROR smoke · greets: repeat 2, turn 1 “capital?”: {UNJUDGED} · 1/2 error, "
            "95% interval 9–91%",
        ),
    ],
)
def test_line_tells_verdict_first_miss_and_k_of_n(
    made: CaseReport, options: dict[str, bool], told: str
) -> None:
    assert reports.line(made, **options) == told


def test_line_shortens_a_long_reply_to_one_line() -> None:
    told = reports.line(report([failed(1, 10, failure=Failure("x", "word\n" * 100))], FAIL))
    assert "\n" not in told and told.endswith("…” · 0/1 fail, 95% interval 0–79%")
    assert len(told) < 300


def test_not_run_line_names_the_instance_when_asked() -> None:
    plan = Plan(SUITE, ASKS, "beta", 1)
    assert reports.not_run_line(plan) == "SKIP  smoke · asks: not run"
    assert reports.not_run_line(plan, with_instance=True) == "SKIP  smoke · asks [beta]: not run"


def test_summary_counts_each_verdict_regressions_and_cases_not_run() -> None:
    test_run = TestRun(
        reports=[
            report([passed(1, 10)], PASS),
            flaky(),
            report([failed(1, 14)], FAIL, case=ASKS),
            report([errored(1)], ERROR, instance="beta"),
        ],
        not_run=[Plan(SUITE, ASKS, "beta", 1)],
    )
    assert reports.summary(test_run, 2.54, run_id=7, baseline=3) == (
        "1 pass, 1 flaky, 1 fail, 1 error; 1 regressed against run 3; 1 not run (run 7) in 2.5 s"
        "; tokens 55 in, 15 out · cost unknown (5 turns without a price)"
    )
    assert reports.summary(TestRun(), 0.0, run_id=None, baseline=None) == (
        "0 pass, 0 flaky, 0 fail, 0 error in 0.0 s"
    )
    assert reports.summary_record(test_run, run_id=7) == {
        "summary": {
            "run": 7,
            "pass": 1,
            "flaky": 1,
            "fail": 1,
            "error": 1,
            "regressed": 1,
            "not_run": 1,
            "notes": [],
            "cost": {
                "turns": 5,
                "prompt_tokens": 55,
                "completion_tokens": 15,
                "amount": None,
                "turns_without_usage": 0,
                "turns_without_price": 5,
            },
            "max_cost": None,
            "max_cost_reached": False,
        }
    }


# --- the instance matrix ----------------------------------------------------------------------


def test_instance_matrix_puts_cases_down_and_instances_across() -> None:
    made = [
        report([passed(1, 10)], PASS),
        report([failed(1, 11, instance="beta")], FAIL, instance="beta"),
        report([passed(1, 12), failed(2, 13), passed(3, 14)], FLAKY, case=ASKS),
    ]
    assert reports.instance_matrix(made) == [
        "                alpha      beta",
        "smoke · greets  pass 1/1   fail 0/1",
        "smoke · asks    flaky 2/3  —",
    ]


def test_instance_matrix_of_one_instance_is_empty() -> None:
    made = [report([passed(1, 10)], PASS), report([failed(1, 11)], FAIL, case=ASKS)]
    assert reports.instance_matrix(made) == []


def test_report_instance_is_the_threads_else_the_plans() -> None:
    """The default instance (no --instance) is told by the name the thread came back with."""
    assert report([passed(1, 10, instance="assistant")], PASS, instance=None).instance == (
        "assistant"
    )
    assert report([errored(1)], ERROR, instance="beta").instance == "beta"
    assert report([errored(1)], ERROR, instance=None).instance == ""


# --- JSON records -----------------------------------------------------------------------------

CASE_KEYS = {
    "suite",
    "case",
    "vars",
    "file",
    "instance",
    "verdict",
    "passed_repeats",
    "passed_runs",
    "repeat_count",
    "runs",
    "change",
    "pass_rate",
    "interval",
    "pass_hat_k",
    "p_value",
    "baseline_passed_repeats",
    "baseline_repeat_count",
    "definition_hash",
    "status",
    "thread",
    "threads",
    "turn",
    "sent",
    "regenerate",
    "expected",
    "actual",
    "error",
    "detail",
    "seconds",
    "cost",
    "repeats",
}
REPEAT_KEYS = {
    "repeat",
    "thread",
    "passed",
    "error",
    "detail",
    "failed_turn",
    "expected",
    "actual",
    "seconds",
    "turns",
    "judge",
}
TURN_KEYS = {
    "turn",
    "id",
    "state",
    "reply_id",
    "seconds",
    "first_token_seconds",
    "usage",
    "model",
    "finish_reason",
    "passed",
    "cost",
    "regenerate",
    "judge",
    "steps",
}


def test_as_json_tells_the_first_miss_and_every_repeat() -> None:
    record = reports.as_json(flaky())
    assert set(record) == CASE_KEYS
    assert {key: record[key] for key in CASE_KEYS - {"repeats", "cost"}} == {
        "suite": "smoke",
        "case": "greets",
        "vars": None,
        "file": "suites/smoke.suite.toml",
        "instance": "alpha",
        "verdict": FLAKY,
        "passed_repeats": 2,
        "passed_runs": 2,
        "repeat_count": 3,
        "runs": 3,
        "change": "regressed",
        "pass_rate": 2 / 3,
        "interval": [pytest.approx(0.2077, abs=1e-4), pytest.approx(0.9385, abs=1e-4)],
        "pass_hat_k": 0.0,
        # Not stored yet, so compared with nothing.
        "p_value": None,
        "baseline_passed_repeats": None,
        "baseline_repeat_count": None,
        "definition_hash": flaky().plan.definition_hash,
        # The legacy status: a flaky case passed.
        "status": "passed",
        "thread": 11,
        "threads": [10, 11, 12],
        "turn": 1,
        "sent": "hello",
        "regenerate": False,
        "expected": "the reply contains 'Ada'",
        "actual": "Bye.",
        "error": None,
        "detail": None,
        "seconds": 4.5,
    }
    first, second, _ = record["repeats"]
    assert set(first) == REPEAT_KEYS
    assert (first["passed"], second["passed"], second["failed_turn"]) == (True, False, 1)
    [told] = second["turns"]
    assert set(told) == TURN_KEYS | {"sent", "reply"}
    assert told == {
        "turn": 1,
        "id": 20,
        "state": "answered",
        "reply_id": 21,
        "seconds": 1.25,
        "first_token_seconds": 0.5,
        "usage": USAGE,
        "model": "qwen",
        "finish_reason": "stop",
        "passed": False,
        "cost": None,
        "regenerate": False,
        "judge": [{"pass": False, "reason": "rude to the user", "valid": True}],
        "steps": [],
        "sent": "hello",
        "reply": "Bye.",
    }
    json.loads(reports.json_line(flaky()))


@pytest.mark.parametrize(
    "made",
    [flaky(), report([errored(1)], ERROR), report([passed(1, 10), passed(2, 11)], PASS)],
    ids=["flaky", "error", "pass"],
)
def test_as_json_keeps_each_deprecated_key_beside_its_new_name_with_the_same_value(
    made: CaseReport,
) -> None:
    record = reports.as_json(made)
    assert (record["passed_repeats"], record["repeat_count"]) == (
        made.passed_repeats,
        made.repeat_count,
    )
    assert (record["passed_runs"], record["runs"]) == (
        record["passed_repeats"],
        record["repeat_count"],
    )
    assert record["repeat_count"] == len(record["repeats"])


@pytest.mark.parametrize(
    ("made", "expected"),
    [
        (
            report([errored(1)], ERROR),
            {
                "status": "error",
                "error": "tester-off",
                "detail": "The tester is off.",
                "thread": None,
            },
        ),
        (
            report([passed(1, 10), passed(2, 11)], PASS),
            {"status": "passed", "error": None, "turn": None, "expected": None, "thread": 10},
        ),
        (report([failed(1, 10)], FAIL), {"status": "failed", "turn": 1, "actual": "Bye."}),
    ],
)
def test_as_json_of_each_verdict(made: CaseReport, expected: dict[str, Any]) -> None:
    record = reports.as_json(made)
    assert {key: record[key] for key in expected} == expected


def test_as_json_of_a_turn_without_reply_records_nulls_and_its_wait() -> None:
    repeat = Repeat(1, 10, "alpha", [turn(None)], failure=MISSED, failed_turn=1)
    [told] = reports.as_json(report([repeat], FAIL))["repeats"][0]["turns"]
    assert {key: told[key] for key in ("state", "reply_id", "seconds", "usage", "reply")} == {
        "state": "pending",
        "reply_id": None,
        "seconds": 1.25,
        "usage": None,
        "reply": None,
    }


def clean_stored(stored: dict[str, Any]) -> CaseRecord:
    """What the broker keeps of a stored record."""
    return clean_case(**stored, verdicts=list(VERDICTS))


def test_stored_record_keeps_no_conversation_texts_and_clips_long_failures() -> None:
    long = Failure("the reply contains 'Ada' " + "e" * 3000, "a" * 5000)
    made = report(
        [passed(1, 10, body="Hi, Ada. PRIVATE-REPLY"), failed(2, 11, failure=long)], FLAKY
    )
    stored = reports.stored_record(made)
    assert set(stored) == {
        "suite",
        "case",
        "instance",
        "verdict",
        "passed_runs",
        "runs",
        "threads",
        "failures",
        "attempts",
        "pass_rate",
        "interval",
        "pass_hat_k",
        "definition_hash",
        "cost",
    }
    # The threads hold the conversation; the history names them.
    assert "PRIVATE-REPLY" not in json.dumps(stored)
    assert all(set(told) == TURN_KEYS for repeat in stored["attempts"] for told in repeat["turns"])
    [failure] = stored["failures"]
    assert set(failure) == set(FAILURE_KEYS)
    assert (failure["repeat"], failure["turn"], failure["sent"]) == (2, 1, "hello")
    assert (len(failure["expected"]), len(failure["actual"])) == (2000, 2000)
    assert failure["actual"] == "a" * 1999 + "…"
    # The failure is told once, in `failures`.
    assert not {"expected", "actual"} & set(stored["attempts"][1])
    # What the broker would store is what was sent.
    cleaned = clean_stored(stored)
    assert (cleaned.failures, cleaned.attempts) == (stored["failures"], stored["attempts"])


def test_stored_record_of_an_error_says_what_came_instead_of_a_verdict() -> None:
    stored = reports.stored_record(report([passed(1, 10), errored(2)], ERROR))
    assert stored["failures"] == [
        {
            "repeat": 2,
            "turn": None,
            "sent": None,
            "expected": "a verdict",
            "actual": "tester-off: The tester is off.",
        }
    ]
    assert (stored["attempts"][1]["error"], stored["threads"]) == ("tester-off", [10])


def test_every_report_of_a_judge_error_keeps_the_turn_and_its_reply(tmp_path: Path) -> None:
    """The judged turn is in the --json record with its reply and the judge's invalid vote,
    in the stored record (its ids, the vote, the failure naming the turn), in JUnit's error
    and on the HTML page."""
    made = report([unjudged(1, 10)], ERROR)
    record = reports.as_json(made)
    assert (record["turn"], record["sent"], record["error"]) == (1, "capital?", "judge")
    assert record["detail"] == UNJUDGED.detail
    [told] = record["repeats"][0]["turns"]
    assert (told["sent"], told["reply"], told["reply_id"]) == ("capital?", "Paris.", 21)
    assert told["judge"] == [{"pass": None, "reason": "Looks fine.", "valid": False}]
    assert told["passed"] is False
    stored = reports.stored_record(made)
    assert stored["failures"] == [
        {
            "repeat": 1,
            "turn": 1,
            "sent": "capital?",
            "expected": "a verdict",
            "actual": str(UNJUDGED),
        }
    ]
    [kept] = stored["attempts"][0]["turns"]
    assert (kept["reply_id"], kept["judge"]) == (21, told["judge"])
    clean_stored(stored)
    testcase = next(junit_root(TestRun(reports=[made]), [made.plan]).iter("testcase"))
    error = testcase.find("error")
    assert error is not None and "the reply: “Paris.”" in (error.text or "")
    text = page(TestRun(reports=[made]), [made.plan], run_id=None, baseline=None)
    assert '<div class="said assistant">Paris.</div>' in text
    assert "judge: invalid — Looks fine." in text
    # The judge's error under the turn, beside its reply (and once at the case's head).
    assert text.count(escape(UNJUDGED.detail)) == 2


@pytest.mark.parametrize(
    "repeats",
    [
        # `repeat = 100` on a case whose every reply is long and wrong.
        [
            failed(n, n, failure=Failure("the reply contains 'Ada'", "a" * 5000))
            for n in range(1, 101)
        ],
        # `repeat = 100` on a case of ten turns that all pass.
        [Repeat(n, n, "alpha", [turn("Hi, Ada.")] * 10, seconds=1.5) for n in range(1, 101)],
    ],
    ids=["100-long-failures", "100-repeats-of-10-turns"],
)
def test_stored_record_of_a_case_a_file_may_write_is_one_the_broker_stores(
    repeats: list[Repeat],
) -> None:
    """A record the broker refuses ends the whole test run refused (exit 2): every case a valid
    suite file can write must fit the stored history's limits."""
    verdict = PASS if all(r.passed for r in repeats) else FAIL
    stored = reports.stored_record(report(repeats, verdict))
    clean_stored(stored)


# Astral characters are written `\\ud83d\\ude00` in ASCII JSON: twelve characters each.
WIDE = "😀"


def hostile_repeat(number: int) -> Repeat:
    """A repeat of ten turns that each sent a long text, got a long reply and fifteen long
    votes, failing at the last turn with a long rubric and reply, its conversation graded by
    fifteen long votes too."""
    votes = tuple(Vote(False, WIDE * 5_000) for _ in range(15))
    turns = [turn(WIDE * 120_000, sent=WIDE * 5_000, votes=votes) for _ in range(10)]
    failure = Failure(WIDE * 5_000, WIDE * 120_000)
    turns[-1] = replace(turns[-1], failure=failure)
    return Repeat(
        number, number, "alpha", turns, failure, 10, conversation_votes=votes, seconds=1.5
    )


def errored_at_length(number: int) -> Repeat:
    """A repeat the judge could not grade, its error long: a hostile judge's answer."""
    return Repeat(number, number, "alpha", problem=Problem(WIDE * 200, WIDE * 50_000))


@pytest.mark.parametrize(
    "repeats",
    [
        [hostile_repeat(n) for n in range(1, 101)],
        [errored_at_length(n) for n in range(1, 101)],
        [hostile_repeat(n) if n % 2 else errored_at_length(n) for n in range(1, 101)],
    ],
    ids=["100-long-failures", "100-long-errors", "both"],
)
def test_stored_record_fits_the_listeners_bound_however_long_its_texts(
    repeats: list[Repeat],
) -> None:
    """The client never sends a record the listener refuses: whatever the replies, votes and
    errors, failures and repeats stay within STORED_RECORD, the broker's own CASE_RECORD_MAX,
    by the broker's own measure, and the whole request within the default request limit; each
    repeat still names its thread and verdict, each failure its repeat and turn."""
    verdict = ERROR if any(r.problem for r in repeats) else FAIL
    stored = reports.stored_record(report(repeats, verdict))
    size = reports.record_size(stored["failures"], stored["attempts"])
    assert size == record_size(stored["failures"], stored["attempts"])
    assert size <= reports.STORED_RECORD == CASE_RECORD_MAX
    assert len(json.dumps(stored).encode()) < 256 * 1024
    clean_stored(stored)
    assert [(r["repeat"], r["thread"], r["passed"]) for r in stored["attempts"]] == [
        (n, n, False) for n in range(1, 101)
    ]
    assert [f["repeat"] for f in stored["failures"]] == list(range(1, 101))


def test_stored_record_keeps_the_cases_cost_whole_when_its_turns_do_not_fit() -> None:
    """The record's `cost` is the case's, as --json tells it, outside the bound: a case too big
    for the record loses its repeats' turns, and its cost still counts every turn."""
    stored = reports.stored_record(report([hostile_repeat(n) for n in range(1, 101)], FAIL))
    assert all(repeat["turns"] == [] for repeat in stored["attempts"])
    assert stored["cost"] == {
        "turns": 1000,
        "prompt_tokens": 11_000,
        "completion_tokens": 3_000,
        "amount": None,
        "turns_without_usage": 0,
        "turns_without_price": 1000,
    }
    assert clean_stored(stored).cost == CaseCost(
        turns=1000,
        prompt_tokens=11_000,
        completion_tokens=3_000,
        amount=None,
        turns_without_usage=0,
        turns_without_price=1000,
    )


@pytest.mark.parametrize(
    "text", ["plain", "é and 中", WIDE, "\x1b[2K\r\u202e", '"\\/\n\t'], ids=repr
)
def test_record_size_is_the_brokers_measure(text: str) -> None:
    failures = [{"repeat": 1, "turn": 1, "sent": text, "expected": text, "actual": text}]
    repeats = [{"detail": text, "seconds": 1.25, "turns": [{"judge": [{"reason": text}]}]}]
    assert reports.record_size(failures, repeats) == record_size(failures, repeats)


# --- JUnit ------------------------------------------------------------------------------------


def junit_root(test_run: TestRun, every: list[Plan]) -> ElementTree.Element:
    root = reports.junit(test_run, every).getroot()
    assert root is not None
    return root


def properties(testcase: Any) -> dict[str, str]:
    return {p.get("name"): p.get("value") for p in testcase.iter("property")}


def test_junit_gives_properties_and_skips_a_case_not_run(tmp_path: Path) -> None:
    ran = Plan(SUITE, GREETS, "alpha", 3)
    skipped = Plan(SUITE, ASKS, "alpha", 1)
    test_run = TestRun(reports=[flaky()], not_run=[skipped])
    root = junit_root(test_run, [ran, skipped])
    assert {key: root.get(key) for key in ("tests", "failures", "errors", "skipped")} == {
        "tests": "2",
        "failures": "0",
        "errors": "0",
        "skipped": "1",
    }
    [testsuite] = root.findall("testsuite")
    greets, asks = testsuite.findall("testcase")
    assert (greets.get("name"), greets.get("line"), greets.get("time")) == ("greets", "4", "4.500")
    assert properties(greets) == {
        "verdict": "flaky",
        "passed_repeats": "2",
        "passed_runs": "2",
        "repeat_count": "3",
        "runs": "3",
        "change": "regressed",
        "instance": "alpha",
        "threads": "10 11 12",
        # 2 of 3: the interval 20.8–93.9%, and pass^3 0 (not every repeat passed).
        "pass_rate": "0.6666666666666666",
        "interval_low": "0.20765960080204765",
        "interval_high": "0.9385080552796037",
        "pass_hat_k": "0.0",
        "prompt_tokens": "33",
        "completion_tokens": "9",
        "cost": "unknown",
        "turns_without_usage": "0",
        "turns_without_price": "3",
    }
    # A flaky case met its pass rate: no failure element.
    assert [child.tag for child in greets] == ["properties"]
    assert [(child.tag, child.get("message")) for child in asks] == [("skipped", "not run")]
    assert (asks.get("name"), asks.get("line"), asks.get("time")) == ("asks", "12", "0.000")
    path = tmp_path / "out" / "junit.xml"
    reports.write_junit(test_run, [ran, skipped], path)
    assert path.read_text(encoding="utf-8").startswith("<?xml")


def test_junit_statistics_are_the_records_numbers_read_back_exactly(tmp_path: Path) -> None:
    """Each testcase's `pass_rate`, `interval_low`, `interval_high` and `pass_hat_k`, and when
    compared its `p_value` and the baseline's `k/N`, read from the written file, are the
    numbers of its --json record to the last digit (a p-value far below 0.01 included); a case
    not compared has no p-value or baseline, and pass^k that cannot be estimated is
    `unknown`."""
    regressed = report(
        [passed(n, 10 + n) if n <= 2 else failed(n, 10 + n) for n in range(1, 13)], FAIL
    )
    regressed.change, regressed.p_value, regressed.baseline_tally = "regressed", 3.6e-07, (12, 12)
    alone = CaseReport(Plan(SUITE, ASKS, "alpha", 5), [passed(1, 30), passed(2, 31)], PASS)
    test_run = TestRun(reports=[regressed, alone])
    path = tmp_path / "junit.xml"
    reports.write_junit(test_run, [regressed.plan, alone.plan], path)
    first, second = ElementTree.parse(path).getroot().iter("testcase")

    told, record = properties(first), reports.as_json(regressed)
    assert float(told["pass_rate"]) == record["pass_rate"] == 2 / 12
    assert [float(told["interval_low"]), float(told["interval_high"])] == record["interval"]
    assert float(told["pass_hat_k"]) == record["pass_hat_k"] == 0.0
    assert float(told["p_value"]) == record["p_value"] == 3.6e-07
    assert (
        (int(told["baseline_passed_repeats"]), int(told["baseline_repeat_count"]))
        == (
            record["baseline_passed_repeats"],
            record["baseline_repeat_count"],
        )
        == (12, 12)
    )
    assert told["change"] == "regressed"

    told, record = properties(second), reports.as_json(alone)
    assert (float(told["pass_rate"]), record["pass_rate"]) == (1.0, 1.0)
    assert [float(told["interval_low"]), float(told["interval_high"])] == record["interval"]
    # Two repeats of five planned: no pass^5.
    assert (told["pass_hat_k"], record["pass_hat_k"]) == ("unknown", None)
    assert not {"p_value", "baseline_passed_repeats", "baseline_repeat_count"} & set(told)


def test_junit_counts_failures_and_errors_and_names_instances() -> None:
    failing = report([failed(1, 10)], FAIL)
    refused = report([errored(1)], ERROR, instance="beta")
    every = [failing.plan, refused.plan]
    root = junit_root(TestRun(reports=[failing, refused]), every)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "1")
    first, second = root.iter("testcase")
    assert (first.get("name"), second.get("name")) == ("greets [alpha]", "greets [beta]")
    failure = first.find("failure")
    assert failure is not None and failure.get("message") == MISS_TOLD
    assert failure.text == (
        "repeat 1, turn 1: sent hello\nexpected: the reply contains 'Ada'\nactual: Bye."
    )
    error = second.find("error")
    assert error is not None
    assert (error.get("type"), error.get("message")) == ("tester-off", "The tester is off.")


# Every character XML 1.0 forbids, a terminal's escape sequences and a bidirectional override.
CONTROLS = "".join(chr(code) for code in [*range(0x20), 0x7F, 0x9B, 0xFFFE, 0xFFFF]) + "\u202e"


def test_junit_of_a_reply_full_of_control_characters_is_well_formed_xml(tmp_path: Path) -> None:
    """Control characters in a reply, a judge's reason, a case's name and a refusal are written
    as escapes in every text and attribute, so the file parses; the rest of the text stays."""
    hostile = Failure(f"the reply contains 'Ada{CONTROLS}'", f"Bye.{CONTROLS}")
    case = replace(GREETS, name=f"greets{CONTROLS}")
    failing = report([failed(1, 10, failure=hostile)], FAIL, case=case)
    refused = report([Repeat(1, problem=Problem("judge", f"said {CONTROLS}"))], ERROR, case=ASKS)
    path = tmp_path / "junit.xml"
    reports.write_junit(TestRun(reports=[failing, refused]), [failing.plan, refused.plan], path)
    root = ElementTree.parse(path).getroot()
    first, second = root.iter("testcase")
    written = "\\x00\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\t\n\\x0b\\x0c\\x0d"
    assert first.get("name", "").startswith(f"greets{written}\\x0e")
    failure = first.find("failure")
    assert failure is not None and failure.text is not None
    assert "actual: Bye.\\x00" in failure.text
    assert "\\x1b\\x1c" in failure.text and "\\x7f\\x9b\\ufffe\\uffff\\u202e" in failure.text
    assert "\\x1b" in failure.get("message", "")
    error = second.find("error")
    assert error is not None and error.get("message", "").startswith("said \\x00")


def test_a_regenerated_turn_is_told_as_regenerate_in_every_report() -> None:
    """R24: a turn asked again shows as `regenerate` where a turn shows what it sent; its
    records keep `sent` (the text asked again) and add `regenerate`."""
    again = replace(turn("Bye.", failure=MISSED), number=2, regenerated=True)
    missed = Repeat(1, 10, "alpha", [turn("Hi, Ada."), again], failure=MISSED, failed_turn=2)
    made = report([missed], FAIL)
    told = "turn 2 regenerate “hello”: expected the reply contains 'Ada'; got “Bye.”"
    assert reports.line(made) == f"FAIL  smoke · greets: {told} · 0/1 fail, 95% interval 0–79%"
    record = reports.as_json(made)
    assert (record["turn"], record["sent"], record["regenerate"]) == (2, "hello", True)
    assert [(t["sent"], t["regenerate"]) for t in record["repeats"][0]["turns"]] == [
        ("hello", False),
        ("hello", True),
    ]
    stored = reports.stored_record(made)
    assert [t["regenerate"] for t in stored["attempts"][0]["turns"]] == [False, True]
    assert clean_stored(stored).failures == stored["failures"]
    [testcase] = junit_root(TestRun(reports=[made]), [made.plan]).iter("testcase")
    failure = testcase.find("failure")
    assert failure is not None and failure.get("message") == told
    assert failure.text is not None and failure.text.startswith(
        "repeat 1, turn 2: regenerate hello"
    )
    shown = page(TestRun(reports=[made]), [made.plan], run_id=None, baseline=None)
    assert shown.count('<span class="again">regenerate</span> hello') == 1


def test_junit_error_case_after_a_failed_repeat_has_its_error_element() -> None:
    """Repeat 1 failed, repeat 2 had no verdict (the judge or the listener): the case is an
    error, counted as one, and its testcase says so."""
    mixed = report([failed(1, 10), errored(2)], ERROR)
    root = junit_root(TestRun(reports=[mixed]), [mixed.plan])
    [testcase] = root.iter("testcase")
    assert root.get("errors") == "1"
    assert [child.tag for child in testcase] == ["properties", "error"]


def test_as_json_error_case_after_a_failed_repeat_names_the_error() -> None:
    record = reports.as_json(report([failed(1, 10), errored(2)], ERROR))
    assert (record["verdict"], record["error"], record["detail"]) == (
        ERROR,
        "tester-off",
        "The tester is off.",
    )


# --- the HTML page ----------------------------------------------------------------------------

HOSTILE = "<script>alert('x')</script><img src=http://evil.example/x.png>"
CONSOLE = "http://127.0.0.1:7333/"
# Attributes that make a browser fetch or follow something.
FETCHING = {"src", "href", "srcset", "action", "formaction", "poster", "data", "background"}


class Parsed(HTMLParser):
    """Every tag, every reference an attribute makes, and every attribute value."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.references: list[str] = []
        self.values: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            self.values.append(value or "")
            if name in FETCHING or "url(" in (value or ""):
                self.references.append(value or "")


def html_run() -> TestRun:
    hostile = Repeat(
        1,
        20,
        "alpha",
        [turn(HOSTILE, sent="say <b>hi</b>", votes=(Vote(True, "fine <i>really</i>"),))],
        conversation_votes=(Vote(True, "polite throughout"),),
    )
    return TestRun(
        reports=[flaky(), report([hostile], PASS, case=ASKS)],
        not_run=[Plan(SUITE, ASKS, "beta", 1)],
    )


def html_page(console_url: str | None) -> str:
    test_run = html_run()
    every = [r.plan for r in test_run.reports] + test_run.not_run
    return page(test_run, every, run_id=7, baseline=3, console_url=console_url)


def test_html_page_shows_a_reply_as_text_never_as_markup() -> None:
    text = html_page(None)
    parsed = Parsed(text)
    assert not {"script", "img", "link", "iframe", "object", "embed"} & set(parsed.tags)
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "say &lt;b&gt;hi&lt;/b&gt;" in text
    assert "fine &lt;i&gt;really&lt;/i&gt;" in text


@pytest.mark.parametrize(
    ("console_url", "links"),
    [
        (None, []),
        (CONSOLE, [f"http://127.0.0.1:7333/#thread={n}" for n in (10, 11, 12, 20)]),
    ],
)
def test_html_page_fetches_nothing_and_links_only_threads(
    console_url: str | None, links: list[str]
) -> None:
    text = html_page(console_url)
    parsed = Parsed(text)
    assert parsed.references == links
    assert [v for v in parsed.values if ("http" in v or "//" in v) and v not in links] == []
    assert "url(" not in text and "@import" not in text


def test_html_page_shows_k_of_n_changes_and_reasons() -> None:
    text = html_page(None)
    assert "<td>2/3</td>" in text and "<td>67% (21–94%)</td><td>pass^3 0.00</td>" in text
    assert "2/3 passed, 95% interval 21–94%, pass^3 0.00 · regressed" in text
    assert "1 pass, 1 flaky, 0 fail, 0 error; 1 regressed against run 3" in text
    assert "judge: fail — rude to the user" in text
    assert "judge of the conversation: pass — polite throughout" in text
    assert "tokens 11 in, 3 out · model qwen · finish stop" in text
    assert '<h2>smoke · asks</h2><p class="muted">not run</p>' in text


def test_write_html_writes_the_page(tmp_path: Path) -> None:
    test_run = html_run()
    path = tmp_path / "out" / "run.html"
    write_html(test_run, [r.plan for r in test_run.reports], path, run_id=7, baseline=None)
    assert path.read_text(encoding="utf-8").startswith("<!doctype html>")


# --- statistics and comparisons ---------------------------------------------------------------


def compared(change: str, p_value: float | None, baseline: tuple[int, int] | None) -> CaseReport:
    """0/4 now, told as the listener compared it."""
    made = report([failed(n, 10 + n) for n in range(1, 5)], FAIL, change=change)
    made.p_value, made.baseline_tally = p_value, baseline
    return made


@pytest.mark.parametrize(
    ("made", "told"),
    [
        (compared("regressed", 1 / 70, (4, 4)), "regressed (p = 0.014 against 4/4)"),
        (compared("same", 0.2, (2, 4)), "same, within noise (p = 0.2 against 2/4)"),
        (compared("same", 1.0, (0, 4)), "same"),
        (compared("new", None, None), "new"),
        (
            compared("changed", None, (4, 4)),
            "changed: its definition is not the baseline's, so it is not compared",
        ),
    ],
    ids=["regressed", "within noise", "same", "new", "changed"],
)
def test_change_text_tells_the_p_value_and_a_move_within_noise(made: CaseReport, told: str) -> None:
    assert reports.change_text(made) == told
    assert reports.line(made, compared=True).endswith(f"95% interval 0–49% · {told}")


def test_too_few_repeats_note_names_the_repeat_that_could_show_a_drop() -> None:
    """Said once for the test run: three repeats at 0.05 cannot regress; four can."""
    planned = [Plan(SUITE, GREETS, None, 3), Plan(SUITE, ASKS, None, 3)]
    assert reports.too_few_repeats_note(planned, 0.05) == (
        "note: with repeat = 3, no drop can be significant at alpha 0.05 (even 3/3 → 0/3 has "
        "p = 0.05), so 2 cases cannot regress; repeat = 4 could show one"
    )
    assert reports.too_few_repeats_note([Plan(SUITE, GREETS, None, 4)], 0.05) is None
    assert reports.too_few_repeats_note(planned, 0.1) is None


def test_coverage_note_says_how_many_cases_were_compared() -> None:
    test_run = TestRun(
        reports=[
            compared("same", 1.0, (0, 4)),
            compared("new", None, None),
            compared("new", None, None),
            compared("changed", None, (4, 4)),
        ]
    )
    assert reports.coverage_note(test_run, 12) == (
        "compared with run 12 on 1 of 4 cases; 2 not in run 12; 1 changed since run 12"
    )
    assert reports.coverage_note(test_run, None) is None
    assert reports.coverage_note(TestRun(reports=[compared("same", 1.0, (0, 4))]), 12) is None


# --- tokens and cost ---------------------------------------------------------------------------

QWEN = Price(input=2.5, output=10.0)
PRICED = replace(SUITE, pricing={"qwen": QWEN})
# USAGE at qwen's prices: (11 × 2.5 + 3 × 10) / 1,000,000.
COST = 0.0000575
SPENT = "tokens 11 in, 3 out · cost $0.0000575 (1 turn without usage)"


def priced_report(*, verdict: str = PASS, cut: bool = False) -> CaseReport:
    """Repeat 1 priced; repeat 2 got no reply (no usage); with `cut`, a third cut short by
    --max-cost."""
    repeats = [
        Repeat(1, 10, "alpha", [replace(turn("Hi, Ada."), price=QWEN)], seconds=1.5),
        Repeat(2, 11, "alpha", [turn(None)], seconds=1.5),
    ]
    if cut:
        repeats.append(Repeat(3, problem=Problem(COST_LIMIT, "the test run reached --max-cost")))
    return CaseReport(Plan(PRICED, GREETS, "alpha", len(repeats)), repeats, verdict)


def test_line_and_summary_tell_tokens_and_cost_with_the_turns_not_counted() -> None:
    made = priced_report()
    assert reports.line(made) == (
        f"PASS  smoke · greets (1 turn) · 2/2 pass, 95% interval 34–100% · {SPENT}"
    )
    test_run = TestRun(reports=[made])
    assert reports.summary(test_run, 1.0, run_id=7, baseline=None) == (
        f"1 pass, 0 flaky, 0 fail, 0 error (run 7) in 1.0 s; {SPENT}"
    )
    assert reports.stop_line(test_run) is None


def test_line_of_a_suite_without_pricing_leaves_cost_to_the_summary() -> None:
    """Without [pricing] every cost is unknown: the summary says so once, not every line; a
    turn priced at its instance's price is told."""
    made = report([passed(1, 10)], PASS)
    assert reports.line(made) == "PASS  smoke · greets (1 turn) · 1/1 pass, 95% interval 21–100%"
    priced = report([Repeat(1, 10, "alpha", [replace(turn("Hi, Ada."), price=QWEN)])], PASS)
    assert reports.line(priced) == (
        "PASS  smoke · greets (1 turn) · 1/1 pass, 95% interval 21–100% · tokens 11 in, 3 out · "
        "cost $0.0000575"
    )
    assert reports.summary(TestRun(reports=[made]), 1.0, run_id=None, baseline=None) == (
        "1 pass, 0 flaky, 0 fail, 0 error in 1.0 s; tokens 11 in, 3 out · cost unknown "
        "(1 turn without a price)"
    )


def stopped_run() -> TestRun:
    made = priced_report(verdict=ERROR, cut=True)
    return TestRun(
        reports=[made],
        not_run=[Plan(PRICED, ASKS, "alpha", 1)],
        max_cost=0.00005,
        max_cost_reached=True,
    )


def test_a_run_stopped_by_max_cost_says_so_in_every_report(tmp_path: Path) -> None:
    test_run = stopped_run()
    told = (
        "the test run reached --max-cost $0.00005 ($0.0000575 counted) and sent no turn after "
        "it: 1 repeat cut short, 1 case not run"
    )
    assert reports.stop_line(test_run) == f"STOP  {told}"
    summary = reports.summary_record(test_run, run_id=7)["summary"]
    assert (summary["max_cost"], summary["max_cost_reached"], summary["not_run"]) == (
        0.00005,
        True,
        1,
    )
    every = [test_run.reports[0].plan, *test_run.not_run]
    assert f'<p class="miss">{told}</p>' in page(test_run, every, run_id=7, baseline=None)


def test_json_records_tell_each_turns_cost_and_the_cases_and_runs_sums() -> None:
    made = priced_report()
    record = reports.as_json(made)
    spent = {
        "turns": 2,
        "prompt_tokens": 11,
        "completion_tokens": 3,
        "amount": COST,
        "turns_without_usage": 1,
        "turns_without_price": 0,
    }
    assert record["cost"] == spent
    assert [r["turns"][0]["cost"] for r in record["repeats"]] == [COST, None]
    assert reports.summary_record(TestRun(reports=[made]), run_id=7)["summary"]["cost"] == spent
    # The stored history keeps each turn's cost beside its usage, where the broker takes it.
    stored = reports.stored_record(made)
    assert [r["turns"][0]["cost"] for r in stored["attempts"]] == [COST, None]
    clean_stored(stored)


def test_junit_gives_tokens_and_cost_per_case_and_per_suite() -> None:
    made = priced_report()
    other = replace(SUITE, name="other", file="suites/other.suite.toml")
    unpriced = CaseReport(Plan(other, ASKS, "alpha", 1), [passed(1, 12)], PASS)
    root = junit_root(TestRun(reports=[made, unpriced]), [made.plan, unpriced.plan])
    testsuites = root.findall("testsuite")
    assert [t.get("name") for t in testsuites] == ["smoke", "other"]
    greets, asks = root.iter("testcase")
    spent = {
        "prompt_tokens": "11",
        "completion_tokens": "3",
        "cost": "0.0000575",
        "turns_without_usage": "1",
        "turns_without_price": "0",
    }
    assert properties(greets).items() >= spent.items()
    assert properties(asks).items() >= {"cost": "unknown", "turns_without_price": "1"}.items()
    # Each testsuite's own properties, its first element, sum its cases.
    first = testsuites[0][0]
    assert first.tag == "properties"
    assert {p.get("name"): p.get("value") for p in first} == spent


def test_html_page_tells_each_turns_cost_and_the_cases_and_runs_sums() -> None:
    made = priced_report()
    unpriced = report([passed(1, 12)], PASS, case=ASKS)
    test_run = TestRun(reports=[made, unpriced])
    text = page(test_run, [made.plan, unpriced.plan], run_id=7, baseline=None)
    assert "tokens 11 in, 3 out · model qwen · finish stop · cost $0.0000575" in text
    assert "cost unknown: no price for model &#x27;qwen&#x27; in the suite file&#x27;s" in text
    assert f"<td>{SPENT}</td>" in text
    assert f"instance alpha · 3.0 s · {SPENT}</p>" in text
    assert (
        "; tokens 22 in, 6 out · cost $0.0000575 (1 turn without usage, 1 without a price); written"
    ) in text
