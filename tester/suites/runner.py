"""Running suites: each case once per instance, each of its repeats in a new tester thread.

A repeat is one independent execution of the case: a thread of its own, its turns in order,
each checked as it comes. A case's verdict is over its repeats (`verdict`): `pass` when every repeat
passed, `flaky` when some failed but at least `pass_rate` of them passed, `fail` below that, and
`error` when a repeat could not be judged (a listener's refusal, a judge that could not be
asked or gave no valid vote). Repeats and cases run side by side, `jobs` at a time.

A repeat keeps every turn it played, however it ended: a turn the judge could not grade is
kept with its reply and the votes the judge gave, and named as the repeat's `failed_turn`.

A refusal from the listener (`tester-off`, an unknown instance, an unreachable listener) is no
verdict on the assistant: it ends the test run, and what was not started is left unrun.

Each turn keeps the price of the model its reply recorded (the suite file's `[pricing]`, else
its instance's in the business file: `Costing`), so every report can tell what it cost. With
`max_cost` (`--max-cost`), no new turn is sent once the test run's known cost reaches it: a
repeat cut short has the problem `cost-limit` (its case is `error`), and a case none of whose
repeats started is not run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from .client import ListenerError, Outcome, TesterClient
from .costs import Budget, Price, Spend, TurnCost, turn_cost
from .definitions import definition_hash
from .expectation_keys import Expect
from .expectations import Checked, check_conversation, check_turn
from .files import Case, Suite
from .isolation import ThreadsHeard
from .judge import Judge, JudgeConfig, JudgeError, Transcript, Vote, heard, turn_transcript
from .matchers import Failure
from .statistics import pass_hat_k, wilson_interval

PASS = "pass"
FLAKY = "flaky"
FAIL = "fail"
ERROR = "error"
VERDICTS = (PASS, FLAKY, FAIL, ERROR)
RATE_ALLOWANCE = 5e-5
# The problem of a repeat `--max-cost` cut short.
COST_LIMIT = "cost-limit"


@dataclass(frozen=True)
class Problem:
    """Why a repeat has no verdict: the listener's refusal, or the judge's failure."""

    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True)
class TurnRecord:
    """One turn of a repeat: what was sent, what came, how fast, and how it was judged."""

    number: int
    # The turn's text; for a regenerated turn, the text asked again.
    sent: str
    outcome: Outcome
    failure: Failure | None = None
    votes: tuple[Vote, ...] = ()
    # A new version of the turn before, asked again (R24), not a message of its own.
    regenerated: bool = False
    # The price of the model its reply recorded; None: none is known.
    price: Price | None = None

    @property
    def cost(self) -> TurnCost:
        return turn_cost(self.outcome.reply, self.price)

    @property
    def turn_id(self) -> int:
        return int(self.outcome.turn["id"])

    @property
    def transcript(self) -> Transcript:
        reply = self.outcome.reply
        return turn_transcript(
            self.sent, steps=self.outcome.steps, reply=None if reply is None else reply.body
        )


@dataclass
class Repeat:
    """One execution of a case in its own thread; `number` counts from 1 within the case."""

    number: int
    thread: int | None = None
    instance: str = ""
    turns: list[TurnRecord] = field(default_factory=list)
    # The first expectation missed, and its turn (None: the conversation's own expectations);
    # the turn the judge could not grade, when that is the repeat's problem.
    failure: Failure | None = None
    failed_turn: int | None = None
    problem: Problem | None = None
    # The judge's votes over the whole conversation, or on the simulated user's goal.
    conversation_votes: tuple[Vote, ...] = ()
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.problem is None and self.failure is None

    @property
    def spend(self) -> Spend:
        return Spend.of(turn.cost for turn in self.turns)

    @property
    def transcript(self) -> list[tuple[str, str]]:
        """The conversation as the judge reads it: each turn, its steps and its reply, a
        version asked again in place of the one before (`path_transcript`)."""
        return path_transcript(self.turns)


def path_transcript(turns: Sequence[TurnRecord]) -> list[tuple[str, str]]:
    """The turns' conversation as the assistant was shown it, R24's path: a turn asked again
    stands in for the version before it, which is left out with its steps and reply."""
    return [
        said
        for index, turn in enumerate(turns)
        if index + 1 == len(turns) or not turns[index + 1].regenerated
        for said in turn.transcript
    ]


@dataclass(frozen=True)
class Plan:
    """A case to run on one instance (None: the business's default), `repeat` times."""

    suite: Suite
    case: Case
    instance: str | None
    repeat: int

    @property
    def title(self) -> str:
        return f"{self.suite.name} · {self.case.name}"

    @property
    def definition_hash(self) -> str:
        """The sha256 of what the case tests (`definitions`), stored to tell an edited case
        from a regressed one."""
        return definition_hash(self.suite, self.case)


@dataclass
class CaseReport:
    """A case on one instance: every repeat, the verdict over them, and (once stored) its
    stored case's id and how it compares with the baseline test run: its change, the p-value
    it rests on, and the baseline's `k/N`."""

    plan: Plan
    repeats: list[Repeat]
    verdict: str
    change: str | None = None
    p_value: float | None = None
    baseline_tally: tuple[int, int] | None = None
    case_id: int | None = None

    @property
    def instance(self) -> str:
        """The instance the case talked to, as its threads name it."""
        for repeat in self.repeats:
            if repeat.instance:
                return repeat.instance
        return self.plan.instance or ""

    @property
    def passed_repeats(self) -> int:
        return sum(repeat.passed for repeat in self.repeats)

    @property
    def repeat_count(self) -> int:
        return len(self.repeats)

    @property
    def pass_rate(self) -> float:
        return self.passed_repeats / self.repeat_count

    @property
    def interval(self) -> tuple[float, float]:
        """The pass rate's 95% Wilson interval."""
        return wilson_interval(self.passed_repeats, self.repeat_count)

    @property
    def pass_hat_k(self) -> float | None:
        """pass^k with k the case's `repeat` (None: fewer repeats ran)."""
        return pass_hat_k(self.passed_repeats, self.repeat_count, self.plan.repeat)

    @property
    def threads(self) -> list[int]:
        return [repeat.thread for repeat in self.repeats if repeat.thread is not None]

    @property
    def title(self) -> str:
        return self.plan.title

    @property
    def first_miss(self) -> Repeat | None:
        """The repeat that says why the verdict is what it is: for `error`, the first that
        could not be judged; else the first that did not pass."""
        if self.verdict == ERROR:
            return next((r for r in self.repeats if r.problem is not None), None)
        return next((repeat for repeat in self.repeats if not repeat.passed), None)

    @property
    def seconds(self) -> float:
        return sum(repeat.seconds for repeat in self.repeats)

    @property
    def spend(self) -> Spend:
        return sum((repeat.spend for repeat in self.repeats), Spend())


@dataclass
class TestRun:
    """The client's whole execution of the planned cases: a report per case and instance, the
    listener's refusal that ended it early, and the plans it never started."""

    # Not a test class, though pytest would take the name for one.
    __test__ = False

    reports: list[CaseReport] = field(default_factory=list)
    refusal: ListenerError | None = None
    not_run: list[Plan] = field(default_factory=list)
    # `--max-cost`, and whether the test run reached it, sending no turn after.
    max_cost: float | None = None
    max_cost_reached: bool = False

    def count(self, verdict: str) -> int:
        return sum(report.verdict == verdict for report in self.reports)

    @property
    def regressed(self) -> int:
        return sum(report.change == "regressed" for report in self.reports)

    @property
    def spend(self) -> Spend:
        return sum((report.spend for report in self.reports), Spend())


def verdict_of(repeats: Sequence[Repeat], pass_rate: float) -> str:
    if any(repeat.problem is not None for repeat in repeats):
        return ERROR
    passed = sum(repeat.passed for repeat in repeats)
    if passed == len(repeats):
        return PASS
    # An allowance below the gap between any two rates k/N (N ≤ 100), so 2 of 3 meets a
    # pass_rate written as 0.6667.
    if passed / len(repeats) >= pass_rate - RATE_ALLOWANCE:
        return FLAKY
    return FAIL


def selected(suites: Sequence[Suite], keyword: str | None) -> list[tuple[Suite, Case]]:
    """The cases to run: every case, or those whose `<suite> · <case>` contains `keyword`."""
    return [
        (suite, case)
        for suite in suites
        for case in suite.cases
        if keyword is None or keyword in f"{suite.name} · {case.name}"
    ]


def plans(
    suites: Sequence[Suite],
    *,
    keyword: str | None = None,
    repeat: int | None = None,
    instances: Sequence[str] = (),
) -> list[Plan]:
    """Each selected case once per instance: those given (`--instance`), else the case's own,
    else the suite's, else the default; `repeat` (`--repeat`) overrides every case's."""
    found: list[Plan] = []
    for suite, case in selected(suites, keyword):
        if instances:
            on: Sequence[str | None] = instances
        elif case.instance is not None:
            on = [case.instance]
        else:
            on = suite.instances or [None]
        found += [Plan(suite, case, instance, repeat or case.repeat) for instance in on]
    return found


class Judges:
    """One judge per configuration, shared by every case asking it (so what a judge learnt of
    its server, that it refuses JSON mode, holds for all of them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._judges: dict[JudgeConfig, Judge] = {}

    def of(self, suite: Suite) -> Judge | None:
        return None if suite.judge is None else self.configured(suite.judge)

    def configured(self, config: JudgeConfig) -> Judge:
        with self._lock:
            if config not in self._judges:
                self._judges[config] = Judge(config)
            return self._judges[config]


class OverBudget(Exception):
    """The test run reached `--max-cost`: no new turn is sent."""


@dataclass(frozen=True)
class Costing:
    """How a test run prices its turns: a suite file's `[pricing]` of the model a reply
    recorded, else the prices of the instance it answered on (`instance_prices`, the business
    file's); and `--max-cost`'s `budget`, which every turn's cost is counted against."""

    instance_prices: Mapping[str, Price] = field(default_factory=dict)
    budget: Budget | None = None

    def price_of(self, suite: Suite, reply: Any, instance: str) -> Price | None:
        if reply is None:
            return None
        price = suite.price_of(reply.model)
        return price if price is not None else self.instance_prices.get(instance)


def run_repeat(
    client: TesterClient,
    plan: Plan,
    *,
    project: int,
    number: int,
    judge: Judge | None,
    costing: Costing | None = None,
) -> Repeat:
    """Repeat `number` of `plan` in a new tester thread `<suite> · <case> · <UTC time>`; stops
    at its first failed expectation. A listener's refusal is raised; a judge's failure makes
    the repeat's problem, and so does `costing`'s budget reached before a turn is sent."""
    costing = costing or Costing()
    started = time.monotonic()
    repeat = Repeat(number)
    with client.new_thread(project=project, name=plan.title, instance=plan.instance) as thread:
        repeat.thread = thread.id
        repeat.instance = thread.instance
        try:
            if plan.case.simulate is not None:
                _simulate(thread, plan, repeat, judge, costing)
            else:
                _play(thread, plan, repeat, judge, costing)
        except JudgeError as error:
            repeat.problem = Problem("judge", str(error))
        except OverBudget as stop:
            repeat.problem = Problem(COST_LIMIT, str(stop))
    repeat.seconds = time.monotonic() - started
    return repeat


def _before_sending(budget: Budget | None, number: int) -> None:
    """Turn `number` is sent only while the test run is within `--max-cost`."""
    if budget is not None and budget.reached:
        raise OverBudget(f"{budget.told()} before turn {number} was sent")


def _record(
    plan: Plan,
    costing: Costing,
    repeat: Repeat,
    number: int,
    sent: str,
    outcome: Outcome,
    **more: Any,
) -> TurnRecord:
    """A turn as it came, priced (and counted against `--max-cost`) as `costing` says."""
    price = costing.price_of(plan.suite, outcome.reply, repeat.instance)
    record = TurnRecord(number, sent, outcome, price=price, **more)
    if costing.budget is not None:
        costing.budget.add(record.cost)
    return record


def _play(thread: Any, plan: Plan, repeat: Repeat, judge: Judge | None, costing: Costing) -> None:
    case = plan.case
    for number, turn in enumerate(case.turns, start=1):
        _before_sending(costing.budget, number)
        if turn.regenerate:
            # The turn before (the file's reader made sure there is one) asked again, in place.
            outcome = thread.ask_again(repeat.turns[-1].turn_id, within=turn.expect.within)
        else:
            outcome = thread.ask(turn.send, within=turn.expect.within)
        record = _record(
            plan, costing, repeat, number, turn.send, outcome, regenerated=turn.regenerate
        )
        transcript = path_transcript([*repeat.turns, record])
        try:
            checked = check_turn(
                turn.expect, outcome, transcript=transcript, judge=judge, price=record.price
            )
        except JudgeError as error:
            # The judged turn stays in every report, its reply beside the judge's failure; it
            # did not pass, lacking a verdict.
            missed = Failure("a verdict", str(error))
            repeat.turns.append(replace(record, failure=missed, votes=error.votes))
            repeat.failed_turn = number
            raise
        if not _took(repeat, record, checked):
            return
    _check_conversation(plan, repeat, judge, thread.heard)


def _simulate(
    thread: Any, plan: Plan, repeat: Repeat, judge: Judge | None, costing: Costing
) -> None:
    """The judge plays the user until it finds the goal met, or `max_turns` have passed."""
    simulate = plan.case.simulate
    assert simulate is not None and judge is not None  # the file's reader made sure
    for number in range(1, simulate.max_turns + 1):
        _before_sending(costing.budget, number)
        # The simulated user sees the replies only, as a person would; not the steps.
        said = judge.user_turn(
            persona=simulate.persona, goal=simulate.goal, transcript=heard(repeat.transcript)
        )
        outcome = thread.ask(said, within=simulate.within)
        # A simulated user's turn expects a reply, and nothing more of it.
        checked = check_turn(Expect(within=simulate.within), outcome)
        if not _took(repeat, _record(plan, costing, repeat, number, said, outcome), checked):
            return
        try:
            verdict = judge.goal_met(
                persona=simulate.persona, goal=simulate.goal, transcript=repeat.transcript
            )
        except JudgeError as error:
            repeat.conversation_votes = error.votes
            raise
        repeat.conversation_votes = verdict.votes
        if verdict.passed:
            _check_conversation(plan, repeat, judge, thread.heard, goal_votes=verdict.votes)
            return
    repeat.failure = Failure(
        f"the goal met within {simulate.max_turns} turns ({simulate.goal})",
        f"not met: {'; '.join(v.reason for v in repeat.conversation_votes if v.valid)}",
    )


def _took(repeat: Repeat, turn: TurnRecord, checked: Checked) -> bool:
    """Record one turn as it was checked; False when it failed, and the repeat ends there."""
    repeat.turns.append(replace(turn, failure=checked.failure, votes=checked.votes))
    if checked.failure is None:
        return True
    repeat.failure = checked.failure
    repeat.failed_turn = turn.number
    return False


def _check_conversation(
    plan: Plan,
    repeat: Repeat,
    judge: Judge | None,
    heard: ThreadsHeard,
    goal_votes: tuple[Vote, ...] = (),
) -> None:
    """The conversation's own expectations, `heard` the threads its client was told of."""
    transcript: Transcript = repeat.transcript
    try:
        checked = check_conversation(
            plan.case.expect_conversation,
            transcript=transcript,
            seconds=[turn.outcome.seconds for turn in repeat.turns],
            judge=judge,
            spend=repeat.spend,
            heard=heard,
        )
    except JudgeError as error:
        repeat.conversation_votes = goal_votes + error.votes
        raise
    repeat.conversation_votes = goal_votes + checked.votes
    repeat.failure = checked.failure


def run_plan(
    client: TesterClient,
    plan: Plan,
    *,
    project: int,
    judges: Judges | None = None,
    instance_prices: Mapping[str, Price] | None = None,
) -> CaseReport:
    """Every repeat of one plan, one after the other (the pytest plugin's way)."""
    judge = (judges or Judges()).of(plan.suite)
    costing = Costing(instance_prices or {})
    repeats = [
        run_repeat(client, plan, project=project, number=number, judge=judge, costing=costing)
        for number in range(1, plan.repeat + 1)
    ]
    return CaseReport(plan, repeats, verdict_of(repeats, plan.case.pass_rate))


def run_plans(
    planned: Sequence[Plan],
    client: TesterClient,
    *,
    jobs: int = 1,
    on_report: Callable[[CaseReport], None] = lambda report: None,
    max_cost: float | None = None,
    instance_prices: Mapping[str, Price] | None = None,
) -> TestRun:
    """One test run: every repeat of every plan, `jobs` at a time; reports in the plans' order,
    each handed to `on_report` as its last repeat ends (one at a time). Turns are priced at the
    suite files' `[pricing]`, else at `instance_prices`; with `max_cost`, no turn is sent once
    the known cost of those before reaches it."""
    test_run = TestRun(max_cost=max_cost)
    budget = Budget(max_cost) if max_cost is not None else None
    costing = Costing(instance_prices or {}, budget)
    try:
        projects = {name: client.project_id(name) for name in {p.suite.project for p in planned}}
    except ListenerError as refusal:
        test_run.refusal = refusal
        test_run.not_run = list(planned)
        return test_run
    judges = Judges()
    halted = threading.Event()
    lock = threading.Lock()
    repeats: list[list[Repeat | None]] = [[None] * plan.repeat for plan in planned]
    left = [plan.repeat for plan in planned]
    reports: dict[int, CaseReport] = {}

    def play(index: int, number: int) -> None:
        plan = planned[index]
        repeat: Repeat | None = None
        if not halted.is_set() and not (budget is not None and budget.reached):
            started = time.monotonic()
            try:
                repeat = run_repeat(
                    client,
                    plan,
                    project=projects[plan.suite.project],
                    number=number,
                    judge=judges.of(plan.suite),
                    costing=costing,
                )
            except ListenerError as refusal:
                halted.set()
                repeat = Repeat(number, problem=Problem(refusal.code, refusal.detail))
                repeat.seconds = time.monotonic() - started
                with lock:
                    test_run.refusal = test_run.refusal or refusal
        with lock:
            repeats[index][number - 1] = repeat
            left[index] -= 1
            if left[index]:
                return
            ran = [r for r in repeats[index] if r is not None]
            if not ran:
                return
            if len(ran) < plan.repeat and all(r.problem is None for r in ran):
                ran.append(Repeat(len(ran) + 1, problem=_cut_short(halted, budget)))
            report = CaseReport(plan, ran, verdict_of(ran, plan.case.pass_rate))
            reports[index] = report
            # One report at a time, whichever case ended.
            on_report(report)

    tasks = [
        (index, number)
        for index, plan in enumerate(planned)
        for number in range(1, plan.repeat + 1)
    ]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="case") as pool:
        try:
            list(pool.map(lambda task: play(*task), tasks))
        except BaseException:
            # Interrupted (Ctrl-C) or broken: the repeats not started are not started, and the
            # pool waits only for those under way.
            halted.set()
            raise
    test_run.reports = [reports[index] for index in sorted(reports)]
    test_run.not_run = [plan for index, plan in enumerate(planned) if index not in reports]
    test_run.max_cost_reached = budget is not None and budget.reached
    return test_run


HALTED = Problem("halted", "the test run was halted before every repeat of this case ran")


def _cut_short(halted: threading.Event, budget: Budget | None) -> Problem:
    """Why a case's repeats did not all run: the listener's refusal, or `--max-cost`."""
    if halted.is_set() or budget is None:
        return HALTED
    return Problem(COST_LIMIT, f"{budget.told()} before every repeat of this case ran")
