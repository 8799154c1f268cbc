"""`manage.py testassistant` against a real `manage.py serve` (free ports, its own database,
the offline backend): what each test run reports, how it exits, and that the human's threads
and messages are the same after every test run (SPEC §1: the tester never touches the human's
work)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.business_file import DEMO_FILE
from tests.console.server import free_port
from tests.support.model_servers import FakeModel, serve_fake_model
from tests.support.served import Served, human_left_alone
from tests.support.suite_runs import (
    FAILING,
    GREETS,
    SPOOFED,
    SPOOFING_REPLY,
    add_model_instance,
    run_testassistant,
    run_testassistant_process,
    write_suite,
)


@pytest.fixture
def live(suite_server: Served) -> Iterator[Served]:
    """The server; the human's threads, messages and view unchanged by the test."""
    with human_left_alone(suite_server):
        yield suite_server


def thread_names(live: Served) -> list[str]:
    return [thread["name"] for thread in live.tester_threads()]


def test_run_passing_suite_exits_0_and_writes_junit_with_every_case(
    live: Served, tmp_path: Path
) -> None:
    """A passing suite: a line per case, a summary, status 0, JUnit with every case."""
    suite = write_suite(tmp_path, GREETS)
    junit = tmp_path / "reports" / "assistant.xml"
    ran = run_testassistant(suite, "--url", live.url, "--junit", junit)
    assert ran.status == 0, ran.out + ran.error
    assert "PASS  smoke · greets (1 turn) · 1/1 pass" in ran.out
    assert "PASS  smoke · task refused (1 turn) · 1/1 pass" in ran.out
    assert "2 pass, 0 flaky, 0 fail, 0 error (run " in ran.out.splitlines()[-1]
    root = ElementTree.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "0", "0")
    cases = root.findall("./testsuite/testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("smoke", "greets"),
        ("smoke", "task refused"),
    ]
    assert all(case.find("failure") is None and case.find("error") is None for case in cases)
    properties = {p.get("name"): p.get("value") for p in cases[0].iter("property")}
    assert (properties["verdict"], properties["passed_repeats"], properties["repeat_count"]) == (
        "pass",
        "1",
        "1",
    )
    # Each deprecated name beside its new one, with the same value.
    assert (properties["passed_runs"], properties["runs"]) == ("1", "1")


def test_run_each_case_in_a_new_tester_thread_shown_in_the_trail(
    live: Served, tmp_path: Path
) -> None:
    """Each case has a tester thread `<suite> · <case> · <UTC time>`, listed to the tester; the
    human's trail shows the run labelled as tester traffic (R16)."""
    before = set(thread_names(live))
    ran = run_testassistant(write_suite(tmp_path, GREETS), "--url", live.url, "--keep-threads")
    assert ran.status == 0, ran.out + ran.error
    new = sorted(set(thread_names(live)) - before)
    assert [name.rsplit(" · ", 1)[0] for name in new] == ["smoke · greets", "smoke · task refused"]
    assert all(name.endswith("Z") for name in new)
    rows = live.human.get("/api/trail?limit=500")["rows"]
    assert any(row["text"].startswith("tester to assistant: hello") for row in rows)
    assert any(row["text"].startswith("assistant to tester: ") for row in rows)


def test_run_failing_expectation_exits_1_with_junit_failure(live: Served, tmp_path: Path) -> None:
    """One failed expectation: status 1, its line names it and the actual reply, and the JUnit
    has that `failure` with expected and actual; the passing case stays passed."""
    junit = tmp_path / "junit.xml"
    ran = run_testassistant(write_suite(tmp_path, FAILING), "--url", live.url, "--junit", junit)
    assert ran.status == 1
    assert ran.error == ""
    assert (
        "FAIL  wrong · expects goodbye: turn 1 “hello”: expected the reply contains 'Goodbye'; "
        "got “Hello! I am assistant." in ran.out
    )
    assert "· 0/1 fail" in ran.out
    # A failing run ends with its summary line, not a traceback-style one.
    assert ran.out.splitlines()[-1].startswith("1 pass, 0 flaky, 1 fail, 0 error (run ")
    root = ElementTree.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("2", "1")
    passed, failed = root.findall("./testsuite/testcase")
    assert passed.find("failure") is None
    failure = failed.find("failure")
    assert failure is not None
    assert (failure.get("message") or "").startswith(
        "turn 1 “hello”: expected the reply contains 'Goodbye'; got “Hello! I am assistant."
    )
    assert "expected: the reply contains 'Goodbye'" in (failure.text or "")
    assert "actual: Hello! I am assistant." in (failure.text or "")


def test_run_with_json_prints_one_object_per_case(live: Served, tmp_path: Path) -> None:
    ran = run_testassistant(write_suite(tmp_path, FAILING), "--url", live.url, "--json")
    assert ran.status == 1
    *lines, summary = ran.json_lines()
    shown = {line["case"]: line for line in lines}
    assert set(shown) == {"greets", "expects goodbye"}
    assert shown["greets"]["status"] == "passed"
    assert summary["summary"]["fail"] == 1
    failed = shown["expects goodbye"]
    assert (failed["status"], failed["turn"], failed["sent"]) == ("failed", 1, "hello")
    assert failed["expected"] == "the reply contains 'Goodbye'"
    assert failed["actual"].startswith("Hello! I am assistant.")
    assert isinstance(failed["thread"], int)


def test_run_with_jobs_keeps_each_cases_turns_in_order(live: Served, tmp_path: Path) -> None:
    """Cases run side by side; within each, every turn follows the one before (the offline
    backend quotes the previous turn)."""
    cases = "".join(
        f"""
[[cases]]
name = "order {n}"

[[cases.turns]]
send = "first {n}"

[[cases.turns]]
send = "second {n}"
expect = {{ contains = ["Noted (turn 2)", "Before this you wrote “first {n}”"] }}
"""
        for n in range(4)
    )
    suite = write_suite(tmp_path, f'name = "jobs"\nproject = "qa"\n{cases}')
    ran = run_testassistant(suite, "--url", live.url, "--jobs", "3", "--json")
    assert ran.status == 0, ran.out + ran.error
    cases = [line["case"] for line in ran.json_lines()[:-1]]
    assert sorted(cases) == [f"order {n}" for n in range(4)]


def test_run_with_k_runs_only_matching_cases(live: Served, tmp_path: Path) -> None:
    before = len(live.tester_threads())
    ran = run_testassistant(write_suite(tmp_path, FAILING), "--url", live.url, "-k", "goodbye")
    assert ran.status == 1
    assert "wrong · expects goodbye" in ran.out
    assert "wrong · greets" not in ran.out
    assert len(live.tester_threads()) == before + 1


def test_run_with_k_matching_nothing_exits_2(live: Served, tmp_path: Path) -> None:
    ran = run_testassistant(write_suite(tmp_path, GREETS), "--url", live.url, "-k", "absent")
    assert ran.status == 2
    assert ran.error.startswith("refused: no case matches")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('name = "x"\nproject = "qa"\n[[cases]]\nname = "c"\n[[cases.turns]]\nsend = "hi"\n'
         'expect = { contain = ["x"] }\n', ":7: unknown key 'contain'"),
        ('name = "x"\nproject = "qa"\n[[cases]]\nname = "c"\n[[cases.turns]]\nsend = "hi"\n'
         'expect = { matches = "([" }\n', ":7: matches is not a regular expression"),
        ('name = "x"\nproject = "qa"\n[[cases]\n', ":3: not valid TOML"),
    ],
)  # fmt: skip
def test_run_malformed_file_exits_2_and_sends_nothing(
    live: Served, tmp_path: Path, text: str, reason: str
) -> None:
    """A refused file, even beside a good one, stops the run before anything is sent."""
    good = write_suite(tmp_path, GREETS, "good.suite.toml")
    bad = write_suite(tmp_path, text, "bad.suite.toml")
    threads = live.tester_threads()
    trail = live.human.get("/api/trail?limit=500")
    ran = run_testassistant(good, bad, "--url", live.url)
    assert ran.status == 2
    assert f"{bad}{reason}" in ran.error
    assert ran.out == ""
    assert live.tester_threads() == threads
    assert live.human.get("/api/trail?limit=500") == trail


def test_run_with_tester_off_exits_2_with_tester_off(live: Served, tmp_path: Path) -> None:
    off = tmp_path / "off.toml"
    off.write_text(DEMO_FILE.read_text().replace("tester_enabled = true", "tester_enabled = false"))
    threads = live.tester_threads()
    live.server.manage("loadbusiness", str(off))
    try:
        ran = run_testassistant(write_suite(tmp_path, GREETS), "--url", live.url)
    finally:
        live.server.manage("loadbusiness", str(DEMO_FILE))
    assert ran.status == 2
    assert ran.error.startswith("tester-off: ")
    assert live.tester_threads() == threads


def test_run_with_unreachable_listener_exits_2(live: Served, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    ran = run_testassistant(write_suite(tmp_path, GREETS), "--url", url)
    assert ran.status == 2
    assert ran.error.startswith("unreachable: ")


def test_run_with_unknown_instance_exits_2_with_the_listeners_refusal(
    live: Served, tmp_path: Path
) -> None:
    suite = GREETS.replace('name = "greets"', 'name = "greets"\ninstance = "nobody"')
    ran = run_testassistant(write_suite(tmp_path, suite), "--url", live.url, "--json")
    assert ran.status == 2
    errored, summary = ran.json_lines()
    assert (errored["case"], errored["status"]) == ("greets", "error")
    assert (errored["error"], errored["detail"]) == ("not-found", "No instance named 'nobody'.")
    assert summary["summary"]["not_run"] == 1
    assert ran.error == "not-found: No instance named 'nobody'.\n"


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:7333", "127.0.0.1:7333", "http://"])
def test_run_with_a_url_that_is_no_listeners_exits_2(tmp_path: Path, url: str) -> None:
    ran = run_testassistant(write_suite(tmp_path, GREETS), "--url", url)
    assert ran.status == 2
    assert ran.error.startswith("invalid: ")


def test_run_missing_file_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "absent.suite.toml"
    ran = run_testassistant(missing)
    assert ran.status == 2
    assert ran.error == f"refused: {missing}:0: cannot be read (No such file or directory)\n"


def test_run_failed_turn_fails_case_with_the_failure_text(live: Served, tmp_path: Path) -> None:
    """SPEC §7.1: a turn that fails (here a model server refusing it, a permanent error) fails a
    case expecting a reply, with the turn's failure sentence; `reply = false` passes on it."""
    with serve_fake_model(FakeModel(status=400, error_message="model not found")) as model:
        add_model_instance(live.server, tmp_path, "broken", model.url)
        suite = """
name = "broken"
project = "qa"

[[cases]]
name = "expects a reply"
instance = "broken"

[[cases.turns]]
send = "hello"

[[cases]]
name = "expects none"
instance = "broken"

[[cases.turns]]
send = "hello"
expect = { reply = false }
"""
        ran = run_testassistant(write_suite(tmp_path, suite), "--url", live.url, "--json")
    assert ran.status == 1
    shown = {line["case"]: line for line in ran.json_lines()[:-1]}
    assert shown["expects none"]["status"] == "passed"
    failed = shown["expects a reply"]
    assert failed["expected"] == "a reply within 30 s"
    assert failed["actual"].startswith("the turn failed: ")


def test_run_as_a_process_exits_1_on_a_failure(live: Served, tmp_path: Path) -> None:
    """The exit status of `python manage.py testassistant` itself, whose default `--url` is
    this configuration's tester listener: the summary line last, and no error line at all."""
    env = {**os.environ, "MOSAIC_TESTER_PORT": str(live.server.tester_port)}
    ran = run_testassistant_process(write_suite(tmp_path, FAILING), env=env)
    assert ran.status == 1, ran.out + ran.error
    assert "PASS  wrong · greets (1 turn) · 1/1 pass" in ran.out
    assert ran.out.splitlines()[-1].startswith("1 pass, 0 flaky, 1 fail, 0 error")
    assert ran.error == ""


def test_run_prints_a_hostile_reply_escaped_and_its_junit_parses(
    live: Served, tmp_path: Path
) -> None:
    """A reply's escape sequences never reach the terminal: the FAIL line stays, the reply is
    shown with `\\x1b` for ESC (C1 controls and bidirectional controls alike), JUnit holds the
    same escapes and parses, and `--json` keeps the exact text in JSON's own escapes."""
    with serve_fake_model(FakeModel(content=SPOOFING_REPLY, streams=False)) as model:
        add_model_instance(live.server, tmp_path, "hostile", model.url)
        suite = write_suite(tmp_path, SPOOFED)
        junit = tmp_path / "hostile.xml"
        ran = run_testassistant(suite, "--url", live.url, "--junit", junit)
        as_json = run_testassistant(suite, "--url", live.url, "--json")
    assert ran.status == 1, ran.out + ran.error
    printed = ran.out + ran.error + as_json.out + as_json.error
    assert not {"\x1b", "\r", "\x9b", "\u202e"} & set(printed)
    [line] = [line for line in ran.out.splitlines() if "spoofs" in line]
    assert line.startswith("FAIL  hostile · spoofs: turn 1 “hello”: expected the reply contains ")
    assert "got “Bye. \\x1b[2K \\x1b[32mPASS hostile · spoofs (1 turn) · 1/1 pass\\x1b[0m" in line
    assert line.endswith("\\x9b2K\\u202eok” · 0/1 fail, 95% interval 0–79%")
    failure = ElementTree.parse(junit).getroot().find("./testsuite/testcase/failure")
    assert failure is not None and failure.text is not None
    assert "actual: Bye.\n\\x1b[2K\\x0d\\x1b[32mPASS" in failure.text
    record = as_json.json_lines()[0]
    assert record["actual"] == SPOOFING_REPLY
    assert record["repeats"][0]["turns"][0]["reply"] == SPOOFING_REPLY


# Two mistakes in one file (a key of none of its tables, a repeat out of range), one in another.
TWO_MISTAKES = GREETS.replace('project = "qa"', 'project = "qa"\ncolour = "blue"').replace(
    'name = "greets"', 'name = "greets"\nrepeat = 0'
)
ONE_MISTAKE = FAILING.replace('send = "hello"\n\n', 'send = "hello"\nwait = 1\n\n', 1)


def stored_runs(live: Served) -> list[dict[str, object]]:
    return list(live.tester.get("/api/suite-runs?limit=500")["runs"])


def test_check_tells_every_mistake_of_every_file_and_sends_nothing(
    live: Served, tmp_path: Path
) -> None:
    """`--check`: three mistakes in two files, each on its line, exit 2; nothing sent."""
    first = write_suite(tmp_path, TWO_MISTAKES, "first.suite.toml")
    second = write_suite(tmp_path, ONE_MISTAKE, "second.suite.toml")
    good = write_suite(tmp_path, GREETS, "good.suite.toml")
    threads, runs = live.tester_threads(), stored_runs(live)
    ran = run_testassistant(first, good, second, "--check", "--url", live.url)
    assert ran.status == 2
    assert ran.error.splitlines() == [
        f"refused: {first}:4: unknown key 'colour' in a suite file; it takes cases, instances, "
        "judge, name, pricing, project",
        f"refused: {first}:8: repeat must be a whole number, 1 to 100",
        f"refused: {second}:10: unknown key 'wait' in a turn; it takes expect, regenerate, send",
    ]
    assert ran.out == ""
    assert (live.tester_threads(), stored_runs(live)) == (threads, runs)


def test_check_of_files_without_mistakes_exits_0_and_sends_nothing(
    live: Served, tmp_path: Path
) -> None:
    greets = write_suite(tmp_path, GREETS.replace('name = "greets"', 'name = "greets"\nrepeat = 3'))
    failing = write_suite(tmp_path, FAILING, "failing.suite.toml")
    threads, runs = live.tester_threads(), stored_runs(live)
    ran = run_testassistant(greets, failing, "--check", "--url", live.url)
    assert (ran.status, ran.error) == (0, "")
    assert ran.out == "checked 2 files, no mistake: 4 cases to run, 6 repeats; nothing sent\n"
    assert (live.tester_threads(), stored_runs(live)) == (threads, runs)


LISTED = """
name = "listed"
project = "qa"
instances = ["assistant", "assistant-next"]

[[cases]]
name = "greets"
repeat = 3

[[cases.turns]]
send = "hello"

[[cases]]
name = "on its own"
instance = "assistant"

[[cases.turns]]
send = "hello"
"""


def test_list_prints_the_cases_as_they_would_run_and_sends_nothing(
    live: Served, tmp_path: Path
) -> None:
    """`--list`: each case on each instance in the order it would run, with its repeats and
    where it is written, `-k`, `--repeat` and `--instance` applied; `--json`, one object each."""
    suite = write_suite(tmp_path, LISTED)
    threads, runs = live.tester_threads(), stored_runs(live)
    ran = run_testassistant(suite, "--list", "--url", live.url)
    assert (ran.status, ran.error) == (0, "")
    assert ran.out.splitlines() == [
        f"listed · greets · 3 repeats on assistant ({suite}:6)",
        f"listed · greets · 3 repeats on assistant-next ({suite}:6)",
        f"listed · on its own · 1 repeat on assistant ({suite}:13)",
        "3 cases, 7 repeats; nothing sent",
    ]
    chosen = run_testassistant(suite, "--list", "-k", "greets", "--repeat", "2", "--instance", "x")
    assert chosen.out.splitlines() == [
        f"listed · greets · 2 repeats on x ({suite}:6)",
        "1 case, 2 repeats; nothing sent",
    ]
    as_json = run_testassistant(suite, "--list", "--json", "-k", "own")
    assert as_json.json_lines() == [
        {
            "suite": "listed",
            "case": "on its own",
            "file": str(suite),
            "line": 13,
            "instance": "assistant",
            "repeats": 1,
        }
    ]
    assert (live.tester_threads(), stored_runs(live)) == (threads, runs)


def test_run_against_the_human_listener_says_which_listener_to_use(
    live: Served, tmp_path: Path
) -> None:
    """The human listener has no suite-run routes; its 404 names it, and the client says what
    that means, rather than a bare `not-found: No such route.`."""
    human = live.server.human_url
    ran = run_testassistant(write_suite(tmp_path, GREETS), "--url", human)
    assert ran.status == 2
    assert ran.error == (
        f"human-listener: {human} is the human listener; conversation tests run against the "
        "tester listener (MOSAIC_TESTER_PORT)\n"
    )
    assert ran.out == ""


DATASET = """
name = "launches"
project = "qa"

[[cases]]
name = "remembers the city"
vars_file = "cities.csv"

[[cases.turns]]
send = "The launch is in {city}."
expect = { contains = ["is in {expected}."] }
"""
LISBON = "remembers the city [city=Lisbon, expected=Lisbon]"
PORTO = "remembers the city [city=Porto, expected=Lisbon]"


def test_run_dataset_rows_are_cases_with_their_own_verdicts_and_history(
    live: Served, tmp_path: Path
) -> None:
    """Each row of a CSV dataset is a case named from its values: its own line, record, JUnit
    testcase and stored case, its verdict from its own replies; -k picks rows by name."""
    (tmp_path / "cities.csv").write_text("city,expected\nLisbon,Lisbon\nPorto,Lisbon\n")
    suite = write_suite(tmp_path, DATASET)
    junit = tmp_path / "junit.xml"
    ran = run_testassistant(suite, "--url", live.url, "--json", "--junit", junit)
    assert ran.status == 1, ran.out + ran.error
    *found, summary = ran.json_lines()
    assert [(c["case"], c["verdict"], c["vars"]) for c in found] == [
        (LISBON, "pass", {"city": "Lisbon", "expected": "Lisbon"}),
        (PORTO, "fail", {"city": "Porto", "expected": "Lisbon"}),
    ]
    assert found[0]["repeats"][0]["turns"][0]["sent"] == "The launch is in Lisbon."
    assert (found[1]["sent"], found[1]["expected"]) == (
        "The launch is in Porto.",
        "the reply contains 'is in Lisbon.'",
    )
    testcases = ElementTree.parse(junit).getroot().findall("./testsuite/testcase")
    assert [(c.get("name"), c.find("failure") is not None) for c in testcases] == [
        (LISBON, False),
        (PORTO, True),
    ]
    stored = live.tester.get(f"/api/suite-runs/{summary['summary']['run']}")["cases"]
    assert {case["case"]: case["verdict"] for case in stored} == {LISBON: "pass", PORTO: "fail"}
    only = run_testassistant(suite, "--url", live.url, "-k", "city=Porto")
    assert only.status == 1, only.out + only.error
    assert f"FAIL  launches · {PORTO}: turn 1" in only.out
    assert "city=Lisbon" not in only.out
    assert only.out.splitlines()[-1].startswith("0 pass, 0 flaky, 1 fail, 0 error (run ")


def test_run_dataset_with_an_unknown_placeholder_is_refused_and_sends_nothing(
    live: Served, tmp_path: Path
) -> None:
    (tmp_path / "cities.csv").write_text("city,expected\nLisbon,Lisbon\n")
    suite = write_suite(tmp_path, DATASET.replace("{expected}", "{expect}"))
    threads = live.tester_threads()
    ran = run_testassistant(suite, "--url", live.url)
    assert ran.status == 2
    assert ran.error.startswith(
        f"refused: {suite}:11: {{expect}} in turns[1].expect.contains[1] names no column of "
        "the case's vars (city, expected)"
    )
    assert (ran.out, live.tester_threads()) == ("", threads)


def test_run_max_cost_without_any_price_is_refused_and_sends_nothing(
    live: Served, tmp_path: Path
) -> None:
    """No suite file prices a model and no instance has a price: --max-cost could never stop
    anything, so it is a usage error before a turn is sent."""
    threads = live.tester_threads()
    ran = run_testassistant(write_suite(tmp_path, GREETS), "--url", live.url, "--max-cost", "1")
    assert (ran.status, ran.out) == (2, "")
    assert ran.error.startswith(
        "refused: --max-cost needs prices: no suite file has a [pricing] table, and no instance "
        "a price in the business file"
    )
    assert live.tester_threads() == threads
