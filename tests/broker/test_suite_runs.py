"""Stored suite runs (`broker.actions.suite_runs`): the tester's history of conversation-test runs.

The verbs are the tester's alone (R22: on its list; any other actor `not-found`); a case's
threads pass the owner check of every thread verb (R1); `change` is computed by the broker
against the run's baseline, never taken from the runner.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import timedelta
from fractions import Fraction
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from broker import actions, refusals, suite_fields
from broker.actions import suite_comparisons, suite_runs
from broker.actions.suite_runs import CaseResult, Compared
from broker.actors import Actor
from broker.models import (
    Business,
    Event,
    Instance,
    Message,
    SuiteCase,
    SuiteChange,
    SuiteRun,
    SuiteVerdict,
    Thread,
    TrailRow,
)
from broker.refusals import Refusal
from broker.significance import Tally
from tests.broker import factories

PASS, FLAKY, FAIL, ERROR = (
    SuiteVerdict.PASS,
    SuiteVerdict.FLAKY,
    SuiteVerdict.FAIL,
    SuiteVerdict.ERROR,
)


@pytest.fixture
def tester_thread(human: Actor, tester: Actor) -> int:
    return factories.thread(tester, factories.project(human), "smoke · greets").pk


def record(tester: Actor, run: SuiteRun | int, *, verdict: str = PASS, **changes: Any) -> SuiteCase:
    """A case's result with sensible defaults; `changes` override any field."""
    values: dict[str, Any] = {
        "suite": "smoke",
        "case": "greets",
        "instance": "assistant",
        "verdict": verdict,
        "passed_runs": 1 if verdict == PASS else 0,
        "runs": 1,
    }
    run_id = run if isinstance(run, int) else run.pk
    return suite_runs.record_suite_case(tester, run_id=run_id, **{**values, **changes})


def ended_run(tester: Actor, suites: list[str], verdict: str | None = None) -> SuiteRun:
    """A run of `suites` that ended, having recorded `smoke · greets` with `verdict` if any."""
    run = suite_runs.start_suite_run(tester, suites=suites)
    if verdict is not None:
        record(tester, run, verdict=verdict)
    return suite_runs.end_suite_run(tester, run_id=run.pk)


def add_instance(business: Business, name: str) -> Instance:
    """Another instance of the business, with the assistant's role."""
    role = Instance.objects.get(business=business, name="assistant").role
    return Instance.objects.create(business=business, name=name, role=role)


def stored() -> tuple[int, int]:
    return SuiteRun.objects.count(), SuiteCase.objects.count()


# --- start -------------------------------------------------------------------------------


def test_start_stores_sorted_suites_without_baseline(tester: Actor, business: Business) -> None:
    """R22: the tester starts a run of its business; the suites are stored sorted."""
    run = suite_runs.start_suite_run(tester, suites=["smoke", "billing"])
    assert (run.business_id, run.suites, run.baseline_id, run.ended_at) == (
        business.pk,
        ["billing", "smoke"],
        None,
        None,
    )
    assert run.counts == {"pass": 0, "flaky": 0, "fail": 0, "error": 0, "regressed": 0}


@pytest.mark.parametrize(
    "suites",
    [[], "smoke", None, ["smoke", "smoke"], [""], [" "], ["x" * 81], [5], ["a\u202eb"], ["a\x00"]],
    ids=repr,
)
def test_start_with_bad_suites_is_invalid(tester: Actor, suites: object) -> None:
    with pytest.raises(Refusal) as refusal:
        suite_runs.start_suite_run(tester, suites=suites)
    assert refusal.value.code == refusals.INVALID
    assert stored() == (0, 0)


def test_start_compare_last_takes_the_newest_ended_run_of_the_same_suites(tester: Actor) -> None:
    """`"last"`: the newest earlier run that ended and covers exactly these suites."""
    ended_run(tester, ["smoke"])
    newest_smoke = ended_run(tester, ["smoke"])
    both = ended_run(tester, ["smoke", "billing"])
    suite_runs.start_suite_run(tester, suites=["smoke"])  # newer, but not ended
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare="last")
    assert run.baseline_id == newest_smoke.pk
    # The order the suites are named in does not matter: they are compared sorted.
    other = suite_runs.start_suite_run(tester, suites=["smoke", "billing"], compare="last")
    assert other.baseline_id == both.pk


def test_start_compare_last_without_earlier_ended_run_has_no_baseline(tester: Actor) -> None:
    """No ended run of the same suites: no baseline, and every case is `new`."""
    suite_runs.start_suite_run(tester, suites=["smoke"])  # not ended
    ended_run(tester, ["billing"], PASS)
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare="last")
    assert run.baseline_id is None
    assert record(tester, run, verdict=FAIL).change == SuiteChange.NEW


def test_start_compare_id_names_a_run_of_the_business(tester: Actor) -> None:
    """A run id: that run is the baseline, ended or not, whatever its suites."""
    earlier = suite_runs.start_suite_run(tester, suites=["billing"])
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare=earlier.pk)
    assert run.baseline_id == earlier.pk


def test_start_compare_id_of_another_business_or_missing_is_not_found(
    tester: Actor, other_business: Business
) -> None:
    """Another business's run is answered as a missing one: nothing is told across them."""
    theirs = suite_runs.start_suite_run(Actor.tester(business_id=other_business.pk), suites=["s"])
    for compare in (theirs.pk, theirs.pk + 1000):
        with pytest.raises(Refusal) as refusal:
            suite_runs.start_suite_run(tester, suites=["smoke"], compare=compare)
        assert refusal.value.code == refusals.NOT_FOUND
    assert SuiteRun.objects.count() == 1


@pytest.mark.parametrize("compare", ["first", "LAST", "", True, 0, -1, 1.5, [1], 2**63], ids=repr)
def test_start_compare_neither_null_last_nor_id_is_invalid(tester: Actor, compare: object) -> None:
    with pytest.raises(Refusal) as refusal:
        suite_runs.start_suite_run(tester, suites=["smoke"], compare=compare)
    assert refusal.value.code == refusals.INVALID
    assert stored() == (0, 0)


# --- record ------------------------------------------------------------------------------


def result(verdict: str, passed: int, repeats: int, definition_hash: str = "") -> CaseResult:
    return CaseResult(verdict, Tally(passed, repeats), definition_hash)


SHA_A, SHA_B = "a" * 64, "b" * 64

# The baseline's same case (None: no such case) × the case now → its change and p-value.
# A verdict crossing between passing and failing is regressed or fixed only when the move is
# significant at 0.05 (p < alpha); below that it is `same`, within noise.
CHANGES: list[tuple[CaseResult | None, CaseResult, SuiteChange, Fraction | None]] = [
    (None, result(PASS, 1, 1), SuiteChange.NEW, None),
    (None, result(FAIL, 0, 1), SuiteChange.NEW, None),
    # 3/3 → 0/3 is p = 1/20, not below 0.05: three repeats cannot show a drop.
    (result(PASS, 3, 3), result(FAIL, 0, 3), SuiteChange.SAME, Fraction(1, 20)),
    (result(PASS, 10, 10), result(FAIL, 5, 10), SuiteChange.REGRESSED, Fraction(3003, 184756)),
    (result(FLAKY, 2, 3), result(FAIL, 0, 3), SuiteChange.SAME, Fraction(1, 5)),
    (result(PASS, 4, 4), result(FAIL, 0, 4), SuiteChange.REGRESSED, Fraction(1, 70)),
    (result(FLAKY, 3, 4), result(ERROR, 0, 4), SuiteChange.SAME, Fraction(1, 14)),
    (result(PASS, 4, 4), result(ERROR, 0, 4), SuiteChange.REGRESSED, Fraction(1, 70)),
    (result(FAIL, 0, 4), result(PASS, 4, 4), SuiteChange.FIXED, Fraction(1, 70)),
    (result(ERROR, 0, 4), result(FLAKY, 4, 4), SuiteChange.FIXED, Fraction(1, 70)),
    (result(FAIL, 0, 3), result(PASS, 3, 3), SuiteChange.SAME, Fraction(1, 20)),
    # A significant drop that still passes the case's gate is no regression.
    (result(PASS, 10, 10), result(FLAKY, 5, 10), SuiteChange.SAME, Fraction(3003, 184756)),
    (result(PASS, 4, 4), result(PASS, 4, 4), SuiteChange.SAME, Fraction(1)),
    (result(FAIL, 0, 4), result(ERROR, 0, 4), SuiteChange.SAME, Fraction(1)),
    # Another definition is another test: `changed`, compared with nothing.
    (result(PASS, 4, 4, SHA_A), result(FAIL, 0, 4, SHA_B), SuiteChange.CHANGED, None),
    (result(PASS, 4, 4, SHA_A), result(FAIL, 0, 4, SHA_A), SuiteChange.REGRESSED, Fraction(1, 70)),
    # A record without a hash (a client before them) is compared as before.
    (result(PASS, 4, 4), result(FAIL, 0, 4, SHA_B), SuiteChange.REGRESSED, Fraction(1, 70)),
]


@pytest.mark.parametrize(("before", "now", "change", "p_value"), CHANGES, ids=repr)
def test_case_change_is_significant_verdict_crossings_only(
    before: CaseResult | None, now: CaseResult, change: SuiteChange, p_value: Fraction | None
) -> None:
    """Regressed when the baseline's case worked (pass, flaky), this one does not (fail,
    error) and the drop's one-sided Fisher p-value is below alpha; fixed the other way round;
    changed when both definitions are hashed and differ; new without such a case."""
    assert suite_runs.case_change(baseline=before, now=now, alpha=0.05) == Compared(change, p_value)


def test_case_change_at_a_higher_alpha_calls_a_smaller_drop_significant() -> None:
    """The run's alpha decides: 3/3 → 0/3 (p = 0.05) regressed at 0.1."""
    compared = suite_runs.case_change(
        baseline=result(PASS, 3, 3), now=result(FAIL, 0, 3), alpha=0.1
    )
    assert compared == Compared(SuiteChange.REGRESSED, Fraction(1, 20))


@pytest.mark.parametrize(
    ("before", "now", "change", "p_value"),
    [
        ((PASS, 4, 4), (FAIL, 0, 4), SuiteChange.REGRESSED, 1 / 70),
        ((PASS, 3, 3), (FAIL, 0, 3), SuiteChange.SAME, 0.05),
        ((FAIL, 0, 4), (PASS, 4, 4), SuiteChange.FIXED, 1 / 70),
        (None, (FAIL, 0, 4), SuiteChange.NEW, None),
    ],
    ids=repr,
)
def test_record_stores_change_p_value_and_the_baselines_tally(
    tester: Actor,
    before: tuple[str, int, int] | None,
    now: tuple[str, int, int],
    change: SuiteChange,
    p_value: float | None,
) -> None:
    """The broker computes `change` and its p-value when the case is recorded, and keeps the
    baseline's k/N beside them."""
    baseline = suite_runs.start_suite_run(tester, suites=["smoke"])
    if before is not None:
        record(tester, baseline, verdict=before[0], passed_runs=before[1], runs=before[2])
    suite_runs.end_suite_run(tester, run_id=baseline.pk)
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare=baseline.pk)
    case = record(tester, run, verdict=now[0], passed_runs=now[1], runs=now[2])
    case.refresh_from_db()
    assert (case.change, case.p_value) == (change, pytest.approx(p_value) if p_value else None)
    tally = (case.baseline_passed_runs, case.baseline_runs)
    assert tally == ((before[1], before[2]) if before else (None, None))


def test_record_matches_the_baseline_case_by_suite_case_and_instance(
    business: Business, tester: Actor
) -> None:
    """Only the same (suite, case, instance) is compared: the same case name in another suite
    or against another instance is `new`."""
    helper = add_instance(business, "helper")
    baseline = suite_runs.start_suite_run(tester, suites=["smoke", "other"])
    record(tester, baseline, verdict=PASS)
    suite_runs.end_suite_run(tester, run_id=baseline.pk)
    run = suite_runs.start_suite_run(tester, suites=["smoke", "other"], compare="last")
    assert record(tester, run, verdict=FAIL).change == SuiteChange.SAME
    assert record(tester, run, verdict=FAIL, suite="other").change == SuiteChange.NEW
    assert record(tester, run, verdict=FAIL, instance=helper.name).change == SuiteChange.NEW


def test_record_change_from_the_client_is_not_accepted(tester: Actor) -> None:
    """`change` is computed, never taken from the runner: the verb has no such argument."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(TypeError):
        record(tester, run, change=SuiteChange.FIXED)


def test_record_stores_threads_failures_and_attempts_as_given(
    tester: Actor, tester_thread: int
) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    failures = [
        {"repeat": 1, "turn": 0, "sent": "hello", "expected": "matches hi", "actual": "bye"},
        {"repeat": 2, "turn": None, "sent": None, "expected": "a reply", "actual": ""},
    ]
    attempts = [
        {"thread": tester_thread, "turns": [{"ms": 812.5, "tokens": 31}], "model": "m"},
        {"judge": {"reasons": ["off topic"], "score": None, "ok": False}},
    ]
    case = record(
        tester,
        run,
        verdict=FLAKY,
        passed_runs=1,
        runs=2,
        threads=[tester_thread],
        failures=failures,
        attempts=attempts,
    )
    case.refresh_from_db()
    assert (case.verdict, case.passed_runs, case.runs, case.change) == (FLAKY, 1, 2, "new")
    assert (case.threads, case.failures, case.attempts) == ([tester_thread], failures, attempts)


def test_record_into_ended_run_is_invalid(tester: Actor) -> None:
    run = ended_run(tester, ["smoke"])
    with pytest.raises(Refusal) as refusal:
        record(tester, run)
    assert refusal.value.code == refusals.INVALID
    assert SuiteCase.objects.count() == 0


def test_record_same_case_twice_in_a_run_is_invalid(tester: Actor) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    first = record(tester, run)
    with pytest.raises(Refusal) as refusal:
        record(tester, run, verdict=FAIL)
    assert refusal.value.code == refusals.INVALID
    assert list(SuiteCase.objects.values_list("pk", "verdict")) == [(first.pk, PASS)]


def test_record_into_another_business_run_or_missing_is_not_found(
    tester: Actor, other_business: Business
) -> None:
    theirs = suite_runs.start_suite_run(Actor.tester(business_id=other_business.pk), suites=["s"])
    for run_id in (theirs.pk, theirs.pk + 1000):
        with pytest.raises(Refusal) as refusal:
            record(tester, run_id)
        assert refusal.value.code == refusals.NOT_FOUND
    assert SuiteCase.objects.count() == 0


def test_record_human_thread_is_thread_not_owned(
    human: Actor, tester: Actor, tester_thread: int
) -> None:
    """R1: a case names only the tester's own threads; the human's is `thread-not-owned`,
    the same answer every thread verb gives, and nothing is stored."""
    human_thread = factories.thread(human, factories.project(human, "mine"), "plan").pk
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        record(tester, run, threads=[tester_thread, human_thread])
    assert refusal.value.code == refusals.THREAD_NOT_OWNED
    assert SuiteCase.objects.count() == 0


def test_record_thread_missing_or_of_another_business_is_not_found(
    tester: Actor, other_human: Actor
) -> None:
    """R1: a thread of another business is answered as a missing one."""
    theirs = factories.thread(other_human, factories.project(other_human), "theirs").pk
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    for thread_id in (theirs, theirs + 1000):
        with pytest.raises(Refusal) as refusal:
            record(tester, run, threads=[thread_id])
        assert refusal.value.code == refusals.NOT_FOUND
    assert SuiteCase.objects.count() == 0


def test_record_thread_of_another_instance_is_invalid(
    business: Business, human: Actor, tester: Actor
) -> None:
    """A case's threads talked to the instance it names."""
    add_instance(business, "helper")
    project = factories.project(human)
    helper_thread = actions.create_thread(
        tester, project_id=project.pk, name="helper", instance="helper"
    ).pk
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        record(tester, run, threads=[helper_thread])
    assert refusal.value.code == refusals.INVALID
    assert record(tester, run, instance="helper", threads=[helper_thread]).threads == [
        helper_thread
    ]


def test_record_without_instance_only_for_a_case_that_reached_none(
    tester: Actor, tester_thread: int
) -> None:
    """A case that errored before its first thread names no instance; one with threads names
    theirs."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        record(tester, run, verdict=ERROR, instance="", threads=[tester_thread])
    assert refusal.value.code == refusals.INVALID
    assert record(tester, run, verdict=ERROR, instance="").instance == ""


# Each changes one field of a good record to something refused `invalid`.
def failure_of(length: int, letter: str = "x") -> dict[str, Any]:
    """A failure whose actual text is `length` times `letter`."""
    return {"repeat": 1, "turn": 1, "sent": None, "expected": "e", "actual": letter * length}


BAD_RECORDS: dict[str, dict[str, Any]] = {
    "verdict unknown": {"verdict": "ok"},
    "verdict not text": {"verdict": ["pass"]},
    "runs zero": {"runs": 0},
    "runs over the limit": {"runs": suite_fields.RUNS_MAX + 1},
    "runs a boolean": {"runs": True},
    "passed over runs": {"passed_runs": 2, "runs": 1},
    "passed negative": {"passed_runs": -1},
    "suite empty": {"suite": ""},
    "case too long": {"case": "x" * 81},
    "instance not text": {"instance": 5},
    "instance blank": {"instance": " "},
    "threads not a list": {"threads": 5},
    "thread id text": {"threads": ["1"]},
    "thread id zero": {"threads": [0]},
    "failure missing a key": {"failures": [{"repeat": 1, "expected": "e", "actual": "a"}]},
    "failure extra key": {
        "failures": [{"repeat": 1, "turn": 0, "sent": "s", "expected": "e", "actual": "a", "x": 1}]
    },
    "failure turn text": {
        "failures": [{"repeat": 1, "turn": "0", "sent": None, "expected": "e", "actual": "a"}]
    },
    "failure text NUL": {
        "failures": [{"repeat": 1, "turn": 0, "sent": "a\x00", "expected": "e", "actual": "a"}]
    },
    "failure text too long": {
        "failures": [
            {
                "repeat": 1,
                "turn": 0,
                "sent": None,
                "expected": "e",
                "actual": "a" * (suite_fields.FAILURE_TEXT_MAX + 1),
            }
        ]
    },
    "attempt not an object": {"attempts": [[1, 2]]},
    "attempts not a list": {"attempts": {"a": 1}},
    "attempt NaN": {"attempts": [{"ms": math.nan}]},
    "attempt infinity": {"attempts": [{"ms": math.inf}]},
    "attempt integer past 64 bits": {"attempts": [{"n": 2**64}]},
    "attempt lone surrogate": {"attempts": [{"text": "\ud800"}]},
    "attempt NUL in a key": {"attempts": [{"a\x00": 1}]},
    "attempt not JSON": {"attempts": [{"when": object()}]},
    "attempts nested too deep": {"attempts": [{"a": [[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]}]},
    "attempts too large": {"attempts": [{"text": "x" * suite_fields.CASE_RECORD_MAX}]},
    # Each within its own limits, too large together.
    "failures and attempts too large together": {
        "failures": [failure_of(30_000) for _ in range(6)],
        "attempts": [{"text": "x" * 30_000}],
    },
    # Measured as JSON in ASCII: each "é" is written `\\u00e9`, six characters.
    "failures too large as ASCII JSON": {"failures": [failure_of(12_000, "é") for _ in range(3)]},
}


@pytest.mark.parametrize("changes", BAD_RECORDS.values(), ids=BAD_RECORDS.keys())
def test_record_bad_field_is_invalid_and_stores_nothing(
    tester: Actor, changes: dict[str, Any]
) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        record(tester, run, **changes)
    assert refusal.value.code == refusals.INVALID
    assert SuiteCase.objects.count() == 0


def test_record_beyond_the_cases_a_run_holds_is_invalid(
    tester: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's read shows all its cases, so a run holds at most RUN_CASES_MAX."""
    monkeypatch.setattr(suite_fields, "RUN_CASES_MAX", 2)
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    record(tester, run, case="one")
    record(tester, run, case="two")
    with pytest.raises(Refusal) as refusal:
        record(tester, run, case="three")
    assert refusal.value.code == refusals.INVALID
    assert SuiteCase.objects.count() == 2


def test_suite_runs_write_no_trail_message_or_event(tester: Actor, tester_thread: int) -> None:
    """Suite runs are the tester's history, not bus traffic: nothing on the trail."""
    before = (TrailRow.objects.count(), Message.objects.count(), Event.objects.count())
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    record(tester, run, threads=[tester_thread])
    suite_runs.end_suite_run(tester, run_id=run.pk)
    assert (TrailRow.objects.count(), Message.objects.count(), Event.objects.count()) == before


# --- end ---------------------------------------------------------------------------------


def test_end_sets_ended_at_and_ending_again_changes_nothing(tester: Actor) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    record(tester, run, verdict=FAIL)
    ended = suite_runs.end_suite_run(tester, run_id=run.pk)
    assert ended.ended_at is not None and ended.ended_at >= ended.started_at
    assert ended.counts["fail"] == 1
    again = suite_runs.end_suite_run(tester, run_id=run.pk)
    assert (again.ended_at, again.counts) == (ended.ended_at, ended.counts)


def test_end_of_another_business_run_is_not_found(tester: Actor, other_business: Business) -> None:
    theirs = suite_runs.start_suite_run(Actor.tester(business_id=other_business.pk), suites=["s"])
    with pytest.raises(Refusal) as refusal:
        suite_runs.end_suite_run(tester, run_id=theirs.pk)
    assert refusal.value.code == refusals.NOT_FOUND
    theirs.refresh_from_db()
    assert theirs.ended_at is None


def test_end_with_a_reason_halts_the_run_and_keeps_the_reason(tester: Actor) -> None:
    """A run its client could not finish (refused, interrupted) ends `halted` with why; it
    takes no more cases, and the refusal says it was halted and why."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    halted = suite_runs.end_suite_run(tester, run_id=run.pk, reason="tester-off: no tests")
    assert (halted.state, halted.end_reason) == ("halted", "tester-off: no tests")
    assert halted.ended_at is not None
    with pytest.raises(Refusal) as refusal:
        record(tester, run)
    assert refusal.value.code == refusals.INVALID
    assert "halted (tester-off: no tests)" in refusal.value.detail
    # Ended already: ending it again, with or without a reason, answers it as it is.
    again = suite_runs.end_suite_run(tester, run_id=run.pk)
    assert (again.state, again.end_reason) == ("halted", "tester-off: no tests")


def test_end_without_a_reason_finishes_the_run(tester: Actor) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    assert run.state == "running"
    finished = suite_runs.end_suite_run(tester, run_id=run.pk)
    assert (finished.state, finished.end_reason) == ("finished", "")


@pytest.mark.parametrize("reason", ["", "   ", 5, "a\x00", "x" * 2001], ids=repr)
def test_end_with_a_bad_reason_is_invalid_and_ends_nothing(tester: Actor, reason: object) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        suite_runs.end_suite_run(tester, run_id=run.pk, reason=reason)
    assert refusal.value.code == refusals.INVALID
    run.refresh_from_db()
    assert run.state == "running"


# --- selection, alpha and halted runs as baselines ------------------------------------------


def test_start_compare_last_takes_only_a_run_of_the_same_selection(tester: Actor) -> None:
    """`"last"`: the newest finished run of the same suites, instances and case selection. A
    `-k` run is never a full run's baseline, nor another instance's run, nor a halted run."""
    full = suite_runs.start_suite_run(tester, suites=["smoke"], instances=[""])
    suite_runs.end_suite_run(tester, run_id=full.pk)
    subset = suite_runs.start_suite_run(tester, suites=["smoke"], instances=[""], keyword="greets")
    suite_runs.end_suite_run(tester, run_id=subset.pk)
    other = suite_runs.start_suite_run(tester, suites=["smoke"], instances=["helper"])
    suite_runs.end_suite_run(tester, run_id=other.pk)
    halted = suite_runs.start_suite_run(tester, suites=["smoke"], instances=[""])
    suite_runs.end_suite_run(tester, run_id=halted.pk, reason="interrupted")

    again = suite_runs.start_suite_run(tester, suites=["smoke"], instances=[""], compare="last")
    assert again.baseline_id == full.pk
    narrow = suite_runs.start_suite_run(
        tester, suites=["smoke"], instances=[""], keyword="greets", compare="last"
    )
    assert narrow.baseline_id == subset.pk
    # Instances are compared sorted, as suites are.
    both = suite_runs.start_suite_run(tester, suites=["smoke"], instances=["helper", ""])
    suite_runs.end_suite_run(tester, run_id=both.pk)
    later = suite_runs.start_suite_run(
        tester, suites=["smoke"], instances=["", "helper"], compare="last"
    )
    assert (later.instances, later.baseline_id) == (["", "helper"], both.pk)


def test_start_compare_id_takes_a_subset_run_as_asked(tester: Actor) -> None:
    """An explicit id is the caller's choice: a `-k` run is taken; cases not in it are new."""
    subset = suite_runs.start_suite_run(tester, suites=["smoke"], keyword="greets")
    record(tester, subset, verdict=PASS, passed_runs=4, runs=4)
    suite_runs.end_suite_run(tester, run_id=subset.pk)
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare=subset.pk)
    assert run.baseline_id == subset.pk
    assert record(tester, run, verdict=FAIL, passed_runs=0, runs=4).change == "regressed"
    assert record(tester, run, case="remembers").change == SuiteChange.NEW


def test_start_stores_alpha_with_its_default(tester: Actor) -> None:
    assert suite_runs.start_suite_run(tester, suites=["smoke"]).alpha == 0.05
    assert suite_runs.start_suite_run(tester, suites=["smoke"], alpha=0.1).alpha == 0.1


@pytest.mark.parametrize(
    "changes",
    [
        {"alpha": 0},
        {"alpha": 1},
        {"alpha": -0.5},
        {"alpha": math.nan},
        {"alpha": "0.05"},
        {"alpha": True},
        {"instances": "assistant"},
        {"instances": ["a", "a"]},
        {"instances": [" "]},
        {"instances": [5]},
        {"keyword": ""},
        {"keyword": 5},
        {"keyword": "x" * 201},
    ],
    ids=repr,
)
def test_start_with_bad_selection_or_alpha_is_invalid(
    tester: Actor, changes: dict[str, Any]
) -> None:
    with pytest.raises(Refusal) as refusal:
        suite_runs.start_suite_run(tester, suites=["smoke"], **changes)
    assert refusal.value.code == refusals.INVALID
    assert stored() == (0, 0)


# --- statistics and definitions ----------------------------------------------------------

STATISTICS = {"pass_rate": 0.7, "interval": [0.3968, 0.8922], "pass_hat_k": 0.0}


def test_record_stores_the_clients_statistics_and_definition_hash(tester: Actor) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    case = record(
        tester, run, verdict=FLAKY, passed_runs=7, runs=10, definition_hash=SHA_A, **STATISTICS
    )
    case.refresh_from_db()
    assert (case.pass_rate, case.interval_low, case.interval_high, case.pass_hat_k) == (
        0.7,
        0.3968,
        0.8922,
        0.0,
    )
    assert case.definition_hash == SHA_A
    # A case halted before k repeats ran has no pass^k.
    halted = record(tester, run, case="halted", pass_rate=0.0, interval=[0.0, 0.79])
    assert (halted.pass_rate, halted.pass_hat_k) == (0.0, None)
    # A record from a client before them has none.
    older = record(tester, run, case="older")
    assert (older.pass_rate, older.interval_low, older.definition_hash) == (None, None, "")


BAD_STATISTICS: dict[str, dict[str, Any]] = {
    "rate alone": {"pass_rate": 0.5},
    "no interval": {"pass_rate": 0.5, "pass_hat_k": 0.0},
    "pass_hat_k alone": {"pass_hat_k": 0.0},
    "rate outside the interval": {**STATISTICS, "pass_rate": 0.95},
    "interval upside down": {**STATISTICS, "interval": [0.9, 0.3]},
    "interval of three": {**STATISTICS, "interval": [0.1, 0.7, 0.9]},
    "interval past 1": {**STATISTICS, "interval": [0.3, 1.5]},
    "negative pass_hat_k": {**STATISTICS, "pass_hat_k": -0.1},
    "rate text": {**STATISTICS, "pass_rate": "0.7"},
    "rate NaN": {**STATISTICS, "pass_rate": math.nan},
    "rate past every float": {**STATISTICS, "pass_rate": 10**400},
    "hash short": {"definition_hash": "abc"},
    "hash upper case": {"definition_hash": "A" * 64},
    "hash not text": {"definition_hash": 5},
}


@pytest.mark.parametrize("changes", BAD_STATISTICS.values(), ids=BAD_STATISTICS.keys())
def test_record_incoherent_statistics_or_hash_is_invalid(
    tester: Actor, changes: dict[str, Any]
) -> None:
    """The server checks the client's numbers (each in [0, 1], the rate in its interval) and
    recomputes nothing."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        record(tester, run, **changes)
    assert refusal.value.code == refusals.INVALID
    assert SuiteCase.objects.count() == 0


def test_record_case_whose_definition_changed_is_changed_not_regressed(tester: Actor) -> None:
    baseline = suite_runs.start_suite_run(tester, suites=["smoke"])
    record(tester, baseline, passed_runs=4, runs=4, definition_hash=SHA_A)
    suite_runs.end_suite_run(tester, run_id=baseline.pk)
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare="last")
    case = record(tester, run, verdict=FAIL, passed_runs=0, runs=4, definition_hash=SHA_B)
    assert (case.change, case.p_value) == (SuiteChange.CHANGED, None)
    assert run.counts["regressed"] == 0


# --- tokens and cost -----------------------------------------------------------------------

# A case of three turns: two priced, one whose model had no price; its columns as stored.
COST = {
    "turns": 3,
    "prompt_tokens": 33,
    "completion_tokens": 9,
    "amount": 0.021,
    "turns_without_usage": 0,
    "turns_without_price": 1,
}
COST_COLUMNS = {
    "cost_turns": 2,
    "prompt_tokens": 22,
    "completion_tokens": 6,
    "cost_amount": 0.5,
    "turns_without_usage": 1,
    "turns_without_price": 0,
}
# Two turns without usage: nothing priced, the amount unknown.
UNPRICED = {**COST, "turns": 2, "prompt_tokens": 0, "completion_tokens": 0, "amount": None}
UNPRICED |= {"turns_without_usage": 2, "turns_without_price": 0}


def test_record_stores_the_cases_cost_and_a_run_sums_its_cases(tester: Actor) -> None:
    """SPEC §6.3: a case's cost is stored as the client counted it; a run sums its cases' and
    counts those that recorded none, the amount of the turns priced only (unknown is never a
    zero)."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    priced = record(tester, run, case="priced", cost=COST)
    unpriced = record(tester, run, case="unpriced", cost=UNPRICED)
    record(tester, run, case="older")
    priced.refresh_from_db()
    assert (priced.cost, unpriced.cost) == (COST, UNPRICED)
    assert SuiteCase.objects.get(run=run, case="older").cost is None
    summed = {
        "turns": 5,
        "prompt_tokens": 33,
        "completion_tokens": 9,
        "amount": 0.021,
        "turns_without_usage": 2,
        "turns_without_price": 1,
        "cases_without_cost": 1,
    }
    [listed] = suite_runs.list_suite_runs(tester)
    assert listed.cost == summed
    assert suite_runs.read_suite_run(tester, run_id=run.pk).run.cost == summed
    assert suite_runs.end_suite_run(tester, run_id=run.pk).cost == summed


def test_run_cost_is_unknown_when_no_turn_of_any_case_was_priced(tester: Actor) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    assert suite_runs.read_suite_run(tester, run_id=run.pk).run.cost["amount"] is None
    record(tester, run, case="unpriced", cost=UNPRICED)
    cost = suite_runs.read_suite_run(tester, run_id=run.pk).run.cost
    assert (cost["amount"], cost["turns"], cost["turns_without_usage"]) == (None, 2, 2)


def test_run_cost_of_the_most_every_case_may_count_still_sums(tester: Actor) -> None:
    """Each count is bounded so that a run's cases sum within the databases' 64 bits."""
    most = suite_fields.COST_COUNT_MAX
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    big = {**COST, "turns": most, "prompt_tokens": most, "completion_tokens": most}
    big |= {"amount": suite_fields.COST_AMOUNT_MAX}
    for case in ("a", "b", "c"):
        record(tester, run, case=case, cost=big)
    cost = suite_runs.read_suite_run(tester, run_id=run.pk).run.cost
    assert (cost["turns"], cost["prompt_tokens"]) == (3 * most, 3 * most)
    assert cost["amount"] == 3 * suite_fields.COST_AMOUNT_MAX


BAD_COSTS: dict[str, object] = {
    "not an object": [1, 2],
    "a key missing": {key: value for key, value in COST.items() if key != "turns"},
    "a key too many": {**COST, "currency": "USD"},
    "negative tokens": {**COST, "prompt_tokens": -1},
    "tokens past the bound": {**COST, "prompt_tokens": suite_fields.COST_COUNT_MAX + 1},
    "tokens as text": {**COST, "completion_tokens": "9"},
    "turns a boolean": {**COST, "turns": True},
    "more unknown than turns": {**COST, "turns_without_usage": 3},
    "an amount with nothing priced": {**UNPRICED, "amount": 0.0},
    "no amount with a turn priced": {**COST, "amount": None},
    "a negative amount": {**COST, "amount": -0.01},
    "an amount past the bound": {**COST, "amount": suite_fields.COST_AMOUNT_MAX * 2},
    "an amount NaN": {**COST, "amount": math.nan},
    "an amount past every float": {**COST, "amount": 10**400},
}


@pytest.mark.parametrize("cost", BAD_COSTS.values(), ids=BAD_COSTS.keys())
def test_record_incoherent_cost_is_invalid(tester: Actor, cost: object) -> None:
    """SPEC §6.3: the counts must hold together, and an unknown amount is null, never a zero."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        record(tester, run, cost=cost)
    assert refusal.value.code == refusals.INVALID
    assert SuiteCase.objects.count() == 0


# --- silent runs ---------------------------------------------------------------------------


def silent_for(run: SuiteRun, seconds: float) -> None:
    """The run's last activity, and every tester thread's, `seconds` ago."""
    past = timezone.now() - timedelta(seconds=seconds)
    SuiteRun.objects.filter(pk=run.pk).update(active_at=past)
    Thread.objects.filter(owner="tester").update(active_at=past)


def test_run_silent_past_the_limit_is_halted_by_the_next_look(
    tester: Actor, tester_thread: int, settings: Any
) -> None:
    """No record and no tester turn for MOSAIC_SUITE_RUN_SILENCE_SECONDS: the run's client is
    gone, and the next verb of the business (a list, a read, a start, a record) halts it with
    its reason; a run silent for less stays running."""
    settings.MOSAIC_SUITE_RUN_SILENCE_SECONDS = 600
    gone = suite_runs.start_suite_run(tester, suites=["smoke"])
    quiet = suite_runs.start_suite_run(tester, suites=["smoke"])
    silent_for(gone, 601)
    SuiteRun.objects.filter(pk=quiet.pk).update(active_at=timezone.now() - timedelta(seconds=599))

    states = {run.pk: run.state for run in suite_runs.list_suite_runs(tester)}
    assert states == {gone.pk: "halted", quiet.pk: "running"}
    gone.refresh_from_db()
    assert "silent for more than 600 s" in gone.end_reason
    with pytest.raises(Refusal) as refusal:
        record(tester, gone)
    assert refusal.value.code == refusals.INVALID
    # Nor is it a baseline for "last": it was halted, not finished.
    assert suite_runs.start_suite_run(tester, suites=["smoke"], compare="last").baseline is None


def test_run_silent_while_the_tester_talks_stays_running(
    tester: Actor, tester_thread: int, settings: Any
) -> None:
    """A client between records may be in a long case's repeats: a turn or reply in any
    tester thread of the business within the limit keeps its runs running."""
    settings.MOSAIC_SUITE_RUN_SILENCE_SECONDS = 600
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    silent_for(run, 601)
    Thread.objects.filter(pk=tester_thread).update(active_at=timezone.now())
    assert suite_runs.read_suite_run(tester, run_id=run.pk).run.state == "running"
    # Recorded, its activity is now: the limit counts from its latest record.
    record(tester, run, threads=[tester_thread])
    Thread.objects.filter(pk=tester_thread).update(
        active_at=timezone.now() - timedelta(seconds=601)
    )
    assert suite_runs.read_suite_run(tester, run_id=run.pk).run.state == "running"


def test_silent_run_of_another_business_is_left_to_its_own(
    tester: Actor, other_business: Business, settings: Any
) -> None:
    settings.MOSAIC_SUITE_RUN_SILENCE_SECONDS = 600
    theirs = suite_runs.start_suite_run(Actor.tester(business_id=other_business.pk), suites=["s"])
    silent_for(theirs, 601)
    suite_runs.list_suite_runs(tester)
    theirs.refresh_from_db()
    assert theirs.state == "running"


# --- reads -------------------------------------------------------------------------------


def test_list_is_newest_first_with_limit_and_before(
    tester: Actor, other_business: Business
) -> None:
    ids = [suite_runs.start_suite_run(tester, suites=["smoke"]).pk for _ in range(5)]
    suite_runs.start_suite_run(Actor.tester(business_id=other_business.pk), suites=["s"])
    assert [run.pk for run in suite_runs.list_suite_runs(tester)] == ids[::-1]
    assert [run.pk for run in suite_runs.list_suite_runs(tester, limit=2)] == ids[:2:-1]
    assert [run.pk for run in suite_runs.list_suite_runs(tester, before=ids[3], limit=2)] == [
        ids[2],
        ids[1],
    ]


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": 501}, {"before": -1}], ids=repr)
def test_list_bad_query_is_invalid(tester: Actor, query: dict[str, int]) -> None:
    with pytest.raises(Refusal) as refusal:
        suite_runs.list_suite_runs(tester, **query)
    assert refusal.value.code == refusals.INVALID


def test_counts_count_each_verdict_and_the_regressions(tester: Actor) -> None:
    baseline = suite_runs.start_suite_run(tester, suites=["smoke"])
    for case in ("a", "b", "c"):
        record(tester, baseline, case=case, verdict=PASS, passed_runs=4, runs=4)
    suite_runs.end_suite_run(tester, run_id=baseline.pk)
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare="last")
    for case, verdict in (("a", PASS), ("b", FAIL), ("c", ERROR), ("d", FLAKY), ("e", FAIL)):
        passed = {PASS: 4, FLAKY: 3}.get(verdict, 0)
        record(tester, run, case=case, verdict=verdict, passed_runs=passed, runs=4)
    expected = {"pass": 1, "flaky": 1, "fail": 2, "error": 1, "regressed": 2}
    [listed, _] = suite_runs.list_suite_runs(tester)
    assert listed.counts == expected
    assert suite_runs.read_suite_run(tester, run_id=run.pk).run.counts == expected
    assert suite_runs.end_suite_run(tester, run_id=run.pk).counts == expected


def test_list_reads_counts_in_one_query_however_many_runs(
    tester: Actor, django_assert_num_queries: Callable[..., Any]
) -> None:
    """No read per run: the counts are annotated in the list's own query (the tester's switch
    is one more, and the look for silent runs to halt a third)."""
    for n in range(4):
        run = suite_runs.start_suite_run(tester, suites=["smoke"])
        record(tester, run, case=str(n), verdict=FAIL)
    with django_assert_num_queries(3):
        runs = suite_runs.list_suite_runs(tester)
        assert [run.counts["fail"] for run in runs] == [1, 1, 1, 1]


def test_read_returns_the_run_and_its_cases_in_id_order(tester: Actor) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    cases = [record(tester, run, case=name).pk for name in ("z", "a", "m")]
    found = suite_runs.read_suite_run(tester, run_id=run.pk)
    assert (found.run.pk, [case.pk for case in found.cases]) == (run.pk, cases)


def test_record_up_to_its_size_bound_is_stored(tester: Actor) -> None:
    """A case record of CASE_RECORD_MAX characters exactly (failures and attempts as ASCII
    JSON together) is stored: the bound is the limit, not below it."""
    failures = [failure_of(30_000) for _ in range(6)]
    rest = suite_fields.CASE_RECORD_MAX - suite_fields.record_size(failures, [{"text": ""}])
    attempts = [{"text": "x" * rest}]
    assert suite_fields.record_size(failures, attempts) == suite_fields.CASE_RECORD_MAX
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    stored = record(tester, run, failures=failures, attempts=attempts)
    stored.refresh_from_db()
    assert (stored.failures, stored.attempts) == (failures, attempts)


def store_cases(run: SuiteRun, count: int, **fields: Any) -> list[int]:
    """`count` cases stored in `run` as they are (no cleaning: records of any size, as a
    record stored before a bound may be); their ids in order."""
    SuiteCase.objects.bulk_create(
        SuiteCase(
            run=run,
            suite="smoke",
            case=f"case {number:04}",
            instance="",
            verdict=PASS,
            passed_runs=1,
            runs=1,
            change=SuiteChange.NEW,
            **fields,
        )
        for number in range(count)
    )
    return list(SuiteCase.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))


def pages(tester: Actor, run: SuiteRun, **query: Any) -> list[list[int]]:
    """Every page of the run's cases, each page's ids, following `more` with `after`."""
    found: list[list[int]] = []
    after = None
    while True:
        read = suite_runs.read_suite_run(tester, run_id=run.pk, after=after, **query)
        found.append([case.pk for case in read.cases])
        if not read.more:
            return found
        after = read.cases[-1].pk


def test_read_pages_cases_in_id_order_by_after_and_limit(tester: Actor) -> None:
    """A run's cases come a page at a time: from the first, 100 by default, `limit` up to 500,
    `after` the last case of the page before, and `more` until the last page."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    ids = store_cases(run, 1_201)
    assert [len(page) for page in pages(tester, run)] == [100] * 12 + [1]
    assert pages(tester, run, limit=500) == [ids[:500], ids[500:1000], ids[1000:]]
    read = suite_runs.read_suite_run(tester, run_id=run.pk, after=ids[1198])
    assert ([case.pk for case in read.cases], read.more) == (ids[1199:], False)
    empty = suite_runs.read_suite_run(tester, run_id=run.pk, after=ids[-1])
    assert (empty.cases, empty.more) == ([], False)


def test_read_page_ends_before_its_records_pass_the_size_bound(tester: Actor) -> None:
    """Cases of 180,000 characters each (recorded, within CASE_RECORD_MAX): a page holds the
    two whose records stay within RUN_PAGE_SIZE_MAX together, whatever the limit."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    failures = [failure_of(29_950) for _ in range(6)]
    size = suite_fields.record_size(failures, [])
    assert 2 * size <= suite_fields.RUN_PAGE_SIZE_MAX < 3 * size
    ids = [record(tester, run, case=f"big {n}", failures=failures).pk for n in range(5)]
    assert pages(tester, run, limit=500) == [ids[:2], ids[2:4], ids[4:]]


def test_read_page_holds_one_case_larger_than_the_size_bound(tester: Actor) -> None:
    """A case stored larger than a page may carry (before the record bound) is read alone."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    big = [failure_of(suite_fields.RUN_PAGE_SIZE_MAX)]
    ids = store_cases(run, 2, failures=big)
    small = record(tester, run, case="small").pk
    assert pages(tester, run) == [ids[:1], ids[1:2], [small]]


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": 501}, {"after": -1}], ids=repr)
def test_read_bad_query_is_invalid(tester: Actor, query: dict[str, int]) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    with pytest.raises(Refusal) as refusal:
        suite_runs.read_suite_run(tester, run_id=run.pk, **query)
    assert refusal.value.code == refusals.INVALID


def test_read_of_another_business_run_is_not_found(tester: Actor, other_business: Business) -> None:
    theirs = suite_runs.start_suite_run(Actor.tester(business_id=other_business.pk), suites=["s"])
    with pytest.raises(Refusal) as refusal:
        suite_runs.read_suite_run(tester, run_id=theirs.pk)
    assert refusal.value.code == refusals.NOT_FOUND


# --- who may call them (R22) ---------------------------------------------------------------

SUITE_RUN_VERBS: dict[str, Callable[[Actor, int], Any]] = {
    "suite_run.start": lambda actor, run: suite_runs.start_suite_run(actor, suites=["smoke"]),
    "suite_run.record": lambda actor, run: record(actor, run),
    "suite_run.end": lambda actor, run: suite_runs.end_suite_run(actor, run_id=run),
    "suite_run.list": lambda actor, run: suite_runs.list_suite_runs(actor),
    "suite_run.read": lambda actor, run: suite_runs.read_suite_run(actor, run_id=run),
    "suite_run.compare": lambda actor, run: suite_comparisons.compare_suite_runs(
        actor, run_id=run, other_id=run
    ),
    "suite_run.compare_case": lambda actor, run: suite_comparisons.compare_suite_case(
        actor, run_id=run, other_id=run, case_id=1
    ),
}


@pytest.mark.parametrize("actor_name", ["human", "assistant_run", "staff"])
@pytest.mark.parametrize("verb", sorted(SUITE_RUN_VERBS))
def test_suite_run_verb_of_any_other_actor_is_not_found(
    request: pytest.FixtureRequest, business: Business, tester: Actor, actor_name: str, verb: str
) -> None:
    """R22: the suite runs' verbs serve the tester alone; any other actor is told `not-found`,
    as for a verb that does not exist, and nothing is stored or changed."""
    actor = (
        Actor.staff(business_id=business.pk, username="root")
        if actor_name == "staff"
        else request.getfixturevalue(actor_name)
    )
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    before = (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True)))
    with pytest.raises(Refusal) as refusal:
        SUITE_RUN_VERBS[verb](actor, run.pk)
    assert refusal.value.code == refusals.NOT_FOUND
    assert (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True))) == before


@pytest.mark.parametrize("verb", sorted(SUITE_RUN_VERBS))
def test_suite_run_verb_while_tester_off_is_tester_off(
    business: Business, tester: Actor, verb: str
) -> None:
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    Business.objects.filter(pk=business.pk).update(tester_enabled=False)
    with pytest.raises(Refusal) as refusal:
        SUITE_RUN_VERBS[verb](tester, run.pk)
    assert refusal.value.code == refusals.TESTER_OFF


# --- the database's own constraints --------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        {"passed_runs": 3, "runs": 2},
        {"runs": 0, "passed_runs": 0},
        {"runs": suite_fields.RUNS_MAX + 1},
        {"verdict": "ok"},
        {"change": "better"},
        {"suite": ""},
        {"instance": "", "threads": [1]},
        {"pass_rate": 0.5},
        {"pass_rate": 0.9, "interval_low": 0.1, "interval_high": 0.8, "pass_hat_k": 0.0},
        {"pass_rate": 0.5, "interval_low": -0.1, "interval_high": 0.8, "pass_hat_k": 0.0},
        {"pass_rate": 0.5, "interval_low": 0.1, "interval_high": 0.8, "pass_hat_k": 2.0},
        {"p_value": 1.5},
        {"baseline_runs": 3},
        {"baseline_runs": 3, "baseline_passed_runs": 4},
        {"cost_turns": 2},
        {**COST_COLUMNS, "prompt_tokens": None},
        {**COST_COLUMNS, "turns_without_usage": 2, "turns_without_price": 1},
        {**COST_COLUMNS, "cost_amount": None},
        {**COST_COLUMNS, "cost_amount": -0.5},
        {**COST_COLUMNS, "turns_without_price": 2, "turns_without_usage": 0},
    ],
    ids=repr,
)
def test_database_refuses_a_case_breaking_its_constraints(
    tester: Actor, values: dict[str, Any]
) -> None:
    """The model's CheckConstraints hold whatever code writes the row."""
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    row = {
        "run": run,
        "suite": "smoke",
        "case": "greets",
        "instance": "assistant",
        "verdict": PASS,
        "passed_runs": 1,
        "runs": 1,
        "change": SuiteChange.NEW,
        **values,
    }
    with pytest.raises(IntegrityError), transaction.atomic():
        SuiteCase.objects.create(**row)


@pytest.mark.parametrize(
    "values",
    [
        {"alpha": 0.0},
        {"alpha": 1.0},
        {"ended_how": "finished"},
        {"ended_how": "halted", "end_reason": "why"},
        {"ended_how": "halted", "ended": True},
        {"ended_how": "finished", "end_reason": "why", "ended": True},
        {"ended_how": "", "ended": True},
        {"ended_how": "lost", "ended": True},
    ],
    ids=repr,
)
def test_database_refuses_a_run_breaking_its_constraints(
    business: Business, values: dict[str, Any]
) -> None:
    """Running has no end; an end is finished, or halted with a reason; 0 < alpha < 1."""
    row = {"business": business, "suites": ["smoke"], **values}
    if row.pop("ended", False):
        row["ended_at"] = timezone.now() + timedelta(seconds=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        SuiteRun.objects.create(**row)
