"""A pytest session stored as a test run (`--mosaic-store`, `tester.suites.pytest_history`): the
plugin in a pytester subprocess against a real `manage.py serve` (the offline backend), its run
read back through `GET /api/suite-runs` as any client reads it.

A session stores each suite-file case as `mosaic-test` stores it, and ends finished; compared
(`--mosaic-compare last`), it finds the last finished run of the same selection, never a partial
session's for a full one; interrupted, stopped by `-x`, or refused by the listener, it ends
halted with why."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from typing import Any

import pytest

from tester.suites.definitions import definition_hash
from tester.suites.files import load_suite
from tester.suites.pytest_history import selection_label
from tester.suites.runner import plans
from tests.console.pages import unique
from tests.support.served import Served
from tests.support.suite_runs import run_testassistant, write_suite

HEAD = """
name = "{name}"
project = "qa"
"""
GREETS = """
[[cases]]
name = "greets"

[[cases.turns]]
send = "hello"
expect = { matches = "(?i)hello" }
"""
TASK = """
[[cases]]
name = "task refused"

[[cases.turns]]
send = "task: ship it"
expect = { contains = ["No task"] }
"""
GOODBYE = """
[[cases]]
name = "expects goodbye"

[[cases.turns]]
send = "hello"
expect = { contains = ["Goodbye"] }
"""
SUITE = HEAD + GREETS + TASK + GOODBYE
# The verdicts of SUITE's cases on the offline backend, in the file's order.
VERDICTS = [("greets", "pass"), ("task refused", "pass"), ("expects goodbye", "fail")]


def session(pytester: pytest.Pytester, plugin_live: Served, *arguments: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--mosaic-url", plugin_live.url, *arguments
    )


def suite_named(pytester: pytest.Pytester, file: str = "a.suite.toml") -> str:
    """A suite of its own name, so no other test's runs are its history."""
    name = unique("stored")
    write_suite(pytester.path, SUITE.replace("{name}", name), file)
    return name


def stored_id(result: pytest.RunResult) -> int:
    """The stored run the session's summary names: `… (run 12) in 1.2 s`."""
    found = re.findall(r"\(run (\d+)\) in ", result.stdout.str())
    assert len(found) == 1, result.stdout.str()
    return int(found[0])


def stored(plugin_live: Served, run_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    answer = plugin_live.tester.get(f"/api/suite-runs/{run_id}?limit=500")
    return answer["run"], answer["cases"]


def test_store_keeps_each_case_as_mosaic_test_does_in_a_finished_run(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    """The session's cases, stored one by one as the command stores them (the same record but
    for its threads and timings), in a run that finished, newest in `GET /api/suite-runs`."""
    name = suite_named(pytester)
    result = session(pytester, plugin_live, "--mosaic-store")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- mosaic test run -*",
            f"PASS  {name} · greets (1 turn) · 1/1 pass, 95% interval 21–100%",
            f"FAIL  {name} · expects goodbye: turn 1 “hello”: expected the reply contains "
            "'Goodbye'; got “Hello! I am assistant.*",
            "2 pass, 0 flaky, 1 fail, 0 error (run *) in * s*",
        ]
    )
    run_id = stored_id(result)
    assert plugin_live.tester.get("/api/suite-runs?limit=1")["runs"][0]["id"] == run_id
    run, cases = stored(plugin_live, run_id)
    assert (run["state"], run["reason"], run["suites"]) == ("finished", None, [name])
    assert (run["keyword"], run["instances"], run["baseline"]) == (None, [""], None)
    assert run["counts"] == {"pass": 2, "flaky": 0, "fail": 1, "error": 0, "regressed": 0}
    assert [(case["case"], case["verdict"]) for case in cases] == VERDICTS
    suite = load_suite(pytester.path / "a.suite.toml")
    assert [case["definition_hash"] for case in cases] == [
        definition_hash(suite, case) for case in suite.cases
    ]
    assert all(len(case["threads"]) == 1 and case["repeats"] for case in cases)
    # The command's records of the same file: the same fields, and the same values but for
    # the threads and timings of the repeats that made them.
    ran = run_testassistant(pytester.path / "a.suite.toml", "--url", plugin_live.url, "--json")
    _, by_command = stored(plugin_live, ran.json_lines()[-1]["summary"]["run"])
    assert [record_shape(case) for case in cases] == [record_shape(case) for case in by_command]


def record_shape(case: dict[str, Any]) -> dict[str, Any]:
    """A stored case without what differs between two runs of it: ids (a step's call id is
    made of its turn's), threads, times."""
    kept = {
        key: value
        for key, value in case.items()
        if key not in ("id", "threads", "repeats", "attempts", "created_at")
    }
    kept["repeats"] = [
        {"passed": repeat["passed"], "turns": [turn_shape(turn) for turn in repeat["turns"]]}
        for repeat in case["repeats"]
    ]
    return kept


def turn_shape(turn: dict[str, Any]) -> dict[str, Any]:
    kept = {
        key: value
        for key, value in turn.items()
        if key not in ("id", "reply_id", "seconds", "first_token_seconds", "steps")
    }
    kept["steps"] = [
        {key: value for key, value in step.items() if key != "call_id"} for step in turn["steps"]
    ]
    return kept


def test_compare_last_finds_the_last_finished_session_of_the_same_selection(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    """`--mosaic-compare last` compares with the last finished run of the same selection: a
    full session with the full one before it, a `-k` session never with a full one, only with
    the same `-k` before it; each case's change is a JUnit property and on its line."""
    suite_named(pytester)
    first = stored_id(session(pytester, plugin_live, "--mosaic-store"))
    junit = pytester.path / "junit.xml"
    again = session(pytester, plugin_live, "--mosaic-compare", "last", f"--junitxml={junit}")
    again.assert_outcomes(passed=2, failed=1)
    again.stdout.fnmatch_lines(
        ["PASS  * · greets (1 turn) · 1/1 pass, 95% interval 21–100% · same"]
    )
    run, cases = stored(plugin_live, stored_id(again))
    assert (run["baseline"], run["state"]) == (first, "finished")
    assert [case["change"] for case in cases] == ["same", "same", "same"]
    changes = [
        {p.get("name"): p.get("value") for p in case.iter("property")}["change"]
        for case in ElementTree.parse(junit).getroot().iter("testcase")
    ]
    assert changes == ["same", "same", "same"]
    # A partial session is its own selection: no baseline among full sessions…
    narrow = session(pytester, plugin_live, "-k", "greets", "--mosaic-compare", "last")
    narrowed, cases = stored(plugin_live, stored_id(narrow))
    assert narrowed["baseline"] is None
    assert narrowed["keyword"].startswith("pytest: 1 of 3 cases #")
    assert [case["change"] for case in cases] == ["new"]
    # … and the baseline of the same partial session after it.
    narrow_again = session(pytester, plugin_live, "-k", "greets", "--mosaic-compare", "last")
    assert stored(plugin_live, stored_id(narrow_again))[0]["baseline"] == narrowed["id"]


def test_interrupted_session_ends_halted_keeping_its_cases(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    """Ctrl-C (a KeyboardInterrupt in a test after the suite file's) halts the stored run with
    why; the cases recorded before it stay."""
    suite_named(pytester)
    pytester.makepyfile(test_zz_stop="def test_stop():\n    raise KeyboardInterrupt\n")
    result = session(pytester, plugin_live, "--mosaic-store")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["the test run was halted: interrupted: the pytest session was stopped (Ctrl-C)"]
    )
    run, cases = stored(plugin_live, stored_id(result))
    assert (run["state"], run["reason"]) == (
        "halted",
        "interrupted: the pytest session was stopped (Ctrl-C)",
    )
    assert [(case["case"], case["verdict"]) for case in cases] == VERDICTS


def test_session_stopped_by_x_before_every_case_ran_ends_halted(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    """`-x` stops after the first failure: the cases it left unrun make the run halted (a run
    missing cases is no baseline), saying how many."""
    failing_first = HEAD + GOODBYE + GREETS + TASK
    write_suite(pytester.path, failing_first.replace("{name}", unique("stopped")), "a.suite.toml")
    result = session(pytester, plugin_live, "--mosaic-store", "-x")
    result.assert_outcomes(failed=1)
    run, cases = stored(plugin_live, stored_id(result))
    assert run["state"] == "halted"
    assert run["reason"] == (
        "the pytest session stopped early (stopping after 1 failures): 2 of 3 cases not run"
    )
    assert [(case["case"], case["verdict"]) for case in cases] == [("expects goodbye", "fail")]


def test_listener_refusing_a_case_halts_the_run_with_its_refusal(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    """A refusal (an unknown instance: `not-found`) is no verdict on the assistant: the stored
    run is halted with it, as `mosaic-test` halts its own."""
    on_nobody = HEAD + 'instances = ["nobody"]\n' + GREETS + TASK + GOODBYE
    write_suite(pytester.path, on_nobody.replace("{name}", unique("refused")), "a.suite.toml")
    result = session(pytester, plugin_live, "--mosaic-store")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(["*not-found: No instance named 'nobody'.*"])
    run, cases = stored(plugin_live, stored_id(result))
    assert run["state"] == "halted"
    assert run["reason"].startswith("not-found: No instance named 'nobody'.")
    assert (run["instances"], cases) == (["nobody"], [])


def test_without_the_option_nothing_is_stored(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    suite_named(pytester)
    newest = plugin_live.tester.get("/api/suite-runs?limit=1")["runs"]
    result = session(pytester, plugin_live)
    result.assert_outcomes(passed=2, failed=1)
    assert "mosaic test run" not in result.stdout.str()
    assert plugin_live.tester.get("/api/suite-runs?limit=1")["runs"] == newest


def test_selection_label_is_none_for_every_case_else_names_the_selection(tmp_path: Any) -> None:
    path = write_suite(tmp_path, SUITE.replace("{name}", "labelled"))
    every = plans([load_suite(path, {})])
    assert selection_label(every, every) is None
    assert selection_label(list(reversed(every)), every) is None
    one = selection_label(every[:1], every)
    assert one is not None and one.startswith("pytest: 1 of 3 cases #")
    assert selection_label(every[:1], every) == one
    assert selection_label(every[1:2], every) != one
