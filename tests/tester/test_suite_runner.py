"""The runner and its expectations over a stand-in listener and a stand-in judge (pure: no
server, no model)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from tester.suites.client import ListenerError, Outcome, Reply, TesterClient
from tester.suites.expectations import (
    Checked,
    Failure,
    check_conversation,
    check_turn,
    first_failure,
)
from tester.suites.files import (
    Case,
    ConversationExpect,
    Expect,
    Simulate,
    Suite,
    Turn,
    load_suite,
)
from tester.suites.judge import Judge, JudgeError, Verdict, Vote
from tester.suites.matchers import NoJson, json_of
from tester.suites.runner import (
    ERROR,
    FAIL,
    FLAKY,
    HALTED,
    PASS,
    CaseReport,
    Judges,
    Problem,
    Repeat,
    TestRun,
    plans,
    run_plan,
    run_plans,
    selected,
    verdict_of,
)

# How long a stand-in waits for what should already have happened: only a broken runner
# waits this long, and then the test fails.
WAIT = 10.0


def answered(
    body: str, *, seconds: float = 1.0, first_token: float = 0.5, **recorded: Any
) -> Outcome:
    reply = Reply(
        body=body,
        message={"id": 2, "body": body, **recorded},
        seconds=seconds,
        first_token_seconds=first_token,
    )
    return Outcome(turn={"id": 1}, reply=reply, state="answered", failure=None, seconds=seconds)


def unanswered(state: str, failure: str | None = None) -> Outcome:
    return Outcome(turn={"id": 1}, reply=None, state=state, failure=failure, seconds=2.0)


# --- expectations -----------------------------------------------------------------------------

FENCED = 'Here it is:\n```json\n{"name": "Ada", "age": 36}\n```\nAnything else?'
TWO_FENCED = '```json\n{"a": 1}\n```\nor\n```json\n{"a": 2}\n```'
SCHEMA = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
}
NO_JSON = "the reply is JSON, or its only fenced code block is"


@pytest.mark.parametrize(
    ("expect", "came", "failure"),
    [
        # contains / not_contains / matches, as before
        (Expect(), answered("hi"), None),
        (Expect(contains=("a", "b")), answered("a b"), None),
        (Expect(contains=("a", "z")), answered("a b"), Failure("the reply contains 'z'", "a b")),
        (
            Expect(not_contains=("b",)),
            answered("a b"),
            Failure("the reply does not contain 'b'", "a b"),
        ),
        (Expect(matches=re.compile("^a")), answered("a b"), None),
        (
            Expect(matches=re.compile("^b")),
            answered("a b"),
            Failure("the reply matches '^b'", "a b"),
        ),
        # icontains
        (Expect(icontains=("HELLO", "ada")), answered("Hello, Ada"), None),
        (
            Expect(icontains=("hello", "bob")),
            answered("Hello, Ada"),
            Failure("the reply contains 'bob', in any case", "Hello, Ada"),
        ),
        # equals: the reply's surrounding whitespace does not count
        (Expect(equals="42"), answered(" 42\n"), None),
        (Expect(equals=" 42 "), answered("42"), None),
        (Expect(equals="42"), answered("42."), Failure("the reply is '42'", "42.")),
        # not_matches
        (Expect(not_matches=re.compile("(?i)sorry")), answered("Done."), None),
        (
            Expect(not_matches=re.compile("(?i)sorry")),
            answered("Sorry, no."),
            Failure("the reply does not match '(?i)sorry'", "Sorry, no."),
        ),
        # json: the whole reply, or its one fenced code block
        (Expect(json=True), answered('{"a": 1}'), None),
        (Expect(json=True), answered(FENCED), None),
        (
            Expect(json=True),
            answered("no json here"),
            Failure(
                NO_JSON,
                "not JSON (Expecting value), and 0 fenced code blocks, not one: no json here",
            ),
        ),
        (
            Expect(json=True),
            answered(TWO_FENCED),
            Failure(
                NO_JSON,
                f"not JSON (Expecting value), and 2 fenced code blocks, not one: {TWO_FENCED}",
            ),
        ),
        (
            Expect(json=True),
            answered("```\n{nope}\n```"),
            Failure(
                NO_JSON,
                "its fenced code block is not JSON (Expecting property name enclosed in double "
                "quotes): ```\n{nope}\n```",
            ),
        ),
        # json_schema: implies json
        (Expect(json_schema=SCHEMA), answered(FENCED), None),
        (
            Expect(json_schema=SCHEMA),
            answered('{"name": "Ada", "age": "36"}'),
            Failure(
                "the reply's JSON matches its json_schema", "at age: '36' is not of type 'integer'"
            ),
        ),
        (
            Expect(json_schema=SCHEMA),
            answered('{"name": "Ada"}'),
            Failure(
                "the reply's JSON matches its json_schema",
                "at the top: 'age' is a required property",
            ),
        ),
        (
            Expect(json_schema=SCHEMA),
            answered("Ada, 36"),
            Failure(
                NO_JSON,
                "not JSON (Expecting value), and 0 fenced code blocks, not one: Ada, 36",
            ),
        ),
        # timings
        (Expect(max_seconds=2), answered("hi", seconds=2.0), None),
        (
            Expect(max_seconds=2),
            answered("hi", seconds=2.5),
            Failure("the whole reply within 2 s", "it took 2.50 s"),
        ),
        (Expect(max_first_token_seconds=0.5), answered("hi", first_token=0.5), None),
        (
            Expect(max_first_token_seconds=0.5),
            answered("hi", first_token=1.25),
            Failure("the first token within 0.5 s", "the first token came after 1.25 s"),
        ),
        # what the backend recorded: tokens, model, finish reason
        (
            Expect(max_completion_tokens=5),
            answered("hi", usage={"prompt_tokens": 9, "completion_tokens": 5}),
            None,
        ),
        (
            Expect(max_completion_tokens=5),
            answered("hi", usage={"prompt_tokens": 9, "completion_tokens": 6}),
            Failure("at most 5 completion tokens", "6 completion tokens"),
        ),
        (
            Expect(max_completion_tokens=5),
            answered("hi"),
            Failure("at most 5 completion tokens", "the backend recorded no token usage"),
        ),
        (
            Expect(max_completion_tokens=5),
            answered("hi", usage={"prompt_tokens": 9}),
            Failure("at most 5 completion tokens", "the backend recorded no token usage"),
        ),
        (Expect(model="qwen"), answered("hi", model="qwen"), None),
        (
            Expect(model="qwen"),
            answered("hi", model="llama"),
            Failure("model 'qwen'", "model 'llama'"),
        ),
        (
            Expect(model="qwen"),
            answered("hi"),
            Failure("model 'qwen'", "the backend recorded no model"),
        ),
        (Expect(finish_reason="stop"), answered("hi", finish_reason="stop"), None),
        (
            Expect(finish_reason="stop"),
            answered("hi", finish_reason="length"),
            Failure("finish_reason 'stop'", "finish_reason 'length'"),
        ),
        (
            Expect(finish_reason="stop"),
            answered("hi"),
            Failure("finish_reason 'stop'", "the backend recorded no finish_reason"),
        ),
        # no reply, and reply = false
        (
            Expect(within=2),
            unanswered("pending"),
            Failure("a reply within 2 s", "no reply within 2 s (the turn is pending)"),
        ),
        (
            Expect(),
            unanswered("failed", "the model server refused the key"),
            Failure("a reply within 30 s", "the turn failed: the model server refused the key"),
        ),
        (Expect(), unanswered("stopped"), Failure("a reply within 30 s", "the turn was stopped")),
        (Expect(reply=False), unanswered("working"), None),
        (Expect(reply=False), unanswered("stopped"), None),
        (Expect(reply=False), unanswered("failed", "x"), None),
        (Expect(reply=False, within=5), answered("hi"), Failure("no reply within 5 s", "hi")),
    ],
)
def test_check_turn_names_the_first_unmet_expectation(
    expect: Expect, came: Outcome, failure: Failure | None
) -> None:
    assert check_turn(expect, came) == Checked(failure)


def test_first_failure_checks_in_the_files_order() -> None:
    """Text before JSON before timings before what was recorded: the first in that order is
    the one reported."""
    expect = Expect(icontains=("ada",), json=True, max_seconds=1, model="qwen", not_contains=("{",))
    reply = answered('{"x": 1}', seconds=5).reply
    assert reply is not None
    assert first_failure(expect, reply) == Failure("the reply does not contain '{'", '{"x": 1}')
    assert first_failure(Expect(json=True, max_seconds=1, model="q"), reply) == Failure(
        "the whole reply within 1 s", "it took 5.00 s"
    )


@pytest.mark.parametrize(
    ("body", "data"),
    [
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ("  [1, 2]\n", [1, 2]),
        ("Sure:\n```json\n[1, 2]\n```", [1, 2]),
        ('Sure:\n```\n"text"\n```\nDone.', "text"),
    ],
)
def test_json_of_reads_the_reply_or_its_lone_fenced_block(body: str, data: Any) -> None:
    assert json_of(body) == data


@pytest.mark.parametrize("body", ["Ada", TWO_FENCED, "```json\n{'a': 1}\n```", "```json {} ```"])
def test_json_of_without_json_raises_no_json(body: str) -> None:
    with pytest.raises(NoJson):
        json_of(body)


class StandInJudge:
    """The judge as the runner sees it: each call takes the next scripted verdict (or raises the
    next scripted `JudgeError`); `asked` records every call."""

    def __init__(
        self,
        *,
        grades: Sequence[bool | JudgeError] = (),
        goals: Sequence[bool | JudgeError] = (),
        turns: Sequence[str | JudgeError] = (),
    ) -> None:
        self.grades = list(grades)
        self.goals = list(goals)
        self.turns = list(turns)
        self.asked: list[tuple[str, Any]] = []

    @staticmethod
    def verdict(scripted: bool | JudgeError, reason: str) -> Verdict:
        if isinstance(scripted, JudgeError):
            raise scripted
        return Verdict(scripted, (Vote(scripted, reason),))

    def grade_reply(self, rubric: str, transcript: Any) -> Verdict:
        self.asked.append(("grade_reply", (rubric, list(transcript))))
        return self.verdict(self.grades.pop(0), f"reply {'good' if self.grades else 'last'}")

    def grade_conversation(self, rubric: str, transcript: Any) -> Verdict:
        self.asked.append(("grade_conversation", (rubric, list(transcript))))
        return self.verdict(self.grades.pop(0), "conversation")

    def goal_met(self, *, persona: str, goal: str, transcript: Any) -> Verdict:
        self.asked.append(("goal_met", len(transcript)))
        return self.verdict(self.goals.pop(0), f"goal after {len(transcript) // 2} turns")

    def user_turn(self, *, persona: str, goal: str, transcript: Any) -> str:
        self.asked.append(("user_turn", len(transcript)))
        said = self.turns.pop(0) if self.turns else f"user turn {len(transcript) // 2 + 1}"
        if isinstance(said, JudgeError):
            raise said
        return said


def as_judge(judge: StandInJudge) -> Judge:
    return cast(Judge, judge)


TRANSCRIPT = [("user", "hi"), ("assistant", "Hello, Ada.")]


def test_check_turn_asks_the_judge_last_and_passes_with_its_votes() -> None:
    judge = StandInJudge(grades=[True])
    checked = check_turn(
        Expect(contains=("Ada",), judge="Greets by name."),
        answered("Hello, Ada."),
        transcript=TRANSCRIPT,
        judge=as_judge(judge),
    )
    assert checked == Checked(None, (Vote(True, "reply last"),))
    assert judge.asked == [("grade_reply", ("Greets by name.", TRANSCRIPT))]


def test_check_turn_judge_failing_says_why_and_keeps_the_reply() -> None:
    judge = StandInJudge(grades=[False])
    checked = check_turn(
        Expect(judge="Greets by name."),
        answered("Hello."),
        transcript=TRANSCRIPT,
        judge=as_judge(judge),
    )
    assert checked == Checked(
        Failure(
            "the judge passes it (Greets by name.)",
            "the judge failed it: reply last — the reply: Hello.",
        ),
        (Vote(False, "reply last"),),
    )


@pytest.mark.parametrize(
    ("expect", "came"),
    [
        (Expect(contains=("Bob",), judge="Greets by name."), answered("Hello, Ada.")),
        (Expect(max_seconds=1, judge="Greets by name."), answered("Hello, Ada.", seconds=3)),
        (Expect(judge="Greets by name."), unanswered("stopped")),
    ],
)
def test_check_turn_failed_before_the_judge_does_not_ask_it(expect: Expect, came: Outcome) -> None:
    """The judge is the slow, costly check: never asked about a reply already failed."""
    judge = StandInJudge(grades=[True])
    checked = check_turn(expect, came, transcript=TRANSCRIPT, judge=as_judge(judge))
    assert (checked.failure is not None, checked.votes, judge.asked) == (True, (), [])


def test_check_turn_judge_error_is_raised() -> None:
    judge = StandInJudge(grades=[JudgeError("the judge at x answered 500")])
    with pytest.raises(JudgeError, match="answered 500"):
        check_turn(Expect(judge="r"), answered("hi"), transcript=TRANSCRIPT, judge=as_judge(judge))


@pytest.mark.parametrize(
    ("expect", "seconds", "grades", "checked"),
    [
        (ConversationExpect(), [9.0], [], Checked(None)),
        (ConversationExpect(max_turn_seconds=2), [1.0, 2.0], [], Checked(None)),
        (
            ConversationExpect(max_turn_seconds=2),
            [1.0, 2.5, 9.0],
            [],
            Checked(Failure("every reply within 2 s", "turn 2 took 2.50 s")),
        ),
        (
            ConversationExpect(judge="Polite."),
            [1.0],
            [True],
            Checked(None, (Vote(True, "conversation"),)),
        ),
        (
            ConversationExpect(judge="Polite."),
            [1.0],
            [False],
            Checked(
                Failure(
                    "the judge passes the conversation (Polite.)",
                    "the judge failed it: conversation",
                ),
                (Vote(False, "conversation"),),
            ),
        ),
        # A turn too slow: the judge is not asked (its one scripted verdict is left over).
        (
            ConversationExpect(judge="Polite.", max_turn_seconds=1),
            [3.0],
            [True],
            Checked(Failure("every reply within 1 s", "turn 1 took 3.00 s")),
        ),
    ],
)
def test_check_conversation_checks_each_turns_time_then_asks_the_judge(
    expect: ConversationExpect, seconds: list[float], grades: list[bool], checked: Checked
) -> None:
    judge = StandInJudge(grades=grades)
    found = check_conversation(
        expect, transcript=TRANSCRIPT, seconds=seconds, judge=as_judge(judge)
    )
    assert found == checked
    assert len(judge.asked) == (1 if checked.votes else 0)


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


# --- running over a stand-in listener ---------------------------------------------------------


class StandInThread:
    def __init__(self, client: StandIn, name: str, instance: str | None, number: int) -> None:
        self.client = client
        self.name = name
        self.id = number
        self.instance = instance or "assistant"

    def __enter__(self) -> StandInThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def ask(self, body: str, *, within: float) -> Outcome:
        with self.client.lock:
            self.client.sent.append((self.id, body))
        return self.client.answer(self, body)


class StandIn:
    """The listener as the runner sees it; `answer` says what each turn gets."""

    def __init__(self, answer: Callable[[StandInThread, str], Outcome]) -> None:
        self.answer = answer
        self.threads: list[tuple[str, str | None]] = []
        self.sent: list[tuple[int, str]] = []
        self.projects: list[str] = []
        self.lock = threading.Lock()

    def project_id(self, name: str) -> int:
        self.projects.append(name)
        return 1

    def new_thread(self, *, project: int, name: str, instance: str | None) -> StandInThread:
        with self.lock:
            self.threads.append((name, instance))
            return StandInThread(self, name, instance, len(self.threads))


def client_of(stand_in: StandIn) -> TesterClient:
    return cast(TesterClient, stand_in)


def write_suite(tmp_path: Path, text: str) -> Suite:
    path = tmp_path / "s.suite.toml"
    path.write_text(text, encoding="utf-8")
    return load_suite(path, environ={})


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


# --- the judge in a repeat --------------------------------------------------------------------

JUDGE = '[judge]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
SIMULATED = (
    f'name = "s"\nproject = "p"\n{JUDGE}\n[[cases]]\nname = "sim"\n\n[cases.simulate]\n'
    'persona = "a busy manager"\ngoal = "a task is created"\nmax_turns = 3\nwithin = 4\n'
)


class StandInJudges:
    """`Judges` handing out one stand-in judge."""

    def __init__(self, judge: StandInJudge) -> None:
        self.judge = judge

    def of(self, suite: Suite) -> Judge:
        return as_judge(self.judge)


def run_one(stand_in: StandIn, suite: Suite, judge: StandInJudge) -> CaseReport:
    [plan] = plans([suite])
    judges = cast(Judges, StandInJudges(judge))
    return run_plan(client_of(stand_in), plan, project=1, judges=judges)


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


def test_run_plan_judge_error_makes_the_case_an_error(tmp_path: Path) -> None:
    judge = StandInJudge(grades=[True, JudgeError("the judge at x did not answer (refused)")])
    report = run_one(
        StandIn(lambda thread, body: answered("Hello, Ada.")), write_suite(tmp_path, GRADED), judge
    )
    assert report.verdict == ERROR
    assert [(r.passed, r.problem) for r in report.repeats] == [
        (True, None),
        (False, Problem("judge", "the judge at x did not answer (refused)")),
    ]
    assert report.repeats[0].turns[0].votes == (Vote(True, "reply good"),)


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
