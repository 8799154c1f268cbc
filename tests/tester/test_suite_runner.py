"""The runner (`tester.suites.runner`): verdicts, plans, and test runs over a stand-in listener
and a stand-in judge (pure: no server, no model)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tester.suites.client import ListenerError, Outcome
from tester.suites.costs import Price, Spend
from tester.suites.expectation_keys import Expect
from tester.suites.expectations import Failure
from tester.suites.files import Case, Simulate, Suite, Turn
from tester.suites.judge import ASSISTANT, USER, JudgeError, Vote
from tester.suites.runner import (
    COST_LIMIT,
    ERROR,
    FAIL,
    FLAKY,
    HALTED,
    PASS,
    Problem,
    Repeat,
    TestRun,
    TurnRecord,
    path_transcript,
    plans,
    run_plans,
    selected,
    verdict_of,
)
from tests.support.stand_ins import (
    StandIn,
    StandInJudge,
    StandInThread,
    answered,
    client_of,
    run_one,
    unanswered,
    write_suite,
)

# How long a stand-in waits for what should already have happened: only a broken runner
# waits this long, and then the test fails.
WAIT = 10.0


# --- verdicts ---------------------------------------------------------------------------------


def repeats_of(letters: str) -> list[Repeat]:
    """`P` passed, `F` failed, `E` an error (a problem), one letter per repeat."""
    made = []
    for number, letter in enumerate(letters, start=1):
        repeat = Repeat(number)
        if letter == "F":
            repeat.failure = Failure("x", "y")
        elif letter == "E":
            repeat.problem = Problem("judge", "the judge did not answer")
        made.append(repeat)
    return made


@pytest.mark.parametrize(
    ("letters", "pass_rate", "verdict"),
    [
        ("P", 1.0, PASS),
        ("PPP", 0.5, PASS),
        ("F", 1.0, FAIL),
        ("F", 0.01, FAIL),
        ("PFPF", 0.5, FLAKY),
        ("PFPF", 1.0, FAIL),
        ("PFPF", 0.51, FAIL),
        ("PPF", 0.6667, FLAKY),
        ("PPF", 0.67, FAIL),
        ("PPPPPPPPPF", 0.9, FLAKY),
        ("FFP", 0.3, FLAKY),
        ("FFP", 0.34, FAIL),
        # Any repeat without a verdict makes the case an error, whatever the others did.
        ("PPE", 0.1, ERROR),
        ("EPP", 0.1, ERROR),
        ("FE", 1.0, ERROR),
    ],
)
def test_verdict_of_repeats_against_pass_rate(letters: str, pass_rate: float, verdict: str) -> None:
    assert verdict_of(repeats_of(letters), pass_rate) == verdict


# --- plans ------------------------------------------------------------------------------------


def case(name: str, *, instance: str | None = None, repeat: int = 1) -> Case:
    return Case(name, (Turn("hi", Expect(), 3),), instance, line=1, repeat=repeat)


def a_suite(*cases: Case, instances: tuple[str, ...] = (), name: str = "s") -> Suite:
    return Suite(name, "p", cases, f"{name}.suite.toml", instances)


@pytest.mark.parametrize(
    ("suite_instances", "case_instance", "given", "on"),
    [
        ((), None, [], [None]),
        (("a", "b"), None, [], ["a", "b"]),
        (("a", "b"), "own", [], ["own"]),
        ((), "own", [], ["own"]),
        (("a", "b"), "own", ["x"], ["x"]),
        ((), None, ["x", "y"], ["x", "y"]),
        (("a",), "own", ["x", "y"], ["x", "y"]),
    ],
)
def test_plans_take_instance_from_option_then_case_then_suite_then_default(
    suite_instances: tuple[str, ...],
    case_instance: str | None,
    given: list[str],
    on: list[str | None],
) -> None:
    suites = [a_suite(case("c", instance=case_instance), instances=suite_instances)]
    assert [plan.instance for plan in plans(suites, instances=given)] == on


def test_plans_one_per_case_and_instance_in_the_files_order() -> None:
    suites = [
        a_suite(case("first", instance="own"), case("second"), instances=("a", "b")),
        a_suite(case("third"), name="t"),
    ]
    assert [(plan.title, plan.instance) for plan in plans(suites)] == [
        ("s · first", "own"),
        ("s · second", "a"),
        ("s · second", "b"),
        ("t · third", None),
    ]


@pytest.mark.parametrize(("given", "repeats"), [(None, [1, 5]), (7, [7, 7]), (1, [1, 1])])
def test_plans_repeat_option_overrides_every_cases_repeat(
    given: int | None, repeats: list[int]
) -> None:
    suites = [a_suite(case("once"), case("five", repeat=5))]
    assert [plan.repeat for plan in plans(suites, repeat=given)] == repeats


def test_selected_keeps_cases_whose_suite_and_name_contain_the_keyword() -> None:
    suites = [a_suite(*(case(f"case {n}") for n in range(12)))]
    assert [c.name for _, c in selected(suites, "case 1")] == ["case 1", "case 10", "case 11"]
    assert len(selected(suites, "s · ")) == 12
    assert len(selected(suites, None)) == 12
    assert [p.case.name for p in plans(suites, keyword="case 2")] == ["case 2"]


def test_selected_picks_a_datasets_rows_by_their_names(tmp_path: Path) -> None:
    """Each row is a case named from its values: -k selects rows as it selects cases."""
    text = (
        'name = "s"\nproject = "p"\n[[cases]]\nname = "refund"\n'
        'vars = [{ country = "FR" }, { country = "DE" }, { country = "FRA" }]\n'
        '[[cases.turns]]\nsend = "refund in {country}"\n'
    )
    suites = [write_suite(tmp_path, text)]
    assert [p.case.name for p in plans(suites, keyword="country=FR")] == [
        "refund [country=FR]",
        "refund [country=FRA]",
    ]
    assert [p.case.name for p in plans(suites, keyword="[country=DE]")] == ["refund [country=DE]"]
    assert len(plans(suites, keyword="refund")) == 3


# --- running over a stand-in listener ---------------------------------------------------------


def cases_text(cases: int, turns: int = 1, repeat: int = 1) -> str:
    return 'name = "s"\nproject = "p"\n' + "".join(
        f'[[cases]]\nname = "case {c}"\nrepeat = {repeat}\n'
        + "".join(f'[[cases.turns]]\nsend = "turn {t}"\n' for t in range(turns))
        for c in range(cases)
    )


def run(stand_in: StandIn, suite: Suite, **options: Any) -> TestRun:
    return run_plans(plans([suite]), client_of(stand_in), **options)


def test_run_plans_sends_turns_in_order_and_stops_a_repeat_at_its_first_failure(
    tmp_path: Path,
) -> None:
    stand_in = StandIn(
        lambda thread, body: unanswered("pending") if body == "turn 1" else answered("ok")
    )
    done = run(stand_in, write_suite(tmp_path, cases_text(1, turns=3)))
    [report] = done.reports
    [repeat] = report.repeats
    assert (report.verdict, report.passed_repeats, report.repeat_count) == (FAIL, 0, 1)
    assert (repeat.failed_turn, repeat.failure) == (
        2,
        Failure("a reply within 30 s", "no reply within 30 s (the turn is pending)"),
    )
    assert [turn.sent for turn in repeat.turns] == ["turn 0", "turn 1"]
    assert [body for _, body in stand_in.sent] == ["turn 0", "turn 1"]
    assert (stand_in.threads, stand_in.projects) == ([("s · case 0", None)], ["p"])
    assert (repeat.thread, repeat.instance, done.not_run, done.refusal) == (
        1,
        "assistant",
        [],
        None,
    )


def test_run_plans_runs_each_repeat_in_a_thread_of_its_own(tmp_path: Path) -> None:
    """Repeats alternate pass and fail: 2 of 4 at pass_rate 0.5 is flaky."""
    text = cases_text(1, turns=2, repeat=4).replace("repeat = 4", "repeat = 4\npass_rate = 0.5")
    stand_in = StandIn(lambda thread, body: answered("ok" if thread.id % 2 else "no"))
    suite = write_suite(
        tmp_path, text.replace('send = "turn 1"', 'send = "turn 1"\nexpect = { contains = ["ok"] }')
    )
    [report] = run(stand_in, suite).reports
    assert (report.verdict, report.passed_repeats, report.repeat_count, report.threads) == (
        FLAKY,
        2,
        4,
        [1, 2, 3, 4],
    )
    assert [repeat.passed for repeat in report.repeats] == [True, False, True, False]
    assert [len(repeat.turns) for repeat in report.repeats] == [2, 2, 2, 2]
    assert [thread for thread, _ in stand_in.sent] == [1, 1, 2, 2, 3, 3, 4, 4]


def test_run_plans_runs_a_case_on_each_instance(tmp_path: Path) -> None:
    text = cases_text(1).replace('project = "p"\n', 'project = "p"\ninstances = ["a", "b"]\n')
    stand_in = StandIn(lambda thread, body: answered(f"from {thread.instance}"))
    done = run(stand_in, write_suite(tmp_path, text))
    assert [(r.instance, r.verdict) for r in done.reports] == [("a", PASS), ("b", PASS)]
    assert stand_in.threads == [("s · case 0", "a"), ("s · case 0", "b")]


def test_run_plans_with_jobs_runs_repeats_at_once(tmp_path: Path) -> None:
    """Each repeat's turn is answered only once both repeats have sent theirs: with --jobs 2
    they pass; run one after the other, the first would wait in vain."""
    both_sent = threading.Barrier(2, timeout=WAIT)

    def answer(thread: StandInThread, body: str) -> Outcome:
        try:
            both_sent.wait()
        except threading.BrokenBarrierError:
            return unanswered("pending")
        return answered("ok")

    reported: list[str] = []
    done = run(
        StandIn(answer),
        write_suite(tmp_path, cases_text(1, repeat=2)),
        jobs=2,
        on_report=lambda report: reported.append(report.verdict),
    )
    [report] = done.reports
    assert (report.verdict, report.passed_repeats, sorted(report.threads)) == (PASS, 2, [1, 2])
    assert reported == [PASS]


def test_run_plans_with_jobs_reports_in_the_plans_order(tmp_path: Path) -> None:
    """Case 0 ends last (its turn waits for case 1's), yet comes first in the test run."""
    second_sent = threading.Event()

    def answer(thread: StandInThread, body: str) -> Outcome:
        if thread.name == "s · case 1":
            second_sent.set()
        elif not second_sent.wait(WAIT):
            return unanswered("pending")
        return answered("ok")

    ended: list[str] = []
    done = run(
        StandIn(answer),
        write_suite(tmp_path, cases_text(2)),
        jobs=2,
        on_report=lambda report: ended.append(report.plan.case.name),
    )
    assert [(r.plan.case.name, r.verdict) for r in done.reports] == [
        ("case 0", PASS),
        ("case 1", PASS),
    ]
    assert ended == ["case 1", "case 0"]


def test_run_plans_halts_on_a_listener_refusal_and_leaves_the_rest_not_run(
    tmp_path: Path,
) -> None:
    """A refusal is no verdict on the assistant: it ends the test run, later cases are not run."""

    def answer(thread: StandInThread, body: str) -> Outcome:
        raise ListenerError("tester-off", "The tester is off for this business.")

    stand_in = StandIn(answer)
    suite = write_suite(tmp_path, cases_text(3, repeat=2))
    done = run(stand_in, suite)
    [report] = done.reports
    assert (report.plan.case.name, report.verdict, report.repeat_count) == ("case 0", ERROR, 1)
    assert report.repeats[0].problem == Problem(
        "tester-off", "The tester is off for this business."
    )
    assert done.refusal is not None and done.refusal.code == "tester-off"
    assert [plan.case.name for plan in done.not_run] == ["case 1", "case 2"]
    assert len(stand_in.sent) == 1


def test_run_plans_repeat_cut_off_by_a_halt_is_an_error_not_a_pass(tmp_path: Path) -> None:
    """Case 1's first repeat passes while case 0 is refused; its second is never run. A case
    with only some of its repeats run has no verdict on the assistant."""
    case_0_reported = threading.Event()
    case_1_asked = threading.Event()

    def answer(thread: StandInThread, body: str) -> Outcome:
        if thread.name == "s · case 0":
            case_1_asked.wait(WAIT)
            raise ListenerError("not-found", "No instance by that name.")
        case_1_asked.set()
        case_0_reported.wait(WAIT)
        return answered("ok")

    text = cases_text(2).replace('name = "case 1"\nrepeat = 1', 'name = "case 1"\nrepeat = 2')
    done = run(
        StandIn(answer),
        write_suite(tmp_path, text),
        jobs=2,
        on_report=lambda report: case_0_reported.set(),
    )
    refused, cut_off = done.reports
    assert (refused.verdict, cut_off.verdict, done.not_run) == (ERROR, ERROR, [])
    assert [(r.number, r.passed, r.problem) for r in cut_off.repeats] == [
        (1, True, None),
        (2, False, HALTED),
    ]


def test_run_plans_refused_project_runs_nothing(tmp_path: Path) -> None:
    stand_in = StandIn(lambda thread, body: answered("hi"))

    def refuse(name: str) -> int:
        raise ListenerError("unreachable", "the tester listener did not answer")

    stand_in.project_id = refuse  # type: ignore[method-assign]
    suite = write_suite(tmp_path, cases_text(2))
    done = run(stand_in, suite)
    assert (done.reports, done.not_run, stand_in.sent) == ([], plans([suite]), [])
    assert done.refusal is not None and done.refusal.code == "unreachable"


# --- what turns cost, and --max-cost ---------------------------------------------------------

PRICING = "[pricing.gpt-x]\ninput = 2.5\noutput = 10\n"
# 1,000 tokens in and 200 out: $0.0045 a turn at gpt-x's prices.
USED = {"usage": {"prompt_tokens": 1000, "completion_tokens": 200}, "model": "gpt-x"}


def priced_text(cases: int, turns: int = 1, repeat: int = 1) -> str:
    return cases_text(cases, turns, repeat).replace('project = "p"\n', f'project = "p"\n{PRICING}')


def test_run_plans_prices_each_turn_at_the_model_its_reply_recorded(tmp_path: Path) -> None:
    def answer(thread: StandInThread, body: str) -> Outcome:
        if body == "turn 0":
            return answered("ok", **USED)
        if body == "turn 1":
            return answered("ok", **(USED | {"model": "unpriced"}))
        return answered("ok")

    done = run(StandIn(answer), write_suite(tmp_path, priced_text(1, turns=3)))
    [repeat] = done.reports[0].repeats
    assert [turn.price for turn in repeat.turns] == [Price(2.5, 10.0), None, None]
    assert [turn.cost.amount for turn in repeat.turns] == [0.0045, None, None]
    assert done.spend == Spend(3, 2000, 400, 0.0045, without_usage=1, without_price=1)
    assert (done.max_cost, done.max_cost_reached) == (None, False)


def test_run_plans_prices_a_model_the_suite_does_not_at_its_instances_price(
    tmp_path: Path,
) -> None:
    """The suite file's price of the recorded model first; else the business file's price of
    the instance the reply came from; else none."""
    text = priced_text(1).replace('project = "p"\n', 'project = "p"\ninstances = ["a", "b"]\n')
    stand_in = StandIn(
        lambda thread, body: answered("ok", **(USED | {"model": f"model-{thread.instance}"}))
    )
    prices = {"a": Price(0.0, 100.0), "c": Price(1.0, 1.0)}
    done = run(stand_in, write_suite(tmp_path, text), instance_prices=prices)
    assert [r.repeats[0].turns[0].price for r in done.reports] == [Price(0.0, 100.0), None]
    text = text.replace("[pricing.gpt-x]", '[pricing."model-a"]')
    done = run(stand_in, write_suite(tmp_path, text), instance_prices=prices)
    assert [r.repeats[0].turns[0].price for r in done.reports] == [Price(2.5, 10.0), None]


@pytest.mark.parametrize(
    ("max_cost", "verdicts", "sent", "not_run"),
    [
        # Turn 1 costs $0.0045: at $0.004 the limit is reached, and turn 2 is never sent.
        (0.004, [ERROR], 1, ["case 1", "case 2"]),
        # Turn 2 is sent at $0.0045 of $0.008; at $0.009, no later case starts.
        (0.008, [PASS], 2, ["case 1", "case 2"]),
        (0.05, [PASS, PASS, PASS], 6, []),
    ],
)
def test_run_plans_with_max_cost_sends_no_turn_once_it_is_reached(
    tmp_path: Path, max_cost: float, verdicts: list[str], sent: int, not_run: list[str]
) -> None:
    stand_in = StandIn(lambda thread, body: answered("ok", **USED))
    done = run(stand_in, write_suite(tmp_path, priced_text(3, turns=2)), max_cost=max_cost)
    assert [report.verdict for report in done.reports] == verdicts
    assert (len(stand_in.sent), [plan.case.name for plan in done.not_run]) == (sent, not_run)
    assert (done.max_cost, done.max_cost_reached) == (max_cost, bool(not_run))
    if verdicts == [ERROR]:
        [cut] = done.reports[0].repeats
        assert cut.problem == Problem(
            COST_LIMIT,
            "the test run reached --max-cost $0.004 ($0.0045 counted) before turn 2 was sent",
        )
        assert (len(cut.turns), cut.failed_turn) == (1, None)


def test_run_plans_with_max_cost_cuts_a_cases_later_repeats_as_an_error(tmp_path: Path) -> None:
    """Two repeats of three ran and passed before the limit: the case has no verdict."""
    stand_in = StandIn(lambda thread, body: answered("ok", **USED))
    done = run(stand_in, write_suite(tmp_path, priced_text(1, repeat=3)), max_cost=0.008)
    [report] = done.reports
    assert report.verdict == ERROR
    assert [(r.number, r.passed, r.problem) for r in report.repeats] == [
        (1, True, None),
        (2, True, None),
        (
            3,
            False,
            Problem(
                COST_LIMIT,
                "the test run reached --max-cost $0.008 ($0.009 counted) before every repeat of "
                "this case ran",
            ),
        ),
    ]


def test_run_plans_max_cost_cannot_count_turns_without_usage(tmp_path: Path) -> None:
    """A turn whose cost is unknown adds nothing to the budget: it is counted as unknown."""
    stand_in = StandIn(lambda thread, body: answered("ok"))
    done = run(stand_in, write_suite(tmp_path, priced_text(2)), max_cost=0.0001)
    assert [report.verdict for report in done.reports] == [PASS, PASS]
    assert (done.max_cost_reached, done.spend.without_usage) == (False, 2)


# --- the judge in a repeat --------------------------------------------------------------------

JUDGE = '[judge]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
SIMULATED = (
    f'name = "s"\nproject = "p"\n{JUDGE}\n[[cases]]\nname = "sim"\n\n[cases.simulate]\n'
    'persona = "a busy manager"\ngoal = "a task is created"\nmax_turns = 3\nwithin = 4\n'
)


def test_simulated_user_goal_met_on_turn_two_passes_with_two_turns(tmp_path: Path) -> None:
    waits: list[float] = []

    def answer(thread: StandInThread, body: str) -> Outcome:
        waits.append(4.0)
        return answered(f"re: {body}")

    stand_in = StandIn(answer)
    judge = StandInJudge(goals=[False, True])
    suite = write_suite(tmp_path, SIMULATED)
    assert suite.cases[0].simulate == Simulate("a busy manager", "a task is created", 3, 4.0)
    report = run_one(stand_in, suite, judge)
    [repeat] = report.repeats
    assert (report.verdict, len(repeat.turns), repeat.failure) == (PASS, 2, None)
    assert [body for _, body in stand_in.sent] == ["user turn 1", "user turn 2"]
    assert repeat.transcript == [
        ("user", "user turn 1"),
        ("assistant", "re: user turn 1"),
        ("user", "user turn 2"),
        ("assistant", "re: user turn 2"),
    ]
    assert judge.asked == [("user_turn", 0), ("goal_met", 2), ("user_turn", 2), ("goal_met", 4)]
    assert repeat.conversation_votes == (Vote(True, "goal after 2 turns"),)


def test_simulated_user_goal_never_met_fails_with_the_goal_expected(tmp_path: Path) -> None:
    stand_in = StandIn(lambda thread, body: answered("I cannot help."))
    judge = StandInJudge(goals=[False, False, False])
    report = run_one(stand_in, write_suite(tmp_path, SIMULATED), judge)
    [repeat] = report.repeats
    assert (report.verdict, len(repeat.turns), repeat.failed_turn) == (FAIL, 3, None)
    assert repeat.failure == Failure(
        "the goal met within 3 turns (a task is created)", "not met: goal after 3 turns"
    )


def test_simulated_user_without_a_reply_fails_at_that_turn(tmp_path: Path) -> None:
    stand_in = StandIn(lambda thread, body: unanswered("working"))
    judge = StandInJudge(goals=[True])
    report = run_one(stand_in, write_suite(tmp_path, SIMULATED), judge)
    [repeat] = report.repeats
    assert (report.verdict, repeat.failed_turn) == (FAIL, 1)
    assert repeat.failure == Failure(
        "a reply within 4 s", "no reply within 4 s (the turn is working)"
    )
    # The goal is not asked about a turn that got no reply.
    assert judge.asked == [("user_turn", 0)]


@pytest.mark.parametrize(
    "judge",
    [
        StandInJudge(turns=[JudgeError("the judge at x answered 500")]),
        StandInJudge(goals=[JudgeError("the judge at x answered 500")]),
    ],
)
def test_simulated_user_judge_error_makes_the_case_an_error(
    tmp_path: Path, judge: StandInJudge
) -> None:
    report = run_one(
        StandIn(lambda thread, body: answered("ok")), write_suite(tmp_path, SIMULATED), judge
    )
    [repeat] = report.repeats
    assert (report.verdict, repeat.problem, repeat.failure) == (
        ERROR,
        Problem("judge", "the judge at x answered 500"),
        None,
    )


GRADED = (
    f'name = "s"\nproject = "p"\n{JUDGE}\n[[cases]]\nname = "graded"\nrepeat = 2\n\n'
    '[[cases.turns]]\nsend = "hello"\nexpect = { contains = ["Ada"], judge = "Greets by name." }\n'
)


def test_run_plan_judge_error_makes_the_case_an_error_keeping_the_judged_turn(
    tmp_path: Path,
) -> None:
    """The repeat the judge could not grade keeps its turn, the reply and the votes the judge
    gave; the problem names the reply beside the judge's answer."""
    unreadable = JudgeError("the judge at x gave no verdict", (Vote(None, "Looks fine."),))
    judge = StandInJudge(grades=[True, unreadable])
    report = run_one(
        StandIn(lambda thread, body: answered("Hello, Ada.")), write_suite(tmp_path, GRADED), judge
    )
    assert report.verdict == ERROR
    assert [(r.passed, r.problem) for r in report.repeats] == [
        (True, None),
        (False, Problem("judge", "the judge at x gave no verdict — the reply: “Hello, Ada.”")),
    ]
    assert report.repeats[0].turns[0].votes == (Vote(True, "reply good"),)
    errored = report.repeats[1]
    [kept] = errored.turns
    assert (errored.failed_turn, kept.sent) == (1, "hello")
    assert kept.failure == Failure("a verdict", errored.problem.detail)
    assert kept.outcome.reply is not None and kept.outcome.reply.body == "Hello, Ada."
    assert kept.votes == (Vote(None, "Looks fine."),)


def test_run_plan_judge_error_over_the_conversation_keeps_its_votes(tmp_path: Path) -> None:
    text = GRADED.replace("repeat = 2", "repeat = 1") + (
        '\n[cases.expect_conversation]\njudge = "Polite."\n'
    )
    votes = (Vote(None, "Hmm."), Vote(None, "Hmm?"), Vote(None, "Hmm!"))
    judge = StandInJudge(grades=[True, JudgeError("the judge at x gave no verdict", votes)])
    report = run_one(
        StandIn(lambda thread, body: answered("Hello, Ada.")), write_suite(tmp_path, text), judge
    )
    [repeat] = report.repeats
    assert (report.verdict, repeat.failed_turn, len(repeat.turns)) == (ERROR, None, 1)
    assert repeat.problem == Problem("judge", "the judge at x gave no verdict")
    assert repeat.conversation_votes == votes


def test_run_plan_does_not_ask_the_judge_about_a_reply_already_failed(tmp_path: Path) -> None:
    judge = StandInJudge(grades=[True, True])
    report = run_one(
        StandIn(lambda thread, body: answered("Hello, Bob.")), write_suite(tmp_path, GRADED), judge
    )
    assert (report.verdict, judge.asked) == (FAIL, [])
    assert report.repeats[0].failure == Failure("the reply contains 'Ada'", "Hello, Bob.")


def test_run_plan_grades_the_conversation_after_its_last_turn(tmp_path: Path) -> None:
    text = GRADED.replace("repeat = 2", "repeat = 1") + (
        '\n[cases.expect_conversation]\njudge = "Polite."\nmax_turn_seconds = 5\n'
    )
    judge = StandInJudge(grades=[True, False])
    report = run_one(
        StandIn(lambda thread, body: answered("Hello, Ada.")), write_suite(tmp_path, text), judge
    )
    [repeat] = report.repeats
    assert (report.verdict, repeat.failed_turn) == (FAIL, None)
    assert repeat.failure == Failure(
        "the judge passes the conversation (Polite.)", "the judge failed it: conversation"
    )
    assert repeat.conversation_votes == (Vote(False, "conversation"),)
    assert [call for call, _ in judge.asked] == ["grade_reply", "grade_conversation"]


def test_the_judge_reads_a_regenerated_turn_in_place_of_the_version_before() -> None:
    """R24's path: the assistant answered the new version as if the one before never happened,
    and the judge reads the conversation so too."""
    turns = [
        TurnRecord(1, "hello", answered("Hi.")),
        TurnRecord(2, "flip a coin", answered("heads")),
        TurnRecord(3, "flip a coin", answered("tails"), regenerated=True),
        TurnRecord(4, "flip a coin", answered("edge"), regenerated=True),
        TurnRecord(5, "thanks", answered("Welcome.")),
    ]
    assert path_transcript(turns) == [
        (USER, "hello"),
        (ASSISTANT, "Hi."),
        (USER, "flip a coin"),
        (ASSISTANT, "edge"),
        (USER, "thanks"),
        (ASSISTANT, "Welcome."),
    ]
    assert path_transcript(turns[:3])[-2:] == [(USER, "flip a coin"), (ASSISTANT, "tails")]
    assert path_transcript([]) == []
