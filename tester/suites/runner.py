"""Running suites: each case in a new tester thread, its turns in order, cases side by side.

A refusal from the listener (`tester-off`, an unknown instance, an unreachable listener) is no
verdict on the assistant: it ends the run, cases not yet started are left unrun, and the caller
reports it apart from the cases' results.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tester.suites.client import ListenerError, TesterClient
from tester.suites.expectations import Failure, first_failure
from tester.suites.files import Case, Suite

PASSED = "passed"
FAILED = "failed"
ERROR = "error"


@dataclass(frozen=True)
class CaseResult:
    suite: Suite
    case: Case
    status: str
    seconds: float
    thread: int | None = None
    # Where it failed: the turn (1-based), what it sent, what was expected and what came.
    turn: int | None = None
    sent: str | None = None
    failure: Failure | None = None
    # For ERROR: the listener's refusal.
    refusal: ListenerError | None = None

    @property
    def title(self) -> str:
        return f"{self.suite.name} · {self.case.name}"


@dataclass
class Run:
    results: list[CaseResult] = field(default_factory=list)
    refusal: ListenerError | None = None
    not_run: int = 0

    @property
    def failed(self) -> int:
        return sum(result.status == FAILED for result in self.results)

    @property
    def passed(self) -> int:
        return sum(result.status == PASSED for result in self.results)


def selected(suites: Sequence[Suite], keyword: str | None) -> list[tuple[Suite, Case]]:
    """The cases to run: every case, or those whose `<suite> · <case>` contains `keyword`."""
    return [
        (suite, case)
        for suite in suites
        for case in suite.cases
        if keyword is None or keyword in f"{suite.name} · {case.name}"
    ]


def run_case(client: TesterClient, suite: Suite, case: Case, *, project: int) -> CaseResult:
    """One case in a new tester thread `<suite> · <case> · <UTC time>`; stops at its first
    failed expectation. A listener's refusal is raised."""
    started = time.monotonic()
    with client.new_thread(
        project=project, name=f"{suite.name} · {case.name}", instance=case.instance
    ) as thread:
        for number, turn in enumerate(case.turns, start=1):
            outcome = thread.ask(turn.send, within=turn.expect.within)
            failure = first_failure(turn.expect, outcome)
            if failure is not None:
                return CaseResult(
                    suite,
                    case,
                    FAILED,
                    time.monotonic() - started,
                    thread=thread.id,
                    turn=number,
                    sent=turn.send,
                    failure=failure,
                )
        return CaseResult(suite, case, PASSED, time.monotonic() - started, thread=thread.id)


def run_suites(
    suites: Sequence[Suite],
    client: TesterClient,
    *,
    jobs: int = 1,
    keyword: str | None = None,
    on_result: Callable[[CaseResult], None] = lambda result: None,
) -> Run:
    """Run the selected cases, `jobs` at a time; results in the files' order."""
    cases = selected(suites, keyword)
    run = Run()
    try:
        projects = {name: client.project_id(name) for name in {s.project for s, _ in cases}}
    except ListenerError as refusal:
        run.refusal = refusal
        run.not_run = len(cases)
        return run
    halted = threading.Event()
    lock = threading.Lock()

    def play(suite: Suite, case: Case) -> CaseResult | None:
        if halted.is_set():
            return None
        started = time.monotonic()
        try:
            result = run_case(client, suite, case, project=projects[suite.project])
        except ListenerError as refusal:
            halted.set()
            with lock:
                run.refusal = run.refusal or refusal
            result = CaseResult(suite, case, ERROR, time.monotonic() - started, refusal=refusal)
        with lock:
            # One line at a time, whichever case finished.
            on_result(result)
        return result

    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="case") as pool:
        played = list(pool.map(lambda pair: play(*pair), cases))
    run.results = [result for result in played if result is not None]
    run.not_run = len(played) - len(run.results)
    return run
