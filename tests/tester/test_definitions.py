"""A case's definition hash (`tester.suites.definitions`): the same for the same test, another
when what it sends, expects or asks the judge changes, whatever else changes around it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tester.suites.definitions import definition_hash
from tester.suites.files import load_suite

BASE = """
name = "smoke"
project = "qa"

[judge]
base_url = "http://127.0.0.1:4000/v1"
model = "judge"

[[cases]]
name = "greets"
repeat = 3

[[cases.turns]]
send = "hello"
expect = { icontains = ["hello"], judge = "Friendly" }
"""


def hash_of(tmp_path: Path, text: str) -> str:
    path = tmp_path / "case.suite.toml"
    path.write_text(text, encoding="utf-8")
    suite = load_suite(path, {})
    return definition_hash(suite, suite.cases[0])


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('send = "hello"', 'send = "hello there"'),
        ('icontains = ["hello"]', 'icontains = ["hi"]'),
        ('judge = "Friendly"', 'judge = "Friendly and brief"'),
        ('judge = "Friendly" }', 'judge = "Friendly", within = 10 }'),
        ('model = "judge"', 'model = "judge-2"'),
        ('model = "judge"', 'model = "judge"\nvotes = 3'),
        ('expect = { icontains = ["hello"], judge = "Friendly" }', ""),
        ("repeat = 3", "repeat = 3\nexpect_conversation = { only_own_threads = true }"),
    ],
    ids=[
        "send",
        "expectation",
        "rubric",
        "wait",
        "judge model",
        "judge votes",
        "no expect",
        "isolation",
    ],
)
def test_definition_hash_changes_with_what_the_case_tests(
    tmp_path: Path, old: str, new: str
) -> None:
    assert old in BASE
    assert hash_of(tmp_path, BASE.replace(old, new)) != hash_of(tmp_path, BASE)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('name = "greets"', 'name = "greets"\ninstance = "helper"'),
        ("repeat = 3", "repeat = 10\npass_rate = 0.5"),
        ('base_url = "http://127.0.0.1:4000/v1"', 'base_url = "http://10.0.0.2/v1"'),
        ('project = "qa"', 'project = "qa"\n\n'),
        ('judge = "Friendly" }', 'judge = "Friendly", within = 30 }'),
        ("repeat = 3", "repeat = 3\nexpect_conversation = { only_own_threads = false }"),
    ],
    ids=[
        "instance",
        "repeat and pass rate",
        "judge's server",
        "lines",
        "a default written",
        "isolation's default written",
    ],
)
def test_definition_hash_keeps_to_the_test_not_how_it_is_run(
    tmp_path: Path, old: str, new: str
) -> None:
    """Not the instance, how often or how strictly it runs, where the judge is served, the
    file's lines, nor a default written out."""
    assert old in BASE
    assert hash_of(tmp_path, BASE.replace(old, new)) == hash_of(tmp_path, BASE)


def test_definition_hash_is_a_sha256_stable_across_reads(tmp_path: Path) -> None:
    first = hash_of(tmp_path, BASE)
    assert len(first) == 64 and set(first) <= set("0123456789abcdef")
    assert hash_of(tmp_path, BASE) == first
