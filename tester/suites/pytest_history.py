"""A pytest session's suite-file cases stored as one test run (`--mosaic-store`), so history,
`--mosaic-compare` and the tester Console's **Test runs** see a pytest session as they see a
run of `mosaic-test`.

The run is started when the session's first case runs, with the selection `--compare last`
matches: the suites of the suite files collected, the instances the selected cases are planned
on, and as the keyword either none (every collected case is selected, as a run of
`mosaic-test` over the same files) or a label naming the selection (`selection_label`), so a
partial session is never the baseline of a full one, nor a full one of it. Each case is recorded
as it ends, as `mosaic-test` records it (`history.record`). At the session's end the run is
finished; halted, with why, when the session was interrupted, stopped before every selected case
ran (`-x`, `--maxfail`), the listener refused the run, or the client failed.

Tests written with the `mosaic_tester` fixture are pytest's own: they are not stored.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import Any

from . import reports
from .client import ListenerError, TesterClient
from .history import halt, planned_instances, record
from .runner import CaseReport, Plan, TestRun

INTERRUPTED = "interrupted: the pytest session was stopped (Ctrl-C)"


def selection_label(selected: Sequence[Plan], every: Sequence[Plan]) -> str | None:
    """The keyword of a session's selection: None when it selects every case of its suite
    files; else its size and a digest of the cases and instances it selected, the same for the
    same selection in every session."""
    chosen = sorted({(plan.title, plan.instance or "") for plan in selected})
    if chosen == sorted({(plan.title, plan.instance or "") for plan in every}):
        return None
    digest = hashlib.sha256(repr(chosen).encode("utf-8")).hexdigest()[:12]
    return f"pytest: {len(chosen)} of {len(every)} cases #{digest}"


class SessionRun:
    """The session's stored test run: started once, each case recorded, ended once."""

    def __init__(self, *, compare: str | int | None, alpha: float) -> None:
        self.compare = compare
        self.alpha = alpha
        self.client: TesterClient | None = None
        self.stored: dict[str, Any] | None = None
        # Why the run is no longer kept, as the terminal tells it (halted, its start or end
        # refused; "" once it finished); None while it is.
        self.stopped: str | None = None
        self.reports: list[CaseReport] = []
        self.planned: list[Plan] = []
        self.started_at = time.monotonic()

    @property
    def keeping(self) -> bool:
        return self.stopped is None

    @property
    def waiting(self) -> bool:
        """Not started yet, and still to be."""
        return self.stored is None and self.keeping

    def start(self, client: TesterClient, selected: Sequence[Plan], every: Sequence[Plan]) -> None:
        """Start the stored run, once, before the first case runs: `selected` are the session's
        cases, `every` those of the suite files it collected. A refusal is raised, and nothing
        is stored after it."""
        if not self.waiting:
            return
        self.client = client
        self.planned = list(selected)
        self.started_at = time.monotonic()
        try:
            self.stored = client.start_test_run(
                suites=sorted({plan.suite.name for plan in every}),
                compare=self.compare,
                alpha=self.alpha,
                instances=planned_instances(selected),
                keyword=selection_label(selected, every),
            )
        except ListenerError as refusal:
            self.stopped = f"the test run was not stored: {refusal}"
            raise

    def _open(self) -> tuple[TesterClient, int] | None:
        """The client and the run's id while the run is kept: None before it started, and once
        it was refused, halted or ended."""
        if self.stored is None or self.client is None or not self.keeping:
            return None
        return self.client, int(self.stored["id"])

    def record(self, report: CaseReport) -> None:
        """Record one case as `mosaic-test` does; a refusal halts the run and is raised."""
        opened = self._open()
        if opened is None:
            return
        try:
            record(*opened, report)
        except ListenerError as refusal:
            self.halt(str(refusal))
            raise
        self.reports.append(report)

    def halt(self, reason: str) -> None:
        """End the run halted with `reason`; nothing is recorded after."""
        opened = self._open()
        if opened is None:
            return
        self.stopped = f"the test run was halted: {reason}"
        halt(*opened, reason)

    def end(self, *, interrupted: bool, unreached: int, stopped_early: str | None) -> None:
        """The session is over: the run finished, or halted with why it could not finish."""
        opened = self._open()
        if opened is None:
            return
        if interrupted:
            self.halt(INTERRUPTED)
        elif unreached and stopped_early:
            self.halt(
                f"the pytest session stopped early ({stopped_early}): {unreached} of "
                f"{len(self.planned)} cases not run"
            )
        else:
            client, run_id = opened
            try:
                ended = client.end_test_run(run_id)
            except ListenerError as refusal:
                self.stopped = f"the test run could not be ended: {refusal}"
                return
            # Ended: nothing more is kept, and nothing is halted after.
            self.stopped = ""
            if ended.get("state") == "halted":
                # The listener halted it first: silent past its limit.
                self.stopped = f"the test run was halted by the listener: {ended['reason']}"

    def told(self) -> list[str]:
        """What the terminal says of the run at the session's end: each stored case as
        `mosaic-test` tells it, the notes, and the summary naming the run; or why it was not
        kept."""
        if self.stored is None:
            return [self.stopped] if self.stopped else []
        baseline = self.stored.get("baseline") if self.compare is not None else None
        several = len({plan.instance for plan in self.planned}) > 1
        test_run = TestRun(reports=list(self.reports))
        lines = []
        if baseline is not None:
            lines.append(reports.too_few_repeats_note(self.planned, self.alpha))
        lines += [
            reports.line(report, with_instance=several, compared=self.compare is not None)
            for report in self.reports
        ]
        lines.append(reports.coverage_note(test_run, baseline))
        seconds = time.monotonic() - self.started_at
        lines.append(
            reports.summary(test_run, seconds, run_id=self.stored["id"], baseline=baseline)
        )
        lines.append(self.stopped)
        return [line for line in lines if line]
