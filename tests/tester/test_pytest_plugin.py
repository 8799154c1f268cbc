"""The pytest plugin, enabled inside the project by `pytest_plugins =
["tester.suites.pytest_plugin"]`, run by pytester in a pytest of its own against a real
`manage.py serve` with the offline backend. (Installed, it needs no conftest line:
test_installed_client.py.)"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from tests.support.model_servers import FakeModel, serve_fake_model
from tests.support.served import Served
from tests.support.suite_runs import (
    FAILING,
    GREETS,
    SPOOFED,
    SPOOFING_REPLY,
    add_model_instance,
    write_suite,
)


def run(pytester: pytest.Pytester, plugin_live: Served, *arguments: str) -> pytest.RunResult:
    # In a process of its own: this suite's Django settings stay out of it.
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--mosaic-url", plugin_live.url, *arguments
    )


def test_plugin_collects_each_case_of_a_suite_file_as_a_test(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    write_suite(pytester.path, GREETS, "smoke.suite.toml")
    write_suite(pytester.path, FAILING, "wrong.suite.toml")
    junit = pytester.path / "junit.xml"
    result = run(pytester, plugin_live, "-v", f"--junitxml={junit}")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*smoke.suite.toml::greets PASSED*",
            "*smoke.suite.toml::task refused PASSED*",
            "*wrong.suite.toml::expects goodbye FAILED*",
            "*turn 1 “hello”",
            "*expected: the reply contains 'Goodbye'",
            "*actual: Hello! I am assistant.*",
        ]
    )
    cases = list(ElementTree.parse(junit).getroot().iter("testcase"))
    assert [case.get("name") for case in cases] == [
        "greets",
        "task refused",
        "greets",
        "expects goodbye",
    ]
    properties = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    # Each deprecated name beside its new one, with the same value.
    assert (properties["passed_repeats"], properties["repeat_count"]) == ("1", "1")
    assert (properties["passed_runs"], properties["runs"]) == ("1", "1")


def test_plugin_selects_cases_with_k(plugin_live: Served, pytester: pytest.Pytester) -> None:
    write_suite(pytester.path, FAILING, "wrong.suite.toml")
    before = len(plugin_live.tester_threads())
    result = run(pytester, plugin_live, "-k", "goodbye")
    result.assert_outcomes(failed=1, deselected=1)
    assert len(plugin_live.tester_threads()) == before + 1


def test_plugin_reports_a_refused_suite_file_with_its_line(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    bad = GREETS.replace('send = "hello"', 'send = "hello"\nwait = 1')
    write_suite(pytester.path, bad, "bad.suite.toml")
    threads = plugin_live.tester_threads()
    result = run(pytester, plugin_live)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*bad.suite.toml:10: unknown key 'wait' in a turn*"])
    assert plugin_live.tester_threads() == threads


def test_mosaic_tester_fixture_talks_in_a_tester_thread(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(
        """
        def test_greets(mosaic_tester):
            thread = mosaic_tester.thread("fixture greets")
            reply = thread.send("hello", within=30)
            assert "hello" in reply.body.lower()
            again = thread.send("hello", within=30)
            assert "turn 2 of" in again.body
            assert again.message["in_reply_to"] is not None


        def test_expects_what_never_comes(mosaic_tester):
            thread = mosaic_tester.thread("fixture wrong")
            assert "goodbye" in thread.send("hello", within=30).body.lower()


        def test_unknown_instance_fails_the_test(mosaic_tester):
            thread = mosaic_tester.thread("fixture missing", instance="nobody")
        """
    )
    result = run(pytester, plugin_live, "--mosaic-project", "fixtures")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["*assert 'goodbye' in*", "*not-found: No instance named 'nobody'.*"]
    )
    names = [thread["name"] for thread in plugin_live.tester_threads()]
    assert any(name.startswith("fixture greets · ") for name in names)
    projects = plugin_live.tester.get("/api/chat/projects?limit=500")["projects"]
    assert "fixtures" in [project["name"] for project in projects]


JUDGED = """
name = "judged"
project = "qa"

[[cases]]
name = "greets politely"

[[cases.turns]]
send = "hello"
expect = { judge = "Greets the user politely" }
"""


def test_plugin_judge_error_is_one_line_naming_the_judge_and_its_answer(
    plugin_live: Served, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge that answers no verdict, even asked again, fails `reply.check` and a suite
    file's case each on one line: the judge's model and URL, what it said, the reply; no
    traceback through the client's code."""
    pytester.makepyfile(
        """
        def test_judged(mosaic_tester):
            reply = mosaic_tester.thread("fixture judged").send("hello", within=30)
            reply.check(judge="Greets the user politely")
        """
    )
    write_suite(pytester.path, JUDGED, "judged.suite.toml")
    with serve_fake_model(FakeModel(content="Looks fine to me.")) as judge:
        monkeypatch.setenv("MOSAIC_JUDGE_BASE_URL", judge.url)
        monkeypatch.setenv("MOSAIC_JUDGE_MODEL", "prose-judge")
        result = run(pytester, plugin_live)
    result.assert_outcomes(failed=2)
    named = f"the judge prose-judge at {judge.url}/chat/completions did not answer"
    said = "it said “Looks fine to me.” — the reply: “Hello! I am assistant.*”"
    result.stdout.fnmatch_lines(
        [
            "*_ judged · greets politely _*",
            "0/1 error, 95% interval 0–79%",
            f"turn 1 “hello”: judge: {named} *: {said}",
            "*_ test_judged _*",
            f"E   *JudgeFailed: {named} *: {said}",
        ]
    )
    told = result.stdout.str()
    assert not [
        name for name in ("judge.py", "expectations.py", "pytest_plugin.py") if name in told
    ]
    # Asked twice for each check: the answer, then once again.
    assert len(judge.requests) == 4


def test_plugin_failures_show_a_hostile_reply_escaped(
    plugin_live: Served, pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """A suite file's failure and `reply.check`'s both quote the reply with its control
    characters escaped: nothing of it acts on the terminal."""
    write_suite(pytester.path, SPOOFED, "hostile.suite.toml")
    pytester.makepyfile(
        """
        def test_checks_the_reply(mosaic_tester):
            thread = mosaic_tester.thread("fixture hostile", instance="hostile")
            thread.send("hello", within=30).check(contains=["Goodbye"])
        """
    )
    with serve_fake_model(FakeModel(content=SPOOFING_REPLY, streams=False)) as model:
        add_model_instance(plugin_live.server, tmp_path, "hostile", model.url)
        result = run(pytester, plugin_live)
    result.assert_outcomes(failed=2)
    printed = result.stdout.str() + result.stderr.str()
    assert not {"\x1b", "\r", "\x9b", "\u202e"} & set(printed)
    escaped = "\\x1b[2K\\x0d\\x1b[32mPASS  hostile · spoofs (1 turn) · 1/1 pass\\x1b[0m"
    result.stdout.fnmatch_lines(
        [
            "*actual: Bye.",
            f"{escaped} \\x9b2K\\u202eok",
            "*CheckFailed: expected the reply contains 'Goodbye'",
            "*actual: Bye.",
            f"*{escaped} \\x9b2K\\u202eok",
        ]
    )


def test_plugin_pointed_at_the_human_listener_says_which_listener_to_use(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    """One usage error before any test, saying it reached the human listener."""
    write_suite(pytester.path, GREETS, "smoke.suite.toml")
    human = plugin_live.server.human_url
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--mosaic-url", human)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*mosaic: the tester listener at {human} cannot run conversation tests: "
            f"human-listener: {human} is the human listener; conversation tests run against the "
            "tester listener (MOSAIC_TESTER_PORT)*"
        ]
    )


ROWS = """
name = "rows"
project = "qa"

[pricing.offline]
input = 1
output = 1

[[cases]]
name = "notes"
vars = [{ city = "Lisbon" }, { city = "Porto" }]

[[cases.turns]]
send = "The launch is in {city}."
expect = { contains = ["is in {city}."] }
"""


def test_plugin_collects_each_row_of_a_dataset_and_tells_its_cost(
    plugin_live: Served, pytester: pytest.Pytester
) -> None:
    """A dataset's rows are tests of their own; the offline backend records no usage, so each
    case's cost is unknown, its turn counted as without usage. `reply.check(max_cost=…)` is
    refused: a price is a suite file's."""
    write_suite(pytester.path, ROWS, "rows.suite.toml")
    pytester.makepyfile(
        """
        def test_max_cost(mosaic_tester):
            mosaic_tester.thread("fixture cost").send("hello", within=30).check(max_cost=1)
        """
    )
    junit = pytester.path / "junit.xml"
    result = run(pytester, plugin_live, "-v", f"--junitxml={junit}")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*rows.suite.toml::notes [[]city=Lisbon[]] PASSED*",
            "*rows.suite.toml::notes [[]city=Porto[]] PASSED*",
            "*TypeError: reply.check: max_cost needs a suite file's [[]pricing[]]*",
        ]
    )
    first = next(ElementTree.parse(junit).getroot().iter("testcase"))
    properties = {p.get("name"): p.get("value") for p in first.iter("property")}
    assert {key: properties[key] for key in ("cost", "prompt_tokens", "turns_without_usage")} == {
        "cost": "unknown",
        "prompt_tokens": "unknown",
        "turns_without_usage": "1",
    }
