"""Suite files: what is read, and every refusal with its file, line and reason (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from tester.suites.costs import Price
from tester.suites.expectation_keys import DEFAULT_WITHIN, ConversationExpect, Expect
from tester.suites.files import Simulate, load_suite, load_suites, suite_files
from tester.suites.judge import JudgeConfig
from tester.suites.judge_and_pricing_tables import NO_JUDGE
from tester.suites.key_lines import key_lines, line_of
from tester.suites.key_reader import SuiteFileRefused

EXAMPLE = """\
name = "smoke"            # suite name
project = "qa"            # the project its threads go in; created when missing

[[cases]]
name = "greets"

[[cases.turns]]
send = "hello"
expect = { matches = "(?i)hello|hi", within = 10 }

[[cases.turns]]
send = "task: ship it"
expect = { contains = ["No task"], not_contains = ["Created task"] }

[[cases]]
name = "quiet"
instance = "assistant"

[[cases.turns]]
send = "stop now"

[cases.turns.expect]
reply = false
within = 2.5
"""


def write(tmp_path: Path, text: str, name: str = "s.suite.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refusal(
    tmp_path: Path, text: str, environ: Mapping[str, str] | None = None
) -> SuiteFileRefused:
    """The refusal of `text`, read as its first problem (`problems` has them all), each told
    on a line; no MOSAIC_JUDGE_* variable of the shell running the tests is seen."""
    path = write(tmp_path, text)
    with pytest.raises(SuiteFileRefused) as caught:
        load_suite(path, environ={} if environ is None else environ)
    problems = caught.value.problems
    assert (caught.value.file, caught.value.line) == (str(path), problems[0].line)
    assert {problem.file for problem in problems} == {str(path)}
    assert str(caught.value) == "\n".join(f"{path}:{p.line}: {p.reason}" for p in problems)
    return caught.value


def test_load_example_reads_every_key(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, EXAMPLE))
    assert (suite.name, suite.project, suite.file) == (
        "smoke",
        "qa",
        str(tmp_path / "s.suite.toml"),
    )
    greets, quiet = suite.cases
    assert (greets.name, greets.instance, greets.line) == ("greets", None, 4)
    hello, task = greets.turns
    assert (hello.send, hello.line) == ("hello", 8)
    assert hello.expect.matches is not None and hello.expect.matches.pattern == "(?i)hello|hi"
    assert (hello.expect.within, hello.expect.reply, hello.expect.contains) == (10.0, True, ())
    assert task.expect.contains == ("No task",)
    assert task.expect.not_contains == ("Created task",)
    assert task.expect.within == DEFAULT_WITHIN
    assert quiet.instance == "assistant"
    [stop] = quiet.turns
    assert (stop.expect.reply, stop.expect.within, stop.expect.matches) == (False, 2.5, None)


def test_load_turn_without_expect_expects_a_reply_within_the_default(tmp_path: Path) -> None:
    text = 'name = "s"\nproject = "p"\n[[cases]]\nname = "c"\n[[cases.turns]]\nsend = "hi"\n'
    [case] = load_suite(write(tmp_path, text)).cases
    [turn] = case.turns
    assert (turn.expect.reply, turn.expect.within) == (True, DEFAULT_WITHIN)


HEAD = 'name = "s"\nproject = "p"\n\n[[cases]]\nname = "c"\n\n[[cases.turns]]\nsend = "hi"\n'
# The rewrite says the whole range in one sentence, whatever was wrong with the value.
WITHIN_RANGE = "within must be seconds, more than 0 and at most 3600"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (HEAD + "expect = { contain = ['x'] }\n", 9, "unknown key 'contain' in expect"),
        (HEAD + "[cases.turns.expect]\nwithin = 1\nmatch = 'x'\n", 11, "unknown key 'match'"),
        (HEAD + "expect = { matches = '([' }\n", 9, "matches is not a regular expression"),
        (HEAD + "expect = { matches = '' }\n", 9, "matches must be a regular expression"),
        (HEAD + "expect = { within = 'soon' }\n", 9, WITHIN_RANGE),
        (HEAD + "expect = { within = true }\n", 9, WITHIN_RANGE),
        (HEAD + "expect = { within = 0 }\n", 9, WITHIN_RANGE),
        (HEAD + "expect = { within = 3601 }\n", 9, WITHIN_RANGE),
        (HEAD + "expect = { reply = 'no' }\n", 9, "reply must be true or false"),
        (HEAD + "expect = { reply = false, contains = ['x'] }\n", 9, "so contains is refused"),
        (HEAD + "expect = { contains = 'x' }\n", 9, "contains must be a list of texts"),
        (HEAD + "expect = { not_contains = [''] }\n", 9, "not_contains must be a list"),
        (HEAD + "expect = 'x'\n", 9, "expect must be a table"),
        (HEAD + "wait = 3\n", 9, "unknown key 'wait' in a turn"),
        (HEAD.replace('send = "hi"', 'send = " "'), 8, "a turn needs send"),
        (HEAD.replace('send = "hi"', "send = 3"), 8, "a turn needs send"),
        (HEAD.replace('send = "hi"', 'say = "hi"'), 8, "unknown key 'say' in a turn"),
        (HEAD.replace('name = "c"', 'name = "c"\nowner = "x"'), 6, "unknown key 'owner' in a case"),
        (HEAD.replace('name = "c"', 'name = "c"\ninstance = "a b"'), 6, "instance must be"),
        (HEAD.replace('name = "c"', 'name = ""'), 5, "a case's name is missing or empty"),
        (HEAD.replace('name = "c"', f'name = "{"c" * 81}"'), 5, "at most 80 characters"),
        (HEAD.replace('name = "s"', 'name = "s\\u0007"'), 1, "none a control"),
        (HEAD.replace('project = "p"\n', ""), 1, "the project is missing"),
        (HEAD.replace('project = "p"', "projects = 1"), 2, "unknown key 'projects'"),
        (HEAD + '\n[[cases]]\nname = "c"\n[[cases.turns]]\nsend = "x"\n', 11, "second case"),
        ('name = "s"\nproject = "p"\n', 1, "a suite file needs at least one [[cases]]"),
        ('name = "s"\nproject = "p"\n[[cases]]\nname = "c"\n', 3, "needs at least one [[cases"),
        ('name = "s"\nproject = "p"\ncases = [1]\n', 3, "needs at least one [[cases]]"),
        ('name = "s"\nproject = \n', 2, "not valid TOML"),
    ],
)
def test_load_refuses_with_file_line_and_reason(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    refused = refusal(tmp_path, text)
    assert (line, True) in [(p.line, reason in p.reason) for p in refused.problems], refused


AGAIN = HEAD + 'expect = { icontains = ["hi"] }\n\n[[cases.turns]]\nregenerate = true\n'


def test_load_regenerate_turn_asks_the_turn_before_again(tmp_path: Path) -> None:
    """R24: `regenerate = true` asks the turn before again, its text, with its own expect."""
    text = AGAIN + 'expect = { not_contains = ["sorry"], within = 5 }\n'
    text += '\n[[cases.turns]]\nregenerate = true\n\n[[cases.turns]]\nsend = "bye"\n'
    [case] = load_suite(write(tmp_path, text)).cases
    hi, again, twice, bye = case.turns
    assert (hi.send, hi.regenerate, hi.expect.icontains) == ("hi", False, ("hi",))
    assert (again.send, again.regenerate, again.line) == ("hi", True, 12)
    assert (again.expect.not_contains, again.expect.icontains) == (("sorry",), ())
    assert (again.expect.within, twice.expect.within) == (5.0, DEFAULT_WITHIN)
    assert (twice.send, twice.regenerate, twice.line) == ("hi", True, 16)
    assert (bye.send, bye.regenerate) == ("bye", False)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            HEAD.replace('send = "hi"', "regenerate = true"),
            8,
            "turn 1 of case 'c' has no turn before it to regenerate",
        ),
        (AGAIN + 'send = "hi again"\n', 12, "send) or asks the turn before again"),
        (AGAIN.replace("regenerate = true", "regenerate = false"), 12, "regenerate must be true"),
        (AGAIN.replace("regenerate = true", 'regenerate = "yes"'), 12, "regenerate must be true"),
        (AGAIN.replace("regenerate = true", "regenerated = true"), 12, "unknown key 'regenerated'"),
        (AGAIN.replace("regenerate = true", "expect = {}"), 11, "a turn needs send"),
        (AGAIN + "expect = { contain = ['x'] }\n", 13, "unknown key 'contain' in expect"),
    ],
)
def test_load_refuses_a_regenerate_turn_with_file_line_and_reason(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    refused = refusal(tmp_path, text)
    assert (refused.line, reason in refused.reason) == (line, True), refused


def test_load_refuses_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteFileRefused) as caught:
        load_suite(tmp_path / "missing.suite.toml")
    assert (caught.value.line, caught.value.reason) == (
        0,
        "cannot be read (No such file or directory)",
    )


def test_load_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin.suite.toml"
    path.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(SuiteFileRefused, match="cannot be read"):
        load_suite(path)


def test_suite_files_takes_suite_files_under_a_directory_in_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    second = write(tmp_path / "b", EXAMPLE, "z.suite.toml")
    first = write(tmp_path, EXAMPLE, "a.suite.toml")
    write(tmp_path, "not a suite", "business.toml")
    named = write(tmp_path, EXAMPLE, "named.toml")
    assert suite_files([tmp_path, named]) == [first, second, named]
    assert [suite.name for suite in load_suites([tmp_path])] == ["smoke", "smoke"]


def test_suite_files_refuses_a_directory_without_suite_files(tmp_path: Path) -> None:
    with pytest.raises(SuiteFileRefused, match=r"no \.suite\.toml file"):
        suite_files([tmp_path])


def test_load_suites_refuses_when_any_file_is_refused(tmp_path: Path) -> None:
    good = write(tmp_path, EXAMPLE, "good.suite.toml")
    bad = write(tmp_path, HEAD + "expect = { nope = 1 }\n", "bad.suite.toml")
    with pytest.raises(SuiteFileRefused) as caught:
        load_suites([good, bad])
    assert (caught.value.file, caught.value.line) == (str(bad), 9)


SEND_OR = "(or regenerate = true, to ask the turn before again)"
# Three cases, each with its own mistakes, and a second file with one more.
MISTAKEN = """\
name = "s"
project = "p"
colour = "blue"

[[cases]]
name = "first"
repeat = 0
pass_rate = 2

[[cases.turns]]
send = "hi"
expect = { contain = ["x"] }

[[cases.turns]]
regenerate = true

[[cases]]
name = "second"

[[cases.turns]]
send = "hi"
expect = { within = 0 }

[[cases.turns]]
send = ""

[[cases]]
name = "first"

[[cases.turns]]
send = "hi"
"""


def test_load_suites_tells_every_mistake_of_every_file_in_order(tmp_path: Path) -> None:
    """Every key, table, case and turn is checked apart, so each mistake is told, in each file
    in order of its lines; a mistake inside a turn or its expectation hides the rest of that
    turn only. A refused turn is still the turn a `regenerate` after it asks again."""
    first = write(tmp_path, MISTAKEN, "a.suite.toml")
    second = write(tmp_path, HEAD.replace('name = "c"', 'name = "c"\nowner = "x"'), "b.suite.toml")
    good = write(tmp_path, EXAMPLE, "c.suite.toml")
    with pytest.raises(SuiteFileRefused) as caught:
        load_suites([first, second, good])
    told = [(Path(p.file).name, p.line, p.reason.split(";")[0]) for p in caught.value.problems]
    assert told == [
        ("a.suite.toml", 3, "unknown key 'colour' in a suite file"),
        ("a.suite.toml", 7, "repeat must be a whole number, 1 to 100"),
        ("a.suite.toml", 8, "pass_rate must be more than 0 and at most 1"),
        ("a.suite.toml", 12, "unknown key 'contain' in expect"),
        ("a.suite.toml", 22, "within must be seconds, more than 0 and at most 3600"),
        ("a.suite.toml", 25, f"a turn needs send, a text that is not empty {SEND_OR}"),
        ("a.suite.toml", 28, "a second case named 'first'"),
        ("b.suite.toml", 6, "unknown key 'owner' in a case"),
    ]
    assert (caught.value.file, caught.value.line) == (str(first), 3)
    assert (
        str(caught.value).splitlines()[1] == f"{first}:7: repeat must be a whole number, 1 to 100"
    )


def test_load_suites_tells_a_directory_without_files_beside_the_mistakes_of_others(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = write(tmp_path, HEAD + "expect = { nope = 1 }\n", "bad.suite.toml")
    with pytest.raises(SuiteFileRefused) as caught:
        load_suites([empty, bad])
    assert [(p.file, p.line) for p in caught.value.problems] == [(str(empty), 0), (str(bad), 9)]


@pytest.mark.parametrize(
    ("text", "told"),
    [
        # A judge table refused is not a judge missing: the judged case is not told again.
        (
            HEAD.replace("[[cases]]", "[judge]\nvotes = 2\n\n[[cases]]", 1)
            + 'expect = { judge = "polite" }\n',
            ["the judge needs base_url"],
        ),
        # A simulated user refused is not a case without turns.
        (
            'name = "s"\nproject = "p"\n[judge]\nbase_url = "http://j/v1"\nmodel = "m"\n'
            '[[cases]]\nname = "c"\n[cases.simulate]\npersona = "p"\ngoal = "g"\n',
            ["a simulated user needs max_turns"],
        ),
    ],
    ids=["judge", "simulate"],
)
def test_load_tells_a_mistake_once_not_again_as_its_consequence(
    tmp_path: Path, text: str, told: list[str]
) -> None:
    refused = refusal(tmp_path, text)
    assert [p.reason.split(",")[0] for p in refused.problems] == told


def test_line_of_finds_keys_under_the_right_array_entry() -> None:
    lines = key_lines(EXAMPLE)
    assert line_of(lines, ("cases", 1, "turns", 0, "send")) == 20
    assert line_of(lines, ("cases", 1, "turns", 0, "expect", "within")) == 24
    assert line_of(lines, ("cases", 0, "turns", 1, "expect", "contains")) == 13
    # A key of an inline table is on its table's line; an unwritten key, on its table's.
    assert line_of(lines, ("cases", 0, "turns", 0, "expect", "matches")) == 9
    assert line_of(lines, ("cases", 1, "turns", 0, "expect", "matches")) == 22
    assert line_of(lines, ("absent",)) == 0


# --- the keys of the rewrite: instances, [judge], repeats, simulated users, richer expect ------

FULL = """\
name = "full"
project = "qa"
instances = ["alpha", "beta"]

[judge]
base_url = "http://127.0.0.1:9/v1"
model = "grader"
api_key_env = "SUITE_JUDGE_KEY"
votes = 3

[[cases]]
name = "structured"
instance = "gamma"
repeat = 5
pass_rate = 0.6

[[cases.turns]]
send = "give me the record"

[cases.turns.expect]
contains = ["name"]
not_contains = ["error"]
icontains = ["ADA"]
equals = '{"name": "Ada"}'
matches = "Ada"
not_matches = "(?i)sorry"
json = true
json_schema = { type = "object", required = ["name"] }
max_seconds = 20
max_first_token_seconds = 2.5
max_completion_tokens = 64
model = "qwen"
finish_reason = "stop"
judge = "The reply names Ada."
within = 25

[[cases.turns]]
send = "again, from the file"
expect = { json_schema = "schemas/record.json" }

[cases.expect_conversation]
judge = "Polite throughout."
max_turn_seconds = 30
only_own_threads = true

[[cases]]
name = "simulated"

[cases.simulate]
persona = "a busy manager"
goal = "a task is created"
max_turns = 4
within = 12
"""
RECORD_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def test_load_full_example_reads_every_new_key(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "record.json").write_text(json.dumps(RECORD_SCHEMA))
    suite = load_suite(write(tmp_path, FULL), environ={"SUITE_JUDGE_KEY": "k"})
    assert (suite.instances, suite.judge) == (
        ("alpha", "beta"),
        JudgeConfig("http://127.0.0.1:9/v1", "grader", "SUITE_JUDGE_KEY", 3),
    )
    structured, simulated = suite.cases
    assert (structured.instance, structured.repeat, structured.pass_rate) == ("gamma", 5, 0.6)
    assert structured.line == 11
    first, second = structured.turns
    expect = first.expect
    assert (expect.contains, expect.not_contains, expect.icontains) == (
        ("name",),
        ("error",),
        ("ADA",),
    )
    assert expect.equals == '{"name": "Ada"}'
    assert expect.matches is not None and expect.matches.pattern == "Ada"
    assert expect.not_matches is not None and expect.not_matches.pattern == "(?i)sorry"
    assert (expect.json, expect.json_schema) == (True, {"type": "object", "required": ["name"]})
    assert (expect.max_seconds, expect.max_first_token_seconds) == (20.0, 2.5)
    assert (expect.max_completion_tokens, expect.model, expect.finish_reason) == (
        64,
        "qwen",
        "stop",
    )
    assert (expect.judge, expect.within, expect.reply) == ("The reply names Ada.", 25.0, True)
    # A path is read relative to the suite file, not to the directory the run starts in.
    assert (second.line, second.expect.json_schema, second.expect.json) == (
        38,
        RECORD_SCHEMA,
        False,
    )
    assert structured.expect_conversation == ConversationExpect(
        "Polite throughout.", 30.0, only_own_threads=True
    )
    assert (structured.simulate, structured.uses_judge) == (None, True)
    assert simulated.turns == ()
    assert simulated.simulate == Simulate("a busy manager", "a task is created", 4, 12.0)
    assert (simulated.instance, simulated.repeat, simulated.pass_rate) == (None, 1, 1.0)
    assert (simulated.expect_conversation, simulated.uses_judge) == (ConversationExpect(), True)


def test_load_case_without_new_keys_takes_their_defaults(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, HEAD), environ={})
    [case] = suite.cases
    assert (suite.instances, suite.judge) == ((), None)
    assert (case.repeat, case.pass_rate, case.simulate, case.uses_judge) == (1, 1.0, None, False)
    assert case.expect_conversation == ConversationExpect(None, None)
    assert case.expect_conversation.only_own_threads is False
    assert case.turns[0].expect == Expect()


def test_load_simulated_user_without_within_waits_the_default(tmp_path: Path) -> None:
    text = JUDGED_HEAD + SIMULATE.replace("max_turns = 2", "max_turns = 50")
    [case] = load_suite(write(tmp_path, text), environ={}).cases
    assert case.simulate == Simulate("a manager", "a task", 50, DEFAULT_WITHIN)


ENV = {
    "MOSAIC_JUDGE_BASE_URL": "http://judge.example:8080/v1",
    "MOSAIC_JUDGE_MODEL": "env-model",
}
RUBRIC = HEAD + 'expect = { judge = "polite" }\n'


@pytest.mark.parametrize(
    ("table", "environ", "judge"),
    [
        # No [judge] table: the variables alone name the judge, its key in MOSAIC_JUDGE_API_KEY.
        ("", ENV, JudgeConfig("http://judge.example:8080/v1", "env-model", None, 1)),
        # The table's gaps are filled from the variables.
        (
            "[judge]\nvotes = 3\n",
            ENV,
            JudgeConfig("http://judge.example:8080/v1", "env-model", None, 3),
        ),
        (
            '[judge]\nmodel = "file-model"\n',
            ENV,
            JudgeConfig("http://judge.example:8080/v1", "file-model", None, 1),
        ),
        # What the file writes wins over the variables.
        (
            '[judge]\nbase_url = "https://file.example/v1"\nmodel = "file-model"\n',
            ENV,
            JudgeConfig("https://file.example/v1", "file-model", None, 1),
        ),
        (
            '[judge]\nbase_url = "https://file.example/v1"\nmodel = "file-model"\n',
            {},
            JudgeConfig("https://file.example/v1", "file-model", None, 1),
        ),
        # One variable without the other names no judge.
        ("", {"MOSAIC_JUDGE_BASE_URL": "http://judge.example/v1"}, None),
        ("", {"MOSAIC_JUDGE_MODEL": "env-model"}, None),
        ("", {}, None),
    ],
)
def test_load_judge_fills_the_tables_gaps_from_the_environment(
    tmp_path: Path, table: str, environ: dict[str, str], judge: JudgeConfig | None
) -> None:
    text = HEAD.replace('project = "p"\n', f'project = "p"\n{table}')
    assert load_suite(write(tmp_path, text), environ=environ).judge == judge


def test_load_judge_rubric_with_the_judge_in_the_environment_is_accepted(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, RUBRIC), environ=ENV)
    assert suite.judge == JudgeConfig("http://judge.example:8080/v1", "env-model")
    assert suite.cases[0].turns[0].expect.judge == "polite"


def test_load_refuses_a_judge_base_url_from_the_environment_that_is_no_url(
    tmp_path: Path,
) -> None:
    """The variables are checked as the table's keys are: a judge that is no URL is refused
    before anything is sent, not found out by a crash in the middle of a run (urllib raises
    ValueError, not the JudgeError the runner makes an `error` of)."""
    environ = ENV | {"MOSAIC_JUDGE_BASE_URL": "judge.example/v1"}
    refused = refusal(tmp_path, RUBRIC, environ)
    assert refused.reason.startswith("the judge needs base_url, an http:// or https:// URL")


JUDGED_HEAD = (
    'name = "s"\nproject = "p"\n\n[judge]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n\n'
    '[[cases]]\nname = "c"\n'
)
# Lines 1–9 as JUDGED_HEAD; the turn's `send` on line 12, its `expect` on 13.
JUDGED = JUDGED_HEAD + '\n[[cases.turns]]\nsend = "hi"\n'
# Lines 10–14: a simulated user.
SIMULATE = '\n[cases.simulate]\npersona = "a manager"\ngoal = "a task"\nmax_turns = 2\n'
NOT_SCHEMA = "json_schema is not a JSON Schema: 12 is not valid under any of the given schemas"


def case_key(key: str) -> str:
    """JUDGED with `key` on line 10, in the case."""
    return JUDGED.replace('name = "c"\n', f'name = "c"\n{key}\n')


def judge_key(key: str) -> str:
    """JUDGED with `key` on line 7, in [judge]."""
    return JUDGED.replace('model = "m"\n', f'model = "m"\n{key}\n')


@pytest.mark.parametrize(
    ("text", "environ", "line", "reason"),
    [
        # repeat and pass_rate
        (case_key("repeat = 0"), {}, 10, "repeat must be a whole number, 1 to 100"),
        (case_key("repeat = 101"), {}, 10, "repeat must be a whole number, 1 to 100"),
        (case_key("repeat = 2.0"), {}, 10, "repeat must be a whole number, 1 to 100"),
        (case_key("repeat = true"), {}, 10, "repeat must be a whole number, 1 to 100"),
        (case_key("pass_rate = 0"), {}, 10, "pass_rate must be more than 0 and at most 1"),
        (case_key("pass_rate = 1.5"), {}, 10, "pass_rate must be more than 0 and at most 1"),
        (case_key("pass_rate = '1'"), {}, 10, "pass_rate must be more than 0 and at most 1"),
        # [judge]
        (judge_key("votes = 2"), {}, 7, "votes must be an odd number from 1 to 15"),
        (judge_key("votes = 17"), {}, 7, "votes must be an odd number from 1 to 15"),
        (judge_key("votes = 0"), {}, 7, "votes must be an odd number from 1 to 15"),
        (
            judge_key('api_key_env = "UNSET_JUDGE_KEY"'),
            {"MOSAIC_JUDGE_API_KEY": "k"},
            7,
            "api_key_env names UNSET_JUDGE_KEY, which is not set",
        ),
        (
            judge_key('api_key_env = "EMPTY_JUDGE_KEY"'),
            {"EMPTY_JUDGE_KEY": ""},
            7,
            "api_key_env names EMPTY_JUDGE_KEY, which is not set",
        ),
        (
            judge_key('api_key_env = "sk-123"'),
            {},
            7,
            "api_key_env is the NAME of the variable holding the key",
        ),
        (
            judge_key("temperature = 0"),
            {},
            7,
            "unknown key 'temperature' in [judge]; it takes api_key_env, base_url, model, votes",
        ),
        (
            JUDGED.replace('base_url = "http://127.0.0.1:9/v1"', 'base_url = "ftp://x/v1"'),
            {},
            5,
            "the judge needs base_url, an http:// or https:// URL (or MOSAIC_JUDGE_BASE_URL)",
        ),
        # Neither the table nor the variables name it: the table's line.
        (
            JUDGED.replace('base_url = "http://127.0.0.1:9/v1"\n', ""),
            {"MOSAIC_JUDGE_MODEL": "m"},
            4,
            "the judge needs base_url",
        ),
        (
            JUDGED.replace('model = "m"\n', 'model = " "\n'),
            {},
            6,
            "the judge needs model, a text (or MOSAIC_JUDGE_MODEL)",
        ),
        (
            JUDGED.replace(
                '[judge]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n', 'judge = "m"\n'
            ),
            {},
            4,
            "judge must be a table",
        ),
        # instances
        (
            JUDGED.replace('project = "p"\n', 'project = "p"\ninstances = ["a b"]\n'),
            {},
            3,
            "instances must be a list of distinct instance names",
        ),
        (
            JUDGED.replace('project = "p"\n', 'project = "p"\ninstances = ["a", "a"]\n'),
            {},
            3,
            "instances must be a list of distinct instance names",
        ),
        (
            JUDGED.replace('project = "p"\n', 'project = "p"\ninstances = "a"\n'),
            {},
            3,
            "instances must be a list of distinct instance names",
        ),
        # expect's new keys
        (JUDGED + "expect = { json_schema = { type = 12 } }\n", {}, 13, NOT_SCHEMA),
        (
            JUDGED + "expect = { json_schema = [1] }\n",
            {},
            13,
            "json_schema must be a JSON Schema: an inline table, or a JSON file's path",
        ),
        (
            JUDGED + "expect = { json_schema = 'nowhere.json' }\n",
            {},
            13,
            "json_schema {dir}/nowhere.json cannot be read (No such file or directory)",
        ),
        (JUDGED + "expect = { json = 'yes' }\n", {}, 13, "json must be true or false"),
        (
            JUDGED + "expect = { max_completion_tokens = 0 }\n",
            {},
            13,
            "max_completion_tokens must be a whole number ≥ 1",
        ),
        (
            JUDGED + "expect = { max_seconds = 0 }\n",
            {},
            13,
            "max_seconds must be seconds, more than 0 and at most 3600",
        ),
        (
            JUDGED + "expect = { max_first_token_seconds = 3601 }\n",
            {},
            13,
            "max_first_token_seconds must be seconds, more than 0 and at most 3600",
        ),
        (JUDGED + "expect = { equals = 1 }\n", {}, 13, "equals must be a text"),
        (JUDGED + "expect = { model = '' }\n", {}, 13, "model must be a text"),
        (JUDGED + "expect = { icontains = [''] }\n", {}, 13, "icontains must be a list of texts"),
        (JUDGED + "expect = { not_matches = '(' }\n", {}, 13, "not_matches is not a regular"),
        (
            JUDGED + "expect = { judge = ' ' }\n",
            {},
            13,
            "judge must be the rubric, a text that is not empty",
        ),
        (
            JUDGED + "expect = { reply = false, judge = 'polite' }\n",
            {},
            13,
            "reply = false expects no reply, so judge is refused",
        ),
        (
            JUDGED + "[cases.turns.expect]\nwithin = 5\nfinish_reason = 7\n",
            {},
            15,
            "finish_reason must be a text",
        ),
        # [cases.simulate]
        (
            JUDGED_HEAD + SIMULATE.replace("max_turns = 2", "max_turns = 0"),
            {},
            14,
            "a simulated user needs max_turns, a whole number from 1 to 50",
        ),
        (
            JUDGED_HEAD + SIMULATE.replace("max_turns = 2", "max_turns = 51"),
            {},
            14,
            "a simulated user needs max_turns, a whole number from 1 to 50",
        ),
        (
            JUDGED_HEAD + SIMULATE.replace("max_turns = 2\n", ""),
            {},
            11,
            "a simulated user needs max_turns",
        ),
        (
            JUDGED_HEAD + SIMULATE.replace('goal = "a task"', 'goal = ""'),
            {},
            13,
            "a simulated user needs goal, a text",
        ),
        (
            JUDGED_HEAD + SIMULATE + "stop_when = 'done'\n",
            {},
            15,
            "unknown key 'stop_when' in [cases.simulate]",
        ),
        (
            JUDGED_HEAD + SIMULATE + "within = 0\n",
            {},
            15,
            "within must be seconds, more than 0 and at most 3600",
        ),
        (JUDGED_HEAD + "simulate = 'yes'\n", {}, 10, "simulate must be a table"),
        # A simulated user writes the turns: a case with both is refused at its turns.
        pytest.param(
            JUDGED + SIMULATE,
            {},
            11,
            "a case has turns or a simulated user ([cases.simulate]), not both",
            id="simulate-with-turns-points-at-the-turns",
        ),
        # [cases.expect_conversation]
        (
            JUDGED + "\n[cases.expect_conversation]\nmax_turn_seconds = -1\n",
            {},
            15,
            "max_turn_seconds must be seconds, more than 0 and at most 3600",
        ),
        (
            JUDGED + "\n[cases.expect_conversation]\nrubric = 'x'\n",
            {},
            15,
            "unknown key 'rubric' in expect_conversation; it takes judge, max_cost, "
            "max_turn_seconds, only_own_threads",
        ),
        (
            JUDGED + "\n[cases.expect_conversation]\nonly_own_threads = 'yes'\n",
            {},
            15,
            "only_own_threads must be true or false",
        ),
        (
            JUDGED + "\n[cases.expect_conversation]\nonly_own_thread = true\n",
            {},
            15,
            "unknown key 'only_own_thread' in expect_conversation",
        ),
        (
            case_key("expect_conversation = 'polite'"),
            {},
            10,
            "expect_conversation must be a table",
        ),
        # A judge asked for and none configured: the line of the key that asks it.
        (RUBRIC, {}, 9, NO_JUDGE),
        (HEAD + "[cases.turns.expect]\nwithin = 5\njudge = 'polite'\n", {}, 11, NO_JUDGE),
        (HEAD + "\n[cases.expect_conversation]\njudge = 'polite'\n", {}, 11, NO_JUDGE),
        (
            HEAD.split("\n[[cases.turns]]")[0] + SIMULATE,
            {"MOSAIC_JUDGE_BASE_URL": "http://judge.example/v1"},
            7,
            NO_JUDGE,
        ),
    ],
)
def test_load_refuses_new_keys_with_file_line_and_reason(
    tmp_path: Path, text: str, environ: dict[str, str], line: int, reason: str
) -> None:
    refused = refusal(tmp_path, text, environ)
    path = tmp_path / "s.suite.toml"
    assert str(refused).startswith(f"{path}:{line}: {reason.format(dir=tmp_path)}"), refused


def test_load_refuses_a_json_schema_file_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{type: object}")
    refused = refusal(tmp_path, JUDGED + "expect = { json_schema = 'broken.json' }\n")
    assert (refused.line, refused.reason.split(":")[0]) == (
        13,
        f"json_schema {tmp_path / 'broken.json'} is not JSON",
    )


def test_load_refuses_a_json_schema_file_that_is_no_schema(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text('{"required": "name"}')
    refused = refusal(tmp_path, JUDGED + "expect = { json_schema = 'list.json' }\n")
    assert (refused.line, refused.reason) == (
        13,
        "json_schema is not a JSON Schema: 'name' is not of type 'array'",
    )


# --- datasets: a case per row of vars, its texts templates -------------------------------------

DATASET = """\
name = "s"
project = "p"

[judge]
base_url = "http://127.0.0.1:9/v1"
model = "m"

[[cases]]
name = "refund policy"
repeat = 2
vars = [{ country = "FR", amount = 20.5 }, { country = "DE", amount = 30 }]

[[cases.turns]]
send = "Can I get {amount} back in {country}? Answer as {{\\"ok\\": true}}"

[cases.turns.expect]
icontains = ["{country}"]
matches = "^{amount}\\\\d{{2}}$"
judge = "Explains {country}'s rule"

[[cases.turns]]
regenerate = true
expect = { tools = [{ name = "lookup", args = { country = { equals = "{country}" } } }] }

[cases.expect_conversation]
judge = "Never promises more than {amount}"
"""


def test_load_vars_make_a_case_per_row_named_from_its_values(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, DATASET), environ={})
    france, germany = suite.cases
    assert (france.name, germany.name) == (
        "refund policy [country=FR, amount=20.5]",
        "refund policy [country=DE, amount=30]",
    )
    assert france.vars == (("country", "FR"), ("amount", "20.5"))
    assert (france.line, france.repeat, germany.line, germany.repeat) == (8, 2, 8, 2)
    asked, again = france.turns
    assert asked.send == 'Can I get 20.5 back in FR? Answer as {"ok": true}'
    assert (asked.expect.icontains, asked.expect.judge) == (("FR",), "Explains FR's rule")
    # A value in a regular expression matches itself only; a doubled brace is the pattern's own.
    assert asked.expect.matches is not None
    assert asked.expect.matches.pattern == "^20\\.5\\d{2}$"
    assert asked.expect.matches.search("20.512") and not asked.expect.matches.search("20x512")
    assert (again.send, again.regenerate) == (asked.send, True)
    assert again.expect.tools is not None
    [argument] = again.expect.tools[0].args
    assert (argument.name, argument.expect.equals) == ("country", "FR")
    assert france.expect_conversation.judge == "Never promises more than 20.5"
    assert germany.turns[0].send == 'Can I get 30 back in DE? Answer as {"ok": true}'
    assert germany.expect_conversation.judge == "Never promises more than 30"


def test_load_vars_as_an_array_of_tables_and_in_a_simulated_user(tmp_path: Path) -> None:
    text = JUDGED_HEAD + (
        '\n[[cases.vars]]\norder = 42\n\n[[cases.vars]]\norder = "A-7"\nurgent = true\n'
    )
    refused = refusal(tmp_path, text)
    # Every row names the same columns; the refusal points at the row that differs.
    assert (refused.line, refused.reason) == (
        14,
        "vars row 2 does not have the columns of row 1 (order): urgent differs",
    )
    text = JUDGED_HEAD + (
        '\n[[cases.vars]]\norder = 42\n\n[[cases.vars]]\norder = "A-7"\n'
        '\n[cases.simulate]\npersona = "a customer of order {order}"\n'
        'goal = "a refund for order {order}"\nmax_turns = 2\n'
    )
    first, second = load_suite(write(tmp_path, text), environ={}).cases
    assert (first.name, second.name) == ("c [order=42]", "c [order=A-7]")
    assert second.simulate == Simulate("a customer of order A-7", "a refund for order A-7", 2)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        # A spreadsheet's CSV: a byte-order mark, a quoted comma, a blank line at the end.
        ("cases.csv", '\ufeffcountry,amount\nFR,"20,5"\nDE,30\n\n'),
        ("cases.json", '[{"country": "FR", "amount": "20,5"}, {"country": "DE", "amount": 30}]'),
        ("cases.jsonl", '{"country": "FR", "amount": "20,5"}\n\n{"country": "DE", "amount": 30}\n'),
    ],
)
def test_load_vars_file_relative_to_the_suite_file(tmp_path: Path, name: str, content: str) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / name).write_text(content, encoding="utf-8")
    text = HEAD.replace('name = "c"', f'name = "c"\nvars_file = "data/{name}"').replace(
        'send = "hi"', 'send = "{amount} in {country}"'
    )
    first, second = load_suite(write(tmp_path, text), environ={}).cases
    assert [(case.name, case.turns[0].send) for case in (first, second)] == [
        ("c [country=FR, amount=20,5]", "20,5 in FR"),
        ("c [country=DE, amount=30]", "30 in DE"),
    ]


def test_load_without_vars_leaves_braces_as_written(tmp_path: Path) -> None:
    """A file written before datasets keeps its meaning: a case without vars has no templates."""
    text = HEAD + "expect = { equals = '{\"name\": \"{name}\"}', matches = '\\d{2}' }\n"
    [case] = load_suite(write(tmp_path, text), environ={}).cases
    assert case.turns[0].expect.equals == '{"name": "{name}"}'
    assert case.vars == ()


def test_load_vars_row_name_over_the_limit_is_cut_and_stays_unique(tmp_path: Path) -> None:
    long = "a very long question that goes on " * 3
    text = HEAD.replace(
        'name = "c"', f'name = "c"\nvars = [{{ q = "{long}1" }}, {{ q = "{long}2" }}]'
    ).replace('send = "hi"', 'send = "{q}"')
    first, second = load_suite(write(tmp_path, text), environ={}).cases
    assert len(first.name) == len(second.name) == 80
    assert first.name.startswith("c [q=a very long question")
    assert first.name[-10:-7] == "… #" and first.name.endswith("]")
    assert first.name != second.name
    # The same row is named the same in every run: its history follows it.
    again, _ = load_suite(write(tmp_path, text), environ={}).cases
    assert again.name == first.name


def test_load_vars_row_name_escapes_control_characters(tmp_path: Path) -> None:
    text = HEAD.replace('name = "c"', 'name = "c"\nvars = [{ q = "two\\nlines\\u0007" }]')
    [case] = load_suite(write(tmp_path, text.replace('send = "hi"', 'send = "{q}"'))).cases
    assert case.name == "c [q=two lines\\x07]"
    assert case.turns[0].send == "two\nlines\x07"


# The dataset case of the refusals below: `vars` on line 6, the turn's send on 9, its expect 10.
ROWS = HEAD.replace('name = "c"', 'name = "c"\nvars = [{ city = "Paris" }, { city = "Lyon" }]')
ROWS = ROWS.replace('send = "hi"', 'send = "weather in {city}?"')


def rows_with(vars_line: str) -> str:
    return ROWS.replace('vars = [{ city = "Paris" }, { city = "Lyon" }]', vars_line)


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            ROWS + "expect = { contains = ['{town}'] }\n",
            10,
            "{town} in turns[1].expect.contains[1] names no column of the case's vars (city)",
        ),
        (
            ROWS.replace("{city}", "{City}"),
            9,
            "{City} in turns[1].send names no column of the case's vars (city)",
        ),
        (
            rows_with('vars = [{ city = "Paris", day = "monday" }]'),
            6,
            "column day of the case's vars is placed nowhere",
        ),
        (ROWS + "expect = { equals = '{\"a\": 1}' }\n", 10, "'{\"a\": 1}' in turns[1].expect"),
        (ROWS.replace("{city}?", "{city}? }"), 9, "'}' in turns[1].send is no placeholder"),
        (ROWS.replace("{city}?", "{city}? {}"), 9, "'{}' in turns[1].send is no placeholder"),
        (ROWS.replace("{city}?", "{city}? {2x}"), 9, "'{2x}' in turns[1].send"),
        (rows_with("vars = []"), 6, "vars must be a list of one or more tables"),
        (rows_with('vars = { city = "Paris" }'), 6, "vars must be a list of one or more tables"),
        (rows_with('vars = ["Paris"]'), 6, "vars row 1 must be a table"),
        (rows_with("vars = [{}]"), 6, "vars row 1 has no values"),
        (
            rows_with('vars = [{ city = ["Paris"] }]'),
            6,
            "vars row 1: city must be a text, a number, true or false",
        ),
        (
            rows_with('vars = [{ city = "Paris" }, { town = "Lyon" }]'),
            6,
            "vars row 2 does not have the columns of row 1 (city): city differs",
        ),
        (
            rows_with('vars = [{ city = "Paris" }, { city = "Lyon" }, { city = "Paris" }]'),
            6,
            "vars rows 1 and 3 hold the same values",
        ),
        (
            rows_with('vars = [{ "the city" = "Paris" }]'),
            6,
            "vars: column 'the city' is no name a placeholder can use",
        ),
        (
            rows_with('vars = [{ city = "Paris" }]\nvars_file = "cities.csv"'),
            7,
            "a case takes vars or vars_file, not both",
        ),
        (rows_with("vars_file = 3"), 6, "vars_file must be a file's path, as a text"),
        (
            rows_with('vars_file = "nowhere.csv"'),
            6,
            "vars_file nowhere.csv cannot be read (No such file or directory)",
        ),
        (rows_with('vars_file = "cities.xlsx"'), 6, "vars_file cities.xlsx must be a .csv, .json"),
        (rows_with('var = [{ city = "Paris" }]'), 6, "unknown key 'var' in a case; it takes"),
        # A refusal of one row's case names the row.
        (
            rows_with('vars = [{ city = "Paris" }, { city = " " }]').replace(
                'send = "weather in {city}?"', 'send = "{city}"'
            ),
            9,
            "row 2 (city= ): a turn needs send, a text that is not empty",
        ),
        # A row named as another case is: the second case's name.
        (
            rows_with('vars = [{ city = "Paris" }]')
            + '\n[[cases]]\nname = "c [city=Paris]"\n[[cases.turns]]\nsend = "x"\n',
            12,
            "a second case named 'c [city=Paris]'",
        ),
    ],
)
def test_load_refuses_a_dataset_with_file_line_and_reason(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    refused = refusal(tmp_path, text)
    assert (refused.line, refused.reason.startswith(reason)) == (line, True), refused


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "vars_file cities.csv has no header row (the columns' names)"),
        ("city\n", "vars_file cities.csv has no rows"),
        ("city,day\nParis\n", "vars_file cities.csv line 2 has 1 values; the header names 2"),
        ("city\nParis,monday\n", "vars_file cities.csv line 2 has 2 values; the header names 1"),
        ('city\n"Paris\n', "vars_file cities.csv is not valid CSV at line 2: unexpected end"),
        ("city,city\nParis,Lyon\n", "vars_file cities.csv: column 'city' is named twice"),
        ("the city\nParis\n", "vars_file cities.csv: column 'the city' is no name"),
        ("city\nParis\nParis\n", "vars_file cities.csv rows 1 and 2 hold the same values"),
        ("city\n" + "".join(f"c{n}\n" for n in range(1001)), "vars_file cities.csv has more than"),
    ],
)
def test_load_refuses_a_bad_csv_at_the_vars_file_line(
    tmp_path: Path, content: str, reason: str
) -> None:
    (tmp_path / "cities.csv").write_text(content, encoding="utf-8")
    refused = refusal(tmp_path, rows_with('vars_file = "cities.csv"'))
    assert (refused.line, refused.reason.startswith(reason)) == (6, True), refused


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("cities.json", '{"city": "Paris"}', "vars_file cities.json must hold a JSON array of"),
        ("cities.json", '[{"city": "Paris"},', "vars_file cities.json is not JSON at line 1"),
        ("cities.json", '[{"city": null}]', "vars_file cities.json row 1: city must be a text"),
        ("cities.jsonl", '{"city": "Paris"}\n[1]\n', "vars_file cities.jsonl line 2 must be a"),
        ("cities.jsonl", '{"city": "Paris"}\n{\n', "vars_file cities.jsonl line 2 is not JSON"),
        ("cities.json", "[]", "vars_file cities.json has no rows"),
    ],
)
def test_load_refuses_a_bad_json_vars_file(
    tmp_path: Path, name: str, content: str, reason: str
) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    refused = refusal(tmp_path, rows_with(f'vars_file = "{name}"'))
    assert (refused.line, refused.reason.startswith(reason)) == (6, True), refused


# --- pricing and max_cost ---------------------------------------------------------------------

PRICED = HEAD.replace(
    'project = "p"\n',
    'project = "p"\n\n[pricing.gpt-x]\ninput = 2.5\noutput = 10\n\n'
    '[pricing."gpt-4.1"]\ninput = 0\noutput = 0.4\n',
)


def test_load_pricing_and_max_cost(tmp_path: Path) -> None:
    text = PRICED + "expect = { max_cost = 0.01 }\n\n[cases.expect_conversation]\nmax_cost = 1\n"
    suite = load_suite(write(tmp_path, text), environ={})
    assert suite.pricing == {"gpt-x": Price(2.5, 10.0), "gpt-4.1": Price(0.0, 0.4)}
    assert (suite.price_of("gpt-4.1"), suite.price_of("gpt-y"), suite.price_of(None)) == (
        Price(0.0, 0.4),
        None,
        None,
    )
    [case] = suite.cases
    assert case.turns[0].expect.max_cost == 0.01
    assert case.expect_conversation == ConversationExpect(max_cost=1.0)


def test_load_without_pricing_prices_nothing(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, HEAD), environ={})
    assert (suite.pricing, suite.cases[0].turns[0].expect.max_cost) == ({}, None)


PRICE_RANGE = "a number from 0 to 1,000,000"
MAX_COST_RANGE = "max_cost must be an amount, more than 0 and at most 1,000,000"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (
            PRICED.replace("input = 2.5", "input = -1"),
            5,
            "[pricing.gpt-x] needs input, the price of a million input tokens",
        ),
        (PRICED.replace("output = 10", "output = '10'"), 6, "[pricing.gpt-x] needs output"),
        (PRICED.replace("output = 10", "output = nan"), 6, PRICE_RANGE),
        (PRICED.replace("output = 10", "output = inf"), 6, PRICE_RANGE),
        (PRICED.replace("output = 10", "output = true"), 6, PRICE_RANGE),
        (PRICED.replace("output = 10\n", ""), 4, "[pricing.gpt-x] needs output, the price of a"),
        # A dotted name is quoted; its refusal still finds its line.
        (PRICED.replace("output = 0.4", "output = 2e6"), 10, "[pricing.gpt-4.1] needs output"),
        (
            PRICED.replace("output = 10", "output = 10\ncached = 1"),
            7,
            "unknown key 'cached' in [pricing.gpt-x]; it takes input, output",
        ),
        (
            HEAD.replace('project = "p"\n', 'project = "p"\npricing = 2.5\n'),
            3,
            "pricing must be a table per model: [pricing.MODEL] input = …, output = …",
        ),
        (
            HEAD.replace('project = "p"\n', 'project = "p"\n[pricing]\ninput = 2.5\n'),
            3,
            "pricing must be a table per model",
        ),
        (
            HEAD.replace('project = "p"\n', f'project = "p"\n[pricing."{"m" * 201}"]\n'),
            3,
            "a priced model's name must be 1 to 200 characters",
        ),
        (HEAD + "expect = { max_cost = 0 }\n", 9, MAX_COST_RANGE),
        (HEAD + "expect = { max_cost = '1' }\n", 9, MAX_COST_RANGE),
        (HEAD + "expect = { max_cost = 1e7 }\n", 9, MAX_COST_RANGE),
        (HEAD + "expect = { reply = false, max_cost = 1 }\n", 9, "so max_cost is refused"),
        (HEAD + "\n[cases.expect_conversation]\nmax_cost = -1\n", 11, MAX_COST_RANGE),
    ],
)
def test_load_refuses_pricing_and_max_cost_with_file_line_and_reason(
    tmp_path: Path, text: str, line: int, reason: str
) -> None:
    refused = refusal(tmp_path, text)
    assert (refused.line, reason in refused.reason) == (line, True), refused
