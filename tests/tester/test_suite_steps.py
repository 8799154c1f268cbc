"""A turn's steps in the conversation tests (SPEC §7.2): `expect.tools` in its four orders,
`no_tools`, `max_steps`, argument matchers, the file's refusals, the judge's context, the
client's reply and the reports (pure: fabricated steps, no server, no model)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

from tester.suites import reports
from tester.suites.client import ConversationThread, Outcome, Reply, TesterClient
from tester.suites.expectation_keys import TOOLS_ORDERS, Expect, expect_of
from tester.suites.expectations import check_turn
from tester.suites.files import load_suite
from tester.suites.html_report import page
from tester.suites.judge import STEPS, heard, transcript_text, turn_transcript
from tester.suites.key_reader import SuiteFileRefused
from tester.suites.matchers import Failure
from tester.suites.runner import PASS, CaseReport, Plan, Repeat, TestRun, TurnRecord
from tester.suites.steps import Step, describe_step, steps_of
from tester.suites.trajectories import ORDERS, steps_failure
from tests.support.stand_ins import StandIn, StandInJudge, StandInThread, run_one, write_suite

BOOK = Step("create_task", {"title": "book the photographer"}, "refused", "invalid")
SEND = Step("send_message", {"to": "ops", "body": "hi"}, "ok")
ASK = Step("ask_human", {"question": "which date?"}, "ok")
ASKED = 'ask_human(question="which date?") ok'
REFUSAL = "Not created: this is a test conversation, and a test conversation creates no task."


def expect(**keys: Any) -> Expect:
    return expect_of(keys)


def missed(steps: list[Step], **keys: Any) -> Failure | None:
    return steps_failure(expect(**keys), steps)


def answered_with(steps: list[Step], body: str = "Done.") -> Outcome:
    reply = Reply(body=body, message={"id": 2, "body": body}, seconds=1.0, steps=tuple(steps))
    return Outcome(turn={"id": 1}, reply=reply, state="answered", failure=None, seconds=1.0)


# --- the four orders -----------------------------------------------------------------------

CREATE = {"name": "create_task"}
MESSAGE = {"name": "send_message"}


def test_orders_are_the_files_orders() -> None:
    assert set(ORDERS) == set(TOOLS_ORDERS)
    assert expect(tools=[]).tools_order == "subset"


@pytest.mark.parametrize(
    ("order", "steps"),
    [
        ("strict", [BOOK, SEND]),
        ("unordered", [BOOK, SEND]),
        ("unordered", [SEND, BOOK]),
        ("subset", [BOOK, SEND]),
        ("subset", [SEND]),
        ("subset", []),
        ("superset", [BOOK, SEND]),
        ("superset", [ASK, SEND, BOOK]),
    ],
)
def test_tools_order_passes_a_matching_trajectory(order: str, steps: list[Step]) -> None:
    assert missed(steps, tools=[CREATE, MESSAGE], tools_order=order) is None


@pytest.mark.parametrize(
    ("order", "steps", "expected"),
    [
        # strict: the same calls in the same order, one for one
        (
            "strict",
            [SEND, BOOK],
            'call 1 to be create_task, not send_message(to="ops", body="hi") ok',
        ),
        ("strict", [BOOK], "call 2 to be send_message, and none came"),
        (
            "strict",
            [BOOK, SEND, ASK],
            '2 calls, with no call after them; then came ask_human(question="which date?") ok',
        ),
        # unordered: the same multiset, any order
        ("unordered", [BOOK], "a call send_message"),
        (
            "unordered",
            [SEND, BOOK, ASK],
            f"only calls among: create_task; send_message — not {ASKED}",
        ),
        # subset: every call made is among the expected ones
        (
            "subset",
            [BOOK, ASK],
            f"only calls among: create_task; send_message — not {ASKED}",
        ),
        # superset: every expected call is among those made
        ("superset", [BOOK, ASK], "a call send_message"),
    ],
)
def test_tools_order_fails_its_counterexample_naming_the_call(
    order: str, steps: list[Step], expected: str
) -> None:
    failure = missed(steps, tools=[CREATE, MESSAGE], tools_order=order)
    assert failure is not None
    assert failure.expected == expected
    assert failure.actual.startswith("the turn's steps: ")


def test_tools_count_each_call_once() -> None:
    """An entry pairs with one call of its own: two expected calls need two calls made, and
    two calls made need two entries."""
    assert missed([BOOK], tools=[CREATE, CREATE], tools_order="superset") == Failure(
        "a call create_task",
        'the turn\'s steps: create_task(title="book the photographer") refused (invalid)',
    )
    assert missed([BOOK, BOOK], tools=[CREATE], tools_order="subset") is not None
    assert missed([BOOK, BOOK], tools=[CREATE, CREATE], tools_order="unordered") is None


def test_tools_pair_entries_whatever_their_order_in_the_file() -> None:
    """A loose entry written before a narrow one does not take the only call the narrow one
    fits (a first-come pairing would miss this)."""
    first = Step("create_task", {"title": "book the photographer"}, "ok")
    second = Step("create_task", {"title": "send the invitations"}, "ok")
    tools = [CREATE, {"name": "create_task", "args": {"title": {"icontains": "photographer"}}}]
    assert missed([first, second], tools=tools, tools_order="unordered") is None


def test_tools_miss_names_the_expected_call_and_the_turns_steps() -> None:
    """The brief's own example: the call expected, with its matchers and outcome, and every
    step the turn made."""
    made = Step("create_task", {"title": "x"}, "ok")
    failure = missed(
        [made],
        tools=[
            {
                "name": "create_task",
                "args": {"title": {"icontains": "photographer"}},
                "outcome": "refused",
            }
        ],
        tools_order="superset",
    )
    assert failure == Failure(
        'a call create_task(title icontains "photographer") with outcome refused',
        'the turn\'s steps: create_task(title="x") ok',
    )


@pytest.mark.parametrize(
    ("outcome", "passes"), [("refused", True), ("ok", False), ("error", False), (None, True)]
)
def test_tools_outcome_must_be_the_steps(outcome: str | None, passes: bool) -> None:
    entry: dict[str, Any] = {"name": "create_task"}
    if outcome is not None:
        entry["outcome"] = outcome
    assert (missed([BOOK], tools=[entry], tools_order="superset") is None) is passes


def test_tools_without_tools_key_checks_no_call() -> None:
    assert missed([BOOK, SEND, ASK]) is None
    assert missed([BOOK], tools=[]) is not None  # subset of nothing: no call at all


# --- arguments -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("matchers", "passes"),
    [
        ({"icontains": "PHOTOGRAPHER"}, True),
        ({"icontains": ["book", "photo"]}, True),
        ({"icontains": "caterer"}, False),
        ({"contains": "photographer"}, True),
        ({"contains": "Photographer"}, False),
        ({"not_contains": "caterer"}, True),
        ({"not_contains": "photo"}, False),
        ({"equals": " book the photographer "}, True),
        ({"equals": "book"}, False),
        ({"matches": "^book the \\w+$"}, True),
        ({"matches": "^photographer"}, False),
        ({"not_matches": "(?i)caterer"}, True),
        ({"json_schema": {"type": "string", "maxLength": 40}}, True),
        ({"json_schema": {"type": "string", "maxLength": 4}}, False),
        ({"icontains": "photographer", "not_contains": "book"}, False),
    ],
)
def test_args_apply_the_replys_matchers_to_an_argument(
    matchers: dict[str, Any], passes: bool
) -> None:
    tools = [{"name": "create_task", "args": {"title": matchers}}]
    assert (missed([BOOK], tools=tools, tools_order="superset") is None) is passes


def test_args_other_than_text_match_as_json_and_by_schema() -> None:
    step = Step("plan", {"days": [1, 2], "urgent": True}, "ok")
    tools = [
        {
            "name": "plan",
            "args": {
                "days": {"equals": "[1, 2]", "json_schema": {"type": "array", "maxItems": 2}},
                "urgent": {"equals": "true"},
            },
        }
    ]
    assert missed([step], tools=tools, tools_order="strict") is None


@pytest.mark.parametrize(
    "arguments", [{}, {"name": "book the photographer"}, "title: book the photographer", None]
)
def test_args_named_but_absent_do_not_match(arguments: Any) -> None:
    step = Step("create_task", arguments, "error", "invalid-arguments")
    tools = [{"name": "create_task", "args": {"title": {"icontains": "photographer"}}}]
    assert missed([step], tools=tools, tools_order="superset") is not None


def test_args_not_named_are_free() -> None:
    tools = [{"name": "send_message", "args": {"to": {"equals": "ops"}}}]
    assert missed([SEND], tools=tools, tools_order="strict") is None


# --- no_tools and max_steps ----------------------------------------------------------------


def test_no_tools_true_refuses_any_call() -> None:
    assert missed([], no_tools=True) is None
    assert missed([ASK], no_tools=True) == Failure(
        "no tool call", 'the turn\'s steps: ask_human(question="which date?") ok'
    )


def test_no_tools_list_refuses_the_tools_it_names() -> None:
    assert missed([BOOK, ASK], no_tools=["send_message"]) is None
    failure = missed([BOOK, SEND], no_tools=["send_message"])
    assert failure is not None
    assert failure.expected == "no call to send_message"
    assert 'send_message(to="ops", body="hi") ok' in failure.actual


def test_max_steps_counts_the_turns_steps() -> None:
    assert missed([BOOK, SEND], max_steps=2) is None
    assert missed([], max_steps=0) is None
    failure = missed([BOOK, SEND, ASK], max_steps=2)
    assert failure is not None
    assert (failure.expected, failure.actual.split(":")[0]) == ("at most 2 steps", "3 steps")


def test_check_turn_checks_steps_after_the_reply_and_before_the_judge() -> None:
    judge = StandInJudge(grades=[True])
    reply_first = check_turn(
        expect(contains=["Booked"], no_tools=True), answered_with([BOOK], "Not booked.")
    )
    assert reply_first.failure is not None
    assert reply_first.failure.expected == "the reply contains 'Booked'"
    steps_then = check_turn(
        expect(no_tools=True, judge="Says what it did."),
        answered_with([BOOK]),
        judge=judge,  # type: ignore[arg-type]
    )
    assert steps_then.failure is not None
    assert steps_then.failure.expected == "no tool call"
    assert judge.asked == []


# --- the file ------------------------------------------------------------------------------

HEAD = """\
name = "s"
project = "p"

[[cases]]
name = "c"

[[cases.turns]]
send = "task: book the photographer"
"""


def load(tmp_path: Path, text: str) -> Any:
    path = tmp_path / "s.suite.toml"
    path.write_text(text, encoding="utf-8")
    return load_suite(path, environ={})


def test_load_reads_tools_in_an_inline_table(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        HEAD + 'expect = { tools = [{ name = "create_task", args = { title = { icontains = '
        '"photographer" } }, outcome = "refused" }], tools_order = "strict", '
        'no_tools = ["send_message"], max_steps = 3 }\n',
    )
    read = suite.cases[0].turns[0].expect
    [call] = read.tools
    assert (call.name, call.outcome, str(call)) == (
        "create_task",
        "refused",
        'create_task(title icontains "photographer") with outcome refused',
    )
    [argument] = call.args
    assert (argument.name, argument.expect.icontains) == ("title", ("photographer",))
    assert (read.tools_order, read.no_tools, read.max_steps) == ("strict", ("send_message",), 3)


def test_load_reads_tools_as_tables_of_their_own(tmp_path: Path) -> None:
    suite = load(
        tmp_path,
        HEAD
        + """
[cases.turns.expect]
no_tools = true

[[cases]]
name = "d"

[[cases.turns]]
send = "task: x"

[[cases.turns.expect.tools]]
name = "create_task"

[cases.turns.expect.tools.args.title]
equals = "x"
""",
    )
    first, second = suite.cases
    assert first.turns[0].expect.no_tools is True
    [call] = second.turns[0].expect.tools
    assert str(call) == 'create_task(title equals "x")'


@pytest.mark.parametrize(
    ("tail", "line", "reason"),
    [
        # A misspelt key inside a tools entry, in an inline table: the expect line.
        (
            'expect = { tools = [{ name = "create_task", outcom = "refused" }] }\n',
            9,
            "unknown key 'outcom' in a tools entry; it takes args, name, outcome",
        ),
        (
            'expect = { tools = [{ name = "create_task", args = { title = { icontain = "x" } } '
            "}] }\n",
            9,
            "unknown key 'icontain' in argument 'title''s matchers",
        ),
        (
            '[cases.turns.expect]\nmax_steps = 2\ntools = [\n  { tool = "create_task" },\n]\n',
            11,
            "unknown key 'tool' in a tools entry",
        ),
        (
            '[[cases.turns.expect.tools]]\nname = "create_task"\noutcomes = "ok"\n',
            11,
            "unknown key 'outcomes' in a tools entry",
        ),
        ('expect = { tools = [{ outcome = "ok" }] }\n', 9, "a tools entry needs name"),
        (
            'expect = { tools = [{ name = "t", outcome = "denied" }] }\n',
            9,
            "outcome must be one of ok, refused, error",
        ),
        ('expect = { tools = "create_task" }\n', 9, "tools must be a list of calls"),
        (
            'expect = { tools = [{ name = "t", args = { title = "x" } }] }\n',
            9,
            "argument 'title' needs a table of matchers",
        ),
        (
            'expect = { tools = [{ name = "t", args = { title = { matches = "(" } } }] }\n',
            9,
            "matches is not a regular expression",
        ),
        ('expect = { tools = [], tools_order = "any" }\n', 9, "tools_order must be one of"),
        ('expect = { tools_order = "strict" }\n', 9, "tools_order orders tools"),
        ('expect = { no_tools = "send_message" }\n', 9, "no_tools must be true, or a list"),
        (
            'expect = { no_tools = true, tools = [{ name = "t" }] }\n',
            9,
            "no_tools = true contradicts tools",
        ),
        (
            'expect = { no_tools = ["t"], tools = [{ name = "t" }] }\n',
            9,
            "t is both in tools and in no_tools",
        ),
        ("expect = { max_steps = -1 }\n", 9, "max_steps must be a whole number, 0 to 1000"),
        ("expect = { max_steps = 1.5 }\n", 9, "max_steps must be a whole number"),
        (
            "[cases.turns.expect]\nreply = false\nno_tools = true\n",
            11,
            "reply = false expects no reply, so no_tools is refused",
        ),
    ],
)
def test_load_refuses_malformed_step_keys_with_file_and_line(
    tmp_path: Path, tail: str, line: int, reason: str
) -> None:
    with pytest.raises(SuiteFileRefused) as refused:
        load(tmp_path, HEAD + tail)
    assert (refused.value.file, refused.value.line) == (str(tmp_path / "s.suite.toml"), line)
    assert reason in refused.value.reason
    assert str(refused.value).startswith(f"{tmp_path / 's.suite.toml'}:{line}: ")


# --- the client's reply --------------------------------------------------------------------

STEP_JSON = {
    "id": 41,
    "turn": 7,
    "call_id": "call_abc",
    "round": 1,
    "tool": "create_task",
    "arguments": {"title": "book the photographer"},
    "outcome": "refused",
    "code": "invalid",
    "result": {"error": "invalid", "detail": REFUSAL},
    "started_at": "2026-12-04T10:00:00.123Z",
    "ended_at": "2026-12-04T10:00:00.200Z",
}


def test_steps_of_reads_the_turns_steps_and_round_trips() -> None:
    [step] = steps_of({"id": 7, "steps": [STEP_JSON]})
    assert (step.tool, step.outcome, step.code, step.call_id) == (
        "create_task",
        "refused",
        "invalid",
        "call_abc",
    )
    assert step.as_json() == {k: v for k, v in STEP_JSON.items() if k != "turn"}
    assert steps_of({"id": 8}) == steps_of({"id": 8, "steps": []}) == ()


def test_describe_step_with_result_gives_the_refusals_sentence() -> None:
    step = Step.from_json(STEP_JSON)
    assert describe_step(step) == ('create_task(title="book the photographer") refused (invalid)')
    assert describe_step(step, with_result=True).endswith(f"(invalid): {REFUSAL}")
    assert describe_step(Step("t", "not json {", "error", "invalid-arguments")) == (
        't(not an object: "not json {") error (invalid-arguments)'
    )


class OneRead(TesterClient):
    """A listener whose thread holds a turn with its step and the reply to it."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:1")
        self.reads = 0

    def messages(self, thread_id: int, *, after: int) -> list[dict[str, Any]]:
        self.reads += 1
        return [
            {"id": 7, "class": "REQUEST", "reply_state": "answered", "steps": [STEP_JSON]},
            {"id": 8, "class": "RESULT", "in_reply_to": 7, "body": "I cannot create tasks here."},
        ]


def test_wait_gives_the_reply_the_turns_steps_from_the_same_read() -> None:
    client = OneRead()
    thread = ConversationThread(client, {"id": 3, "name": "t", "instance": "assistant"})
    outcome = thread.wait({"id": 7}, within=1.0)
    assert outcome.reply is not None
    assert outcome.reply.steps == (Step.from_json(STEP_JSON),)
    assert outcome.steps == outcome.reply.steps
    assert client.reads == 1


def test_outcome_without_reply_has_the_turns_steps() -> None:
    outcome = Outcome({"id": 7, "steps": [STEP_JSON]}, None, "failed", "too many rounds")
    assert [step.tool for step in outcome.steps] == ["create_task"]


# --- the judge sees the steps, the simulated user does not -------------------------------------


def test_turn_transcript_puts_the_steps_between_the_turn_and_its_reply() -> None:
    said = turn_transcript("task: book it", steps=[BOOK], reply="I could not.")
    assert [speaker for speaker, _ in said] == ["user", STEPS, "assistant"]
    assert "ASSISTANT'S TOOL CALLS: create_task(" in transcript_text(said)
    assert heard(said) == [("user", "task: book it"), ("assistant", "I could not.")]
    assert turn_transcript("hi", steps=[], reply="Hello.") == [
        ("user", "hi"),
        ("assistant", "Hello."),
    ]


SIMULATED = """
name = "s"
project = "p"

[judge]
base_url = "http://127.0.0.1:9/v1"
model = "judge"

[[cases]]
name = "sim"

[cases.simulate]
persona = "a planner"
goal = "a photographer is booked"
max_turns = 2

[cases.expect_conversation]
judge = "Claims only what its steps did."
"""


def test_simulated_user_sees_replies_and_the_judge_sees_steps(tmp_path: Path) -> None:
    seen: list[Any] = []

    class Watching(StandInJudge):
        def user_turn(self, *, persona: str, goal: str, transcript: Any) -> str:
            seen.append(("user_turn", list(transcript)))
            return super().user_turn(persona=persona, goal=goal, transcript=transcript)

    def answer(thread: StandInThread, body: str) -> Outcome:
        return answered_with([BOOK], "I booked nothing.")

    judge = Watching(goals=[False, True], grades=[True])
    report = run_one(StandIn(answer), write_suite(tmp_path, SIMULATED), judge)
    assert report.verdict == PASS
    assert all(speaker != STEPS for _, said in seen for speaker, _ in said)
    [(_, (_, graded))] = [asked for asked in judge.asked if asked[0] == "grade_conversation"]
    assert [speaker for speaker, _ in graded] == ["user", STEPS, "assistant"] * 2


def test_reply_judge_grades_with_the_turns_steps(tmp_path: Path) -> None:
    suite = write_suite(
        tmp_path,
        SIMULATED.split("[[cases]]")[0]
        + '[[cases]]\nname = "c"\n[[cases.turns]]\nsend = "task: x"\n'
        + 'expect = { judge = "Claims only what its steps did." }\n',
    )
    judge = StandInJudge(grades=[True])
    run_one(StandIn(lambda thread, body: answered_with([BOOK])), suite, judge)
    [(_, (_, graded))] = judge.asked
    assert graded[1] == (STEPS, describe_step(BOOK, with_result=True))


# --- reports -------------------------------------------------------------------------------


def failed_report(tmp_path: Path) -> CaseReport:
    suite = load(
        tmp_path,
        HEAD + 'expect = { tools = [{ name = "create_task", outcome = "ok" }] }\n',
    )
    outcome = answered_with([Step.from_json(STEP_JSON)], "No task was created.")
    checked = check_turn(suite.cases[0].turns[0].expect, outcome)
    repeat = Repeat(1, thread=5, instance="assistant", failure=checked.failure, failed_turn=1)
    repeat.turns.append(TurnRecord(1, "task: book the photographer", outcome, checked.failure))
    return CaseReport(Plan(suite, suite.cases[0], None, 1), [repeat], "fail")


def test_reports_name_the_missed_call_and_show_the_steps(tmp_path: Path) -> None:
    report = failed_report(tmp_path)
    missed_call = (
        "only calls among: create_task with outcome ok — not "
        'create_task(title="book the photographer") refused (invalid)'
    )
    steps_told = 'create_task(title="book the photographer") refused (invalid)'
    assert reports.miss_lines(report) == [
        "turn 1 “task: book the photographer”",
        f"expected: {missed_call}",
        f"actual: the turn's steps: {steps_told}",
    ]
    record = reports.as_json(report)
    assert record["expected"] == missed_call
    [turn] = record["repeats"][0]["turns"]
    assert turn["steps"] == [Step.from_json(STEP_JSON).as_json()]

    stored = reports.stored_record(report)
    [stored_turn] = stored["attempts"][0]["turns"]
    assert stored_turn["steps"] == [
        {
            "call_id": "call_abc",
            "round": 1,
            "tool": "create_task",
            "arguments": {"title": "book the photographer"},
            "outcome": "refused",
            "code": "invalid",
        }
    ]

    root = reports.junit(TestRun(reports=[report]), [report.plan]).getroot()
    case = root.find("./testsuite/testcase")
    assert case is not None
    failure = case.find("failure")
    assert failure is not None
    assert f"expected {missed_call}" in (failure.get("message") or "")
    out = case.find("system-out")
    assert out is not None
    assert out.text == (
        "steps:\nturn 1 “task: book the photographer”: "
        'create_task(title="book the photographer") refused (invalid)'
    )
    ElementTree.tostring(root)

    html = page(TestRun(reports=[report]), [report.plan], run_id=3, baseline=None)
    assert '<ol class="steps" aria-label="steps"><li class="refused">' in html
    assert "create_task(title=&quot;book the photographer&quot;) refused (invalid): Not" in html
    assert "only calls among: create_task with outcome ok" in html


def test_stored_step_cuts_long_arguments_to_their_json_text() -> None:
    long = Step("create_task", {"title": "x" * 2000}, "ok")
    arguments = reports.stored_step(long)["arguments"]
    assert isinstance(arguments, str)
    assert len(arguments) == reports.STORED_ARGUMENTS
    assert arguments.startswith('{"title": "xxx') and arguments.endswith("…")
    assert json.dumps(reports.stored_step(BOOK)["arguments"]) == (
        '{"title": "book the photographer"}'
    )
