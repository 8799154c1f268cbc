"""`expect.tools` end to end: `testassistant` and the pytest plugin against a real
`manage.py serve` with the offline backend, whose `task: …` turn makes one `create_task` step,
refused in a tester's thread (SPEC §7.2, R15)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.served import Served, human_left_alone
from tests.support.suite_runs import run_testassistant, write_suite
from tests.tester.test_pytest_plugin import run as run_plugin

BOOKED = """
name = "steps"
project = "qa"

[[cases]]
name = "refused as a test conversation"

[[cases.turns]]
send = "task: book the photographer"
expect = { tools = [{ name = "create_task", args = { title = { icontains = "photographer" } }, \
outcome = "refused" }], no_tools = ["send_message"], max_steps = 1 }

[[cases]]
name = "expects it created"

[[cases.turns]]
send = "task: book the photographer"
expect = { tools = [{ name = "create_task", outcome = "ok" }] }
"""

STEP = 'create_task(title="book the photographer") refused (invalid)'


@pytest.fixture
def live(suite_server: Served) -> Iterator[Served]:
    with human_left_alone(suite_server):
        yield suite_server


def test_run_tools_pass_on_the_refused_step_and_fail_expecting_it_ok(
    live: Served, tmp_path: Path
) -> None:
    """A tester's `task:` turn makes one create_task step, refused: `outcome = "refused"`
    passes, `outcome = "ok"` fails naming the call and the turn's steps."""
    ran = run_testassistant(write_suite(tmp_path, BOOKED), "--url", live.url, "--json")
    assert ran.status == 1, ran.out + ran.error
    *records, summary = ran.json_lines()
    assert (summary["summary"]["pass"], summary["summary"]["fail"]) == (1, 1)
    shown = {record["case"]: record for record in records}
    passed = shown["refused as a test conversation"]
    assert passed["verdict"] == "pass"
    [turn] = passed["repeats"][0]["turns"]
    [step] = turn["steps"]
    assert (step["tool"], step["outcome"], step["code"]) == ("create_task", "refused", "invalid")
    assert step["arguments"] == {"title": "book the photographer"}
    assert step["result"]["error"] == "invalid"

    failed = shown["expects it created"]
    assert failed["verdict"] == "fail"
    assert failed["expected"] == f"only calls among: create_task with outcome ok — not {STEP}"
    assert failed["actual"] == f"the turn's steps: {STEP}"


def test_run_stores_each_turns_steps_in_the_history(live: Served, tmp_path: Path) -> None:
    """The stored case record keeps each turn's steps (what the Test runs view shows)."""
    ran = run_testassistant(write_suite(tmp_path, BOOKED), "--url", live.url, "--json")
    run_id = ran.json_lines()[-1]["summary"]["run"]
    cases = live.tester.get(f"/api/suite-runs/{run_id}")["cases"]
    stored = {case["case"]: case for case in cases}
    [turn] = stored["refused as a test conversation"]["repeats"][0]["turns"]
    assert turn["steps"] == [
        {
            "call_id": turn["steps"][0]["call_id"],
            "round": 1,
            "tool": "create_task",
            "arguments": {"title": "book the photographer"},
            "outcome": "refused",
            "code": "invalid",
        }
    ]


def test_plugin_reply_has_steps_and_checks_tools(
    plugin_live: Served,
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_refused(mosaic_tester):
            thread = mosaic_tester.thread("steps refused")
            reply = thread.send("task: book the photographer", within=30)
            [step] = reply.steps
            assert (step.tool, step.outcome, step.code) == ("create_task", "refused", "invalid")
            reply.check(
                tools=[{"name": "create_task", "outcome": "refused"}],
                tools_order="strict",
                no_tools=["send_message"],
                max_steps=1,
            )


        def test_expects_ok(mosaic_tester):
            thread = mosaic_tester.thread("steps ok")
            reply = thread.send("task: book the photographer", within=30)
            reply.check(tools=[{"name": "create_task", "outcome": "ok"}], tools_order="superset")


        def test_misspelt_key(mosaic_tester):
            thread = mosaic_tester.thread("steps misspelt")
            reply = thread.send("hello", within=30)
            reply.check(no_tools=True, tools=[{"name": "create_task", "outcom": "ok"}])
        """
    )
    result = run_plugin(pytester, plugin_live)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*expected a call create_task with outcome ok",
            f"*actual: the turn's steps: {STEP}",
            "*reply.check: unknown key 'outcom' in a tools entry*",
        ]
    )
