"""The suite runs' shapes: the planned reading writes what DRF's own reading writes."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from broker.actions import suite_runs
from broker.actors import Actor
from chat.api.shapes import Shape
from tester.shapes import SuiteCaseOut, SuiteRunOut
from tests.broker import factories
from tests.support.suite_runs import CASE_COST


def drf_reading(shape: type[Shape[Any]], instance: Any) -> dict[str, Any]:
    return dict(serializers.Serializer.to_representation(shape(), instance))


def test_planned_reading_equals_drf_reading_for_runs_and_cases(human: Actor, tester: Actor) -> None:
    """A run open and ended, with and without a baseline; a case with and without failures,
    without a cost and with one."""
    thread = factories.thread(tester, factories.project(human), "smoke · greets")
    baseline = suite_runs.start_suite_run(tester, suites=["smoke"])
    suite_runs.end_suite_run(tester, run_id=baseline.pk)
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare=baseline.pk)
    failed = suite_runs.record_suite_case(
        tester,
        run_id=run.pk,
        suite="smoke",
        case="greets",
        instance="assistant",
        verdict="fail",
        passed_runs=0,
        runs=1,
        threads=[thread.pk],
        failures=[{"repeat": 1, "turn": None, "sent": None, "expected": "a reply", "actual": ""}],
        attempts=[{"thread": thread.pk, "ms": [1.5], "judge": None}],
    )
    passed = suite_runs.record_suite_case(
        tester,
        run_id=run.pk,
        suite="smoke",
        case="thanks",
        instance="assistant",
        verdict="pass",
        passed_runs=1,
        runs=1,
        cost=CASE_COST,
    )
    rows: list[tuple[type[Shape[Any]], Any]] = [
        *((SuiteRunOut, each) for each in suite_runs.list_suite_runs(tester)),
        (SuiteCaseOut, failed),
        (SuiteCaseOut, passed),
    ]
    for shape, instance in rows:
        assert shape(instance).data == drf_reading(shape, instance), (shape.__name__, instance)
    written = SuiteRunOut(suite_runs.list_suite_runs(tester)[0]).data
    assert (written["baseline"], written["ended_at"], written["counts"]["fail"]) == (
        baseline.pk,
        None,
        1,
    )
