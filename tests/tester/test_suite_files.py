"""Suite files: what is read, and every refusal with its file, line and reason (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tester.suites.files import (
    DEFAULT_WITHIN,
    SuiteFileRefused,
    key_lines,
    line_of,
    load_suite,
    load_suites,
    suite_files,
)

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


def refusal(tmp_path: Path, text: str) -> SuiteFileRefused:
    path = write(tmp_path, text)
    with pytest.raises(SuiteFileRefused) as caught:
        load_suite(path)
    assert caught.value.file == str(path)
    assert str(caught.value) == f"{path}:{caught.value.line}: {caught.value.reason}"
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


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (HEAD + "expect = { contain = ['x'] }\n", 9, "unknown key 'contain' in expect"),
        (HEAD + "[cases.turns.expect]\nwithin = 1\nmatch = 'x'\n", 11, "unknown key 'match'"),
        (HEAD + "expect = { matches = '([' }\n", 9, "matches is not a regular expression"),
        (HEAD + "expect = { matches = '' }\n", 9, "matches must be a regular expression"),
        (HEAD + "expect = { within = 'soon' }\n", 9, "within must be a number of seconds"),
        (HEAD + "expect = { within = true }\n", 9, "within must be a number of seconds"),
        (HEAD + "expect = { within = 0 }\n", 9, "within must be more than 0"),
        (HEAD + "expect = { within = 3601 }\n", 9, "at most 3600 seconds"),
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


def test_line_of_finds_keys_under_the_right_array_entry() -> None:
    lines = key_lines(EXAMPLE)
    assert line_of(lines, ("cases", 1, "turns", 0, "send")) == 20
    assert line_of(lines, ("cases", 1, "turns", 0, "expect", "within")) == 24
    assert line_of(lines, ("cases", 0, "turns", 1, "expect", "contains")) == 13
    # A key of an inline table is on its table's line; an unwritten key, on its table's.
    assert line_of(lines, ("cases", 0, "turns", 0, "expect", "matches")) == 9
    assert line_of(lines, ("cases", 1, "turns", 0, "expect", "matches")) == 22
    assert line_of(lines, ("absent",)) == 0
