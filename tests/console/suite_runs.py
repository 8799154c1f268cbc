"""Stored test runs for the Console's tests and screenshots, written through the tester
listener as `manage.py testassistant` writes them: start, one record per case, end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tester.suites.statistics import pass_hat_k, wilson_interval
from tests.console.api import LiveApi
from tests.console.pages import unique

# What came, in a failure: markup the Console must show as text.
HOSTILE = "<b>bold?</b> <img src=x onerror=alert(1)>"


def runner_thread(
    api: LiveApi, project: int, name: str, *, archived: bool = False
) -> dict[str, Any]:
    """A tester thread with one turn in it (the shape the list answers), archived as the runner
    archives the threads of passed repeats."""
    thread: dict[str, Any] = api.post("/api/chat/threads", {"project": project, "name": name})[
        "thread"
    ]
    api.send(int(thread["id"]), f"hello from {name}")
    if archived:
        thread = api.patch(f"/api/chat/threads/{thread['id']}", {"archived": True})["thread"]
    return thread


def case(
    suite: str,
    name: str,
    thread: dict[str, Any],
    *,
    verdict: str = "pass",
    passed: int = 1,
    runs: int = 1,
    failures: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One case's record, its threads the one given, with the statistics the runner sends."""
    return {
        "suite": suite,
        "case": name,
        "instance": thread["instance"],
        "verdict": verdict,
        "passed_runs": passed,
        "runs": runs,
        "threads": [thread["id"]],
        "failures": failures or [],
        "pass_rate": passed / runs,
        "interval": list(wilson_interval(passed, runs)),
        "pass_hat_k": pass_hat_k(passed, runs, runs),
    }


def failure(*, expected: str, actual: str, repeat: int = 1, turn: int | None = 1) -> dict[str, Any]:
    return {"repeat": repeat, "turn": turn, "sent": "hello", "expected": expected, "actual": actual}


def store_run(
    api: LiveApi,
    suites: list[str],
    cases: list[dict[str, Any]],
    *,
    compare: int | None = None,
    halted: str | None = None,
) -> dict[str, Any]:
    """A run of `suites` compared with run `compare` (None: no baseline), its cases recorded in
    order, ended (`halted`: with that reason); the run as the listener answers it."""
    run = api.post("/api/suite-runs", {"suites": suites, "compare": compare})["run"]
    for record in cases:
        api.post(f"/api/suite-runs/{run['id']}/cases", record)
    end = {} if halted is None else {"reason": halted}
    ended: dict[str, Any] = api.post(f"/api/suite-runs/{run['id']}/end", end)["run"]
    return ended


@dataclass(frozen=True)
class History:
    """Two runs of one suite in a project of their own: `first` without a baseline, `second`
    compared with it."""

    suite: str
    project: int
    passed_thread: dict[str, Any]  # archived, as the runner leaves a passed repeat's thread
    failed_thread: dict[str, Any]
    first: dict[str, Any]
    second: dict[str, Any]


def store_history(api: LiveApi) -> History:
    """Run 1: `greets` passed 10/10 (its thread archived), `refuses` failed 0/5 with `HOSTILE`
    as what came first. Run 2, against run 1: `greets` fails 2/10 (regressed, p = 0.00036),
    `refuses` passes 5/5 (fixed, p = 0.004), `remembers` is new."""
    suite = unique("smoke")
    project = api.create_project(unique("qa"))
    passed = runner_thread(api, project, unique("greets"), archived=True)
    failed = runner_thread(api, project, unique("refuses"))
    first = store_run(
        api,
        [suite],
        [
            case(suite, "greets", passed, passed=10, runs=10),
            case(
                suite,
                "refuses",
                failed,
                verdict="fail",
                passed=0,
                runs=5,
                failures=[
                    failure(expected='contains "No task"', actual=HOSTILE),
                    failure(expected='contains "No task"', actual="Created task", repeat=2),
                ],
            ),
        ],
    )
    second = store_run(
        api,
        [suite],
        [
            case(
                suite,
                "greets",
                failed,
                verdict="fail",
                passed=2,
                runs=10,
                failures=[failure(expected="matches (?i)hello", actual="Goodbye", turn=None)],
            ),
            case(suite, "refuses", passed, passed=5, runs=5),
            case(suite, "remembers", passed),
        ],
        compare=first["id"],
    )
    return History(suite, project, passed, failed, first, second)
