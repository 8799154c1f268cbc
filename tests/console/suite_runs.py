"""Stored test runs for the Console's tests and screenshots, written through the tester
listener as `manage.py testassistant` writes them: start, one record per case, end."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tester.suites import reports
from tester.suites.client import Outcome, Reply
from tester.suites.costs import Price
from tester.suites.files import Case, Suite
from tester.suites.judge import Vote
from tester.suites.matchers import Failure
from tester.suites.runner import CaseReport, Plan, Repeat, TurnRecord
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


# --- two runs whose replies a reviewer compares ----------------------------------------------

# What came in the regressed case's failing repeat: markup the Console must show as text.
HOSTILE_REPLY = "Goodbye <img src=x onerror=alert(1)> and a word far too long to fit: " + "x" * 300
REPLY_WAIT_SECONDS = 20.0


def answered_turn(
    api: LiveApi, model: Any, thread: int, sent: str, reply: str, *, passed: bool = True
) -> dict[str, Any]:
    """`sent` in `thread`, answered `reply` by the assistant (the fake model server `model`
    says it), waited for; the turn as a repeat's stored record names it."""
    model.content = reply
    turn = api.send(thread, sent)
    deadline = time.monotonic() + REPLY_WAIT_SECONDS
    while True:
        messages = api.get(f"/api/chat/threads/{thread}/messages?after={turn - 1}")["messages"]
        found = [m for m in messages if m["class"] == "RESULT" and m["in_reply_to"] == turn]
        if found:
            break
        assert time.monotonic() < deadline, f"no reply to turn {turn}"
        time.sleep(0.1)
    return {
        "turn": 1,
        "id": turn,
        "reply_id": found[0]["id"],
        "state": "answered",
        "passed": passed,
    }


def with_repeat(
    record: dict[str, Any], thread: dict[str, Any], turns: list[dict[str, Any]], *, passed: bool
) -> dict[str, Any]:
    """The record with one repeat kept, in `thread`, made of `turns`."""
    repeat = {"repeat": 1, "thread": thread["id"], "passed": passed, "turns": turns}
    return {**record, "repeats": [repeat]}


@dataclass(frozen=True)
class Compared:
    """A baseline and a run compared with it, in a project of their own: `greets` regressed
    (10/10 → 2/10, its replies "Hello!…" then `HOSTILE_REPLY`), `refuses` fixed (0/5 → 5/5),
    `thanks` the same."""

    suite: str
    first: dict[str, Any]
    second: dict[str, Any]
    old_greeting: str


def store_compared(api: LiveApi, model: Any) -> Compared:
    suite = unique("compared")
    project = api.create_project(unique("qa"))
    threads = {name: runner_thread(api, project, unique(name)) for name in ("a", "b", "c", "d")}
    old_greeting = "Hello! How can I help you today?"
    greeted = answered_turn(api, model, threads["a"]["id"], "hello", old_greeting)
    refused = answered_turn(api, model, threads["b"]["id"], "make a task", "Created", passed=False)
    regressed = answered_turn(api, model, threads["c"]["id"], "hello", HOSTILE_REPLY, passed=False)
    fixed = answered_turn(api, model, threads["d"]["id"], "make a task", "No task: I may not.")
    failed = failure(expected='contains "Hello"', actual=HOSTILE_REPLY)
    first = store_run(
        api,
        [suite],
        [
            with_repeat(
                case(suite, "greets", threads["a"], passed=10, runs=10),
                threads["a"],
                [greeted],
                passed=True,
            ),
            with_repeat(
                case(suite, "refuses", threads["b"], verdict="fail", passed=0, runs=5),
                threads["b"],
                [refused],
                passed=False,
            ),
            case(suite, "thanks", threads["a"]),
        ],
    )
    second = store_run(
        api,
        [suite],
        [
            with_repeat(
                case(
                    suite,
                    "greets",
                    threads["c"],
                    verdict="fail",
                    passed=2,
                    runs=10,
                    failures=[failed],
                ),
                threads["c"],
                [regressed],
                passed=False,
            ),
            with_repeat(
                case(suite, "refuses", threads["d"], passed=5, runs=5),
                threads["d"],
                [fixed],
                passed=True,
            ),
            case(suite, "thanks", threads["a"]),
        ],
        compare=first["id"],
    )
    return Compared(suite, first, second, old_greeting)


# --- a run whose cases cost something, or something unknown, and one the judge graded --------

# The judge's reason that is no verdict: markup to show as text, and a word too long for a phone.
INVALID_REASON = "I cannot say <b>why</b>: " + "w" * 300


def judged_and_priced_case(
    suite: Suite,
    name: str,
    thread: dict[str, Any],
    *,
    usage: dict[str, int] | None,
    price: Price | None = None,
    votes: tuple[Vote, ...] = (),
    conversation_votes: tuple[Vote, ...] = (),
    missed: Failure | None = None,
) -> dict[str, Any]:
    """The record `mosaic-test` stores (`reports.stored_record`) of a case of one repeat of one
    turn in `thread`, its reply's `usage` (None: the backend recorded none) at `price`, graded
    by the judge's `votes` and its `conversation_votes` on the whole conversation; it passed,
    or failed the conversation's expectation as `missed` says."""
    message: dict[str, Any] = {"id": 2, "model": "qwen", **({"usage": usage} if usage else {})}
    reply = Reply("Paris.", message, seconds=1.5, first_token_seconds=0.2)
    outcome = Outcome({"id": 1}, reply, "answered", None)
    turn = TurnRecord(1, "capital?", outcome, votes=votes, price=price)
    repeat = Repeat(
        1,
        thread["id"],
        thread["instance"],
        [turn],
        failure=missed,
        conversation_votes=conversation_votes,
    )
    case = Case(name=name, turns=(), instance=None, line=1)
    verdict = "pass" if missed is None else "fail"
    return reports.stored_record(CaseReport(Plan(suite, case, None, 1), [repeat], verdict))


@dataclass(frozen=True)
class Spent:
    """A run of three cases: `priced` (1,200 tokens in and 345 out at $2.50 and $10 a million:
    $0.00645), `unpriced` (its model has no price) and `judged` (no usage recorded; three votes
    on its turn, the second invalid, and one failing the whole conversation)."""

    suite: str
    run: dict[str, Any]


def store_spent(api: LiveApi) -> Spent:
    name = unique("spent")
    suite = Suite(name=name, project="qa", cases=(), file="spent.suite.toml")
    project = api.create_project(unique("qa"))
    threads = [runner_thread(api, project, unique(case)) for case in ("a", "b", "c")]
    records = [
        judged_and_priced_case(
            suite,
            "priced",
            threads[0],
            usage={"prompt_tokens": 1200, "completion_tokens": 345},
            price=Price(input=2.5, output=10.0),
        ),
        judged_and_priced_case(
            suite, "unpriced", threads[1], usage={"prompt_tokens": 50, "completion_tokens": 7}
        ),
        judged_and_priced_case(
            suite,
            "judged",
            threads[2],
            usage=None,
            votes=(Vote(True, "names Paris"), Vote(None, INVALID_REASON), Vote(True, "says Paris")),
            conversation_votes=(Vote(False, "rude at the end"),),
            missed=Failure("the judge passes the conversation (Polite.)", "the judge failed it"),
        ),
    ]
    return Spent(name, store_run(api, [name], records))
