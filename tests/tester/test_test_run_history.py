"""Honest baselines, end to end: `testassistant` against a real `manage.py serve` (the offline
backend), its test runs stored through the tester listener. A `-k` run is never a full run's
baseline, a full run compared with a subset says how much was compared, an edited case is
`changed`, and a run the listener refused or the client stopped ends `halted` with why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.console.pages import unique
from tests.support.served import Served
from tests.support.suite_runs import run_testassistant, write_suite

TWO_CASES = """
name = "{suite}"
project = "qa"

[[cases]]
name = "greets"

[[cases.turns]]
send = "hello"
expect = {{ matches = "(?i)hello" }}

[[cases]]
name = "task refused"

[[cases.turns]]
send = "task: ship it"
expect = {{ contains = ["No task"] }}
"""


def suite_file(tmp_path: Path) -> tuple[str, Path]:
    """A suite of its own name, so no other test's runs are its history."""
    suite = unique("history")
    return suite, write_suite(tmp_path, TWO_CASES.format(suite=suite))


def summary_of(out: str) -> dict[str, Any]:
    """The JSON summary line of a `--json` run."""
    summary: dict[str, Any] = json.loads(out.splitlines()[-1])["summary"]
    return summary


def stored_run(live: Served, run_id: int) -> dict[str, Any]:
    run: dict[str, Any] = live.tester.get(f"/api/suite-runs/{run_id}")["run"]
    return run


def test_k_run_is_never_the_baseline_of_a_full_run(suite_server: Served, tmp_path: Path) -> None:
    """`--compare last` takes the last finished run of the same suites, instances and `-k`: a
    full run after a `-k` run is compared with the full run before it, every case compared."""
    _, path = suite_file(tmp_path)
    full = run_testassistant(path, "--url", suite_server.url, "--json")
    assert full.status == 0, full.out + full.error
    subset = run_testassistant(path, "--url", suite_server.url, "--json", "-k", "greets")
    assert subset.status == 0, subset.out + subset.error
    again = run_testassistant(path, "--url", suite_server.url, "--json", "--compare", "last")
    assert again.status == 0, again.out + again.error
    summary = summary_of(again.out)
    assert stored_run(suite_server, summary["run"])["baseline"] == summary_of(full.out)["run"]
    changes = [line["change"] for line in again.json_lines()[:-1]]
    assert changes == ["same", "same"]
    # And a `-k` run compared with `last` is compared with the `-k` run before it.
    narrow = run_testassistant(
        path, "--url", suite_server.url, "--json", "-k", "greets", "--compare", "last"
    )
    narrowed = stored_run(suite_server, summary_of(narrow.out)["run"])
    assert (narrowed["baseline"], narrowed["keyword"]) == (summary_of(subset.out)["run"], "greets")


def test_full_run_compared_with_a_subset_says_what_it_compared(
    suite_server: Served, tmp_path: Path
) -> None:
    """An explicit `--compare ID` of a `-k` run is taken as asked; only the common case is
    compared, and the run says so."""
    _, path = suite_file(tmp_path)
    subset = run_testassistant(path, "--url", suite_server.url, "--json", "-k", "greets")
    subset_id = summary_of(subset.out)["run"]
    full = run_testassistant(path, "--url", suite_server.url, "--compare", str(subset_id))
    assert full.status == 0, full.out + full.error
    assert f"compared with run {subset_id} on 1 of 2 cases; 1 not in run {subset_id}" in (
        full.out.splitlines()
    )
    assert "task refused (1 turn) · 1/1 pass, 95% interval 21–100% · new" in full.out


def test_edited_case_is_changed_never_regressed(suite_server: Served, tmp_path: Path) -> None:
    """A case whose expectations changed since the baseline is `changed`, compared with
    nothing, even when it now fails; the unchanged case is compared as ever."""
    suite, path = suite_file(tmp_path)
    first = run_testassistant(path, "--url", suite_server.url, "--json", "--repeat", "4")
    assert first.status == 0, first.out + first.error
    path.write_text(
        TWO_CASES.format(suite=suite).replace('matches = "(?i)hello"', 'matches = "(?i)goodbye"'),
        encoding="utf-8",
    )
    edited = run_testassistant(
        path, "--url", suite_server.url, "--repeat", "4", "--fail-on-regression"
    )
    assert edited.status == 0, edited.out + edited.error
    assert (
        "· 0/4 fail, 95% interval 0–49% · changed: its definition is not the baseline's, "
        "so it is not compared" in edited.out
    )
    assert edited.out.splitlines()[-2].endswith(
        "on 1 of 2 cases; 1 changed since run " + str(summary_of(first.out)["run"])
    )
    [newest] = suite_server.tester.get("/api/suite-runs?limit=1")["runs"]
    cases = suite_server.tester.get(f"/api/suite-runs/{newest['id']}")["cases"]
    told = {case["case"]: (case["change"], case["p_value"]) for case in cases}
    assert told == {"greets": ("changed", None), "task refused": ("same", 1.0)}


def test_run_refused_by_the_listener_ends_halted_with_the_refusal(
    suite_server: Served, tmp_path: Path
) -> None:
    """A refusal mid-run (an unknown instance) ends the stored run `halted` with the refusal as
    its reason: it never stays running, and is no baseline for `last`."""
    suite, _ = suite_file(tmp_path)
    text = TWO_CASES.format(suite=suite).replace(
        'name = "greets"', 'name = "greets"\ninstance = "nobody"'
    )
    ran = run_testassistant(
        write_suite(tmp_path, text, "nobody.suite.toml"), "--url", suite_server.url, "--json"
    )
    assert ran.status == 2
    run = stored_run(suite_server, summary_of(ran.out)["run"])
    assert (run["state"], run["reason"]) == ("halted", "not-found: No instance named 'nobody'.")
    assert run["ended_at"] is not None


def test_interrupted_run_ends_halted(
    suite_server: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the cases: the stored run ends `halted` ("interrupted"), and the command
    exits 130 saying so."""
    from tester.suites import runner

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    _, path = suite_file(tmp_path)
    monkeypatch.setattr(runner, "run_repeat", interrupted)
    ran = run_testassistant(path, "--url", suite_server.url)
    assert ran.status == 130
    assert ran.error == "interrupted: the test run was halted\n"
    [newest] = suite_server.tester.get("/api/suite-runs?limit=1")["runs"]
    assert newest["state"] == "halted"
    assert newest["reason"] == "interrupted: the client was stopped (Ctrl-C)"
