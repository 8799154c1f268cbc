"""The `--markdown` summary (`tester/suites/markdown_report.py`), read back as a renderer reads
it: another party's text stays text in its cell, the counts, p-values and cost are where a
reviewer looks, and the command runs the test run again (pure)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tester.suites import cli
from tester.suites.client import Outcome, Reply
from tester.suites.expectation_keys import Expect
from tester.suites.files import Case, Suite, Turn
from tester.suites.markdown_report import command, fenced, markdown_text, summary, table
from tester.suites.matchers import Failure
from tester.suites.runner import FAIL, PASS, CaseReport, Plan, Repeat, TestRun, TurnRecord
from tester.suites.visible import visible
from tests.support.markdown_reading import markup_in, read

HOSTILE = [
    "a | b || c |",
    "`code` and ``` fence",
    "![x](http://198.51.100.7/x.png)",
    "[click](http://198.51.100.7/) <http://198.51.100.7/> www.example.com http://198.51.100.7",
    "<script>alert(1)</script><img src=x onerror=alert(1)>",
    "\x1b[2K\r\x1b[32mPASS\x1b[0m \x9b2K\u202eok",
    "line one\nline two\r\n| new | row |\n\n# heading",
    "*em* _em_ **strong** ~~gone~~ $x$ &amp; &#60;script&#62; \\| \\",
    "- item\n1. item\n> quote\n    code\n---",
    "[ref]: http://198.51.100.7/\n[ref]",
    "ada@example.com #12 @someone :smile:",
]


def shown(text: str) -> str:
    """What the reader should see: the text on one line, its controls as escapes."""
    return " ".join(visible(text).split())


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_in_a_table_cell_is_that_text_and_nothing_else(text: str) -> None:
    document = read("\n".join(table(["before", "text", "after"], [["1", text, "2"]])))
    assert document.tables == [[["before", "text", "after"], ["1", shown(text), "2"]]]
    assert markup_in(document) == set()
    # Nothing GitHub's autolinks start at is left unescaped (markdown-it's CommonMark has no
    # such links to show it).
    unescaped = re.sub(r"\\.", "", markdown_text(text))
    assert [part for part in (":", "www.", "@", "#") if part in unescaped] == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_markdown_text_of_any_text_reads_back_as_it(text: str) -> None:
    """Whatever the text, in a cell or a paragraph: one cell, the text shown, no markup."""
    document = read("\n".join(table(["text", "after"], [[text, "end"]])))
    assert document.tables == [[["text", "after"], [shown(text), "end"]]]
    assert markup_in(document) == set()
    paragraph = read(f"before {markdown_text(text)} after")
    assert paragraph.paragraphs == [f"before {shown(text)} after"]
    assert markup_in(paragraph) == set()


def test_markdown_text_cuts_before_it_escapes() -> None:
    assert markdown_text("a|b|c|d", 4) == "a\\|b…"


def test_command_is_quoted_and_fenced_past_any_backticks() -> None:
    """The arguments as run, each quoted for a shell, in a fence no argument can close."""
    argv = ["suites dir", "-k", "a`b", "--html", "```\n``````", "--url", "$(rm -rf ~)"]
    written = command(argv)
    document = read("\n".join(fenced(written)))
    assert document.fences == [("sh", written + "\n")]
    assert shlex.split(written) == ["mosaic-test", *argv]
    assert fenced("plain")[0] == "```sh"


def test_command_shows_a_control_character_escaped() -> None:
    assert command(["a\x1bb"]) == "mosaic-test 'a\\x1bb'"


SUITE = Suite("smoke", "qa", (), "smoke.suite.toml")
USAGE = {"prompt_tokens": 10, "completion_tokens": 5}


def case_report(
    name: str,
    verdict: str,
    change: str | None,
    *,
    p: float | None = None,
    before: tuple[int, int] | None = None,
    usage: dict[str, int] | None = USAGE,
) -> CaseReport:
    failure = Failure("the reply contains 'Paris'", "Lyon | Marseille") if verdict == FAIL else None
    message = {"id": 2, "usage": usage, "model": "m"}
    reply = Reply(failure.actual if failure else "Paris.", message)
    turn = TurnRecord(1, "capital?", Outcome({"id": 1}, reply, "answered", None), failure)
    repeats = [
        Repeat(n, 10 + n, "alpha", [turn], failure=failure, failed_turn=1 if failure else None)
        for n in range(1, 5)
    ]
    case = Case(name, (Turn("capital?", Expect(), 1),), None, line=1)
    made = CaseReport(Plan(SUITE, case, None, 4), repeats, verdict, change)
    made.p_value, made.baseline_tally = p, before
    return made


def compared_run() -> TestRun:
    return TestRun(
        reports=[
            case_report("capital", FAIL, "regressed", p=1 / 70, before=(4, 4)),
            case_report("weather", PASS, "fixed", p=1 / 70, before=(0, 4)),
            case_report("greets", PASS, "same", p=1.0, before=(4, 4)),
        ]
    )


def test_summary_counts_verdicts_and_changes_and_lists_regressions_and_fixes() -> None:
    argv = ["suites", "--compare", "last", "--markdown", "out.md"]
    written = summary(compared_run(), run_id=12, baseline=11, compare="last", alpha=0.05, argv=argv)
    document = read(written)
    verdicts, changes, regressed, fixed = document.tables
    assert verdicts == [["pass", "flaky", "fail", "error", "not run"], ["2", "0", "1", "0", "0"]]
    assert changes == [["regressed", "fixed", "changed", "new", "same"], ["1", "1", "0", "0", "1"]]
    assert regressed == [
        ["case", "baseline", "this run", "p-value", "where it first went wrong"],
        [
            "smoke · capital",
            "4/4",
            "0/4 fail",
            "0.014",
            "repeat 1, turn 1 “capital?”: expected the reply contains 'Paris'; "
            "got “Lyon | Marseille”",
        ],
    ]
    assert fixed == [
        ["case", "baseline", "this run", "p-value"],
        ["smoke · weather", "0/4", "4/4 pass", "0.014"],
    ]
    assert document.headings == ["Conversation tests: run 12", "Regressed", "Fixed"]
    assert "Run 12, compared with run 11 (--compare last) at alpha 0.05." in document.paragraphs
    assert "Tokens and cost: tokens 120 in, 60 out · cost unknown (12 turns without a price)" in (
        document.paragraphs
    )
    assert document.fences == [("sh", f"mosaic-test {shlex.join(argv)}\n")]
    assert markup_in(document) == set()


def test_summary_of_a_run_not_compared_has_no_changes() -> None:
    test_run = TestRun(reports=[case_report("greets", PASS, None, usage=None)])
    document = read(summary(test_run, run_id=3, baseline=None, compare=None, alpha=0.05, argv=[]))
    assert len(document.tables) == 1
    assert "Run 3, not compared with an earlier run." in document.paragraphs
    assert "Tokens and cost: tokens unknown · cost unknown (4 turns without usage)" in (
        document.paragraphs
    )
    assert document.fences == [("sh", "mosaic-test\n")]


def test_summary_says_when_no_run_matched_the_baseline_asked() -> None:
    test_run = TestRun(reports=[case_report("greets", PASS, "new")])
    document = read(summary(test_run, run_id=3, baseline=None, compare="last", alpha=0.05, argv=[]))
    assert "Run 3, compared with no run: none matched --compare last." in document.paragraphs


def test_as_argv_parses_back_to_the_same_options() -> None:
    """`testassistant` has no argv of `mosaic-test`'s: the summary's command is rebuilt from the
    options, and parses back to them; Django's own options are left out."""
    flags = [
        "--url=http://127.0.0.1:7333",
        "-k",
        "greets",
        "--instance",
        "a",
        "--instance",
        "b",
        "--compare",
        "last",
        "--alpha",
        "0.01",
        "--max-cost",
        "0.5",
        "--keep-threads",
        "--markdown",
        "out.md",
    ]
    options = cli.parser().parse_args([*flags, "--", "suites", "-odd.suite.toml"])
    with_django = argparse.Namespace(**vars(options), verbosity=1, settings=None, traceback=False)
    rebuilt = cli.as_argv(with_django)
    assert "--verbosity" not in rebuilt and rebuilt[-3:] == ["--", "suites", "-odd.suite.toml"]
    assert vars(cli.parser().parse_args(rebuilt)) == vars(options)
    assert cli.as_argv(cli.parser().parse_args(["suites"])) == ["suites"]
