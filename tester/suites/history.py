"""A test run's stored history (`/api/suite-runs`), kept the same way by every client of it:
`mosaic-test` and the pytest plugin's `--mosaic-store`.

A stored run is started with its selection (the suites, the instances its cases are planned
on, its case selection), which is what `--compare last` matches; each case is recorded as it
ends (`reports.stored_record`) and takes the comparison the listener made of it; the run ends
finished, or halted with its reason, never left running.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from . import reports
from .client import ListenerError, TesterClient
from .runner import CaseReport, Plan


def planned_instances(planned: Sequence[Plan]) -> list[str]:
    """The instances the cases are planned on, sorted, "" for the business's default: with the
    suites and `-k`, what the listener's `--compare last` matches."""
    return sorted({plan.instance or "" for plan in planned})


def record(client: TesterClient, run_id: int, report: CaseReport) -> None:
    """Store one case of the run, and give `report` its stored id (what the listener's
    comparison of the run names it by) and the listener's comparison of it: its change, the
    p-value that rests on, and the baseline's `k/N`. A refusal is raised."""
    kept = client.record_case(run_id, reports.stored_record(report))
    report.case_id = kept["id"]
    report.change = kept["change"]
    report.p_value = kept.get("p_value")
    if kept.get("baseline_runs") is not None:
        report.baseline_tally = (kept["baseline_passed_runs"], kept["baseline_runs"])


def halt(client: TesterClient, run_id: int, reason: str) -> None:
    """End the stored test run `halted` with `reason`. A listener that cannot be reached leaves
    it running, for the listener to halt once it has been silent too long."""
    with contextlib.suppress(ListenerError):
        client.end_test_run(run_id, halted=reports.clipped(reason) or "halted")
