"""Conversation tests that judge a stochastic assistant, end to end: a real `manage.py serve`
whose two instances ask a scripted OpenAI-compatible model, the same scripted server acting as
the judge and the simulated user, and `testassistant` run against the tester listener.

What the script answers is the test's design (`script`): a reply that alternates between two
answers, JSON in a fenced block, a different capital per instance, a judge that grades by a
word, one that writes its verdict among prose or fenced after it, one that splits its votes
with an unreadable one, one that answers garbage, a judge server that refuses JSON mode, and a
simulated user who asks for a refund.
"""

from __future__ import annotations

import itertools
import json
import threading
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tester.suites.judge import GRADER, USER_PLAYER
from tests.support.model_servers import FakeModel, serve_fake_model
from tests.support.served import Served, human_left_alone, served_on_model
from tests.support.suite_runs import Ran, run_testassistant, write_suite

# The judge's models: `judge` takes JSON mode, `plain-judge` is served by a server that
# refuses it.
JUDGE = "judge"
PLAIN_JUDGE = "plain-judge"


class Script:
    """The scripted model: the assistant's two instances, the judge and the simulated user."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.coin = itertools.count()
        # What `chat-a` says the capital of France is (a test may make it wrong).
        self.capital = "Paris."
        # The split judge's votes, first asks only.
        self.split = itertools.count()

    def __call__(self, body: dict[str, Any]) -> str:
        messages = body["messages"]
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        if body["model"] in (JUDGE, PLAIN_JUDGE):
            # The question is the first user message; a longer conversation asks it again.
            return self.judge(system, messages[1]["content"], again=len(messages) > 2)
        return self.assistant(body["model"], messages[-1]["content"])

    @staticmethod
    def refusal(body: dict[str, Any]) -> tuple[int, str] | None:
        """The plain judge's server refuses JSON mode, as some servers do."""
        if body["model"] == PLAIN_JUDGE and "response_format" in body:
            return 400, "response_format json_object is not supported by this model"
        return None

    def assistant(self, model: str, said: str) -> str:
        if "flip a coin" in said:
            with self.lock:
                return "heads" if next(self.coin) % 2 == 0 else "tails"
        if "capital of France" in said:
            return self.capital if model == "chat-a" else "Lyon, I think."
        if "as JSON" in said:
            return 'Here it is:\n```json\n{"city": "Paris", "people": 2100000}\n```'
        if "order 42" in said:
            return "Your refund for order 42 is approved."
        return "How can I help?"

    def judge(self, system: str, prompt: str, *, again: bool) -> str:
        if system == USER_PLAYER:
            asked = "Conversation so far:\n(nothing yet" not in prompt
            if "never satisfied" in prompt:
                return "Hmm, I am not sure."
            return "Please refund order 42." if asked else "Hello, I have a problem."
        assert system == GRADER
        if "answer in riddles" in prompt:
            return "I think it passes, mostly."
        if "has met the user's goal" in prompt:
            met = "refund for order 42 is approved" in prompt
            return json.dumps({"pass": met, "reason": "approved" if met else "no refund yet"})
        if "split judge" in prompt:
            if again:
                return "Still cannot say."
            with self.lock:
                if next(self.split) % 3 == 1:
                    return "I cannot say."
        named = "Paris" in prompt.rsplit("ASSISTANT:", 1)[-1]
        verdict = json.dumps({"pass": named, "reason": "names Paris" if named else "no Paris"})
        if "chatty judge" in prompt:
            return f"Here is my verdict: {verdict} hope that helps"
        if "fenced judge" in prompt:
            return f"Sure.\n```json\n{verdict}\n```"
        return verdict


@pytest.fixture(scope="module")
def script() -> Script:
    return Script()


@pytest.fixture(scope="module")
def model(script: Script) -> Iterator[FakeModel]:
    with serve_fake_model(FakeModel(script=script, refuse=script.refusal)) as fake:
        yield fake


@pytest.fixture(scope="module")
def judged_server(model: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_on_model(model.url, tmp_path_factory.mktemp("judged"), "judged") as live:
        yield live


@pytest.fixture
def live(
    judged_server: Served, monkeypatch: pytest.MonkeyPatch, model: FakeModel
) -> Iterator[Served]:
    """The server, the judge named by the variables, and the human's work unchanged."""
    monkeypatch.setenv("MOSAIC_JUDGE_BASE_URL", model.url)
    monkeypatch.setenv("MOSAIC_JUDGE_MODEL", JUDGE)
    with human_left_alone(judged_server):
        yield judged_server


def suite(cases: str, *, head: str = "") -> str:
    return f'name = "judged"\nproject = "qa"\n{head}\n{cases}'


def records(ran: Ran) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    lines = ran.json_lines()
    return lines[:-1], lines[-1]["summary"]


COIN = """
[[cases]]
name = "coin"
repeat = 4
pass_rate = {rate}

[[cases.turns]]
send = "flip a coin"
expect = {{ equals = "heads" }}
"""


@pytest.mark.parametrize(("rate", "verdict", "status"), [(0.5, "flaky", 0), (1.0, "fail", 1)])
def test_run_alternating_replies_are_flaky_or_fail_by_pass_rate(
    live: Served, tmp_path: Path, rate: float, verdict: str, status: int
) -> None:
    """Replies alternate heads and tails: 2 of 4 pass; flaky at pass_rate 0.5 (status 0),
    fail at 1.0 (status 1); each repeat in a thread of its own."""
    path = write_suite(tmp_path, suite(COIN.format(rate=rate)))
    ran = run_testassistant(path, "--url", live.url, "--json", "--keep-threads")
    assert ran.status == status, ran.out + ran.error
    (case,), summary = records(ran)
    assert (case["verdict"], case["passed_repeats"], case["repeat_count"]) == (verdict, 2, 4)
    assert len(set(case["threads"])) == 4
    assert summary[verdict] == 1


def test_run_repeat_option_overrides_every_cases_repeat(live: Served, tmp_path: Path) -> None:
    path = write_suite(tmp_path, suite(COIN.format(rate=0.5)))
    ran = run_testassistant(path, "--url", live.url, "--json", "--repeat", "2", "--jobs", "2")
    (case,), _ = records(ran)
    assert (case["passed_repeats"], case["repeat_count"]) == (1, 2)
    assert sorted(r["turns"][0]["reply"] for r in case["repeats"]) == ["heads", "tails"]


ASKED_AGAIN = """
[[cases]]
name = "{name}"

[[cases.turns]]
send = "flip a coin"
expect = {{ equals = "heads" }}

[[cases.turns]]
regenerate = true
expect = {{ equals = "{again}" }}
"""


def test_run_regenerate_turn_asks_the_turn_before_again_and_checks_the_new_reply(
    live: Served, tmp_path: Path, script: Script
) -> None:
    """R24: a `regenerate` turn makes a new version of the turn before in its thread and checks
    the reply to it with its own expect; the coin, reset, says heads then tails."""
    text = ASKED_AGAIN.format(name="other side", again="tails")
    text += ASKED_AGAIN.format(name="same side", again="heads")
    path = write_suite(tmp_path, suite(text))
    junit, html = tmp_path / "junit.xml", tmp_path / "report.html"
    script.coin = itertools.count()
    ran = run_testassistant(
        path, "--url", live.url, "--json", "--junit", junit, "--html", html, "--keep-threads"
    )
    assert ran.status == 1, ran.out + ran.error
    (other, same), _ = records(ran)
    # The reply to the new version is what is checked: tails meets one case and misses the other.
    assert (other["verdict"], same["verdict"]) == ("pass", "fail")
    assert (same["turn"], same["sent"], same["regenerate"]) == (2, "flip a coin", True)
    assert same["actual"] == "tails"
    first, again = other["repeats"][0]["turns"]
    assert (first["sent"], first["reply"], first["regenerate"]) == ("flip a coin", "heads", False)
    assert (again["sent"], again["reply"], again["regenerate"]) == ("flip a coin", "tails", True)
    # The thread holds both versions of the turn, each with its reply; the new one names the first.
    messages = live.tester.get(f"/api/chat/threads/{other['thread']}/messages")["messages"]
    asked = [m for m in messages if m["class"] == "REQUEST"]
    replies = [m for m in messages if m["class"] == "RESULT"]
    assert [(m["id"], m["body"], m["version_of"]) for m in asked] == [
        (first["id"], "flip a coin", None),
        (again["id"], "flip a coin", first["id"]),
    ]
    assert [(m["in_reply_to"], m["body"]) for m in replies] == [
        (first["id"], "heads"),
        (again["id"], "tails"),
    ]
    assert "turn 2: regenerate flip a coin" in junit.read_text(encoding="utf-8")
    assert '<span class="again">regenerate</span> flip a coin' in html.read_text(encoding="utf-8")


EXPECTATIONS = {
    "icontains": ('send = "capital of France?"', '{ icontains = ["PARIS"] }', True),
    "icontains missed": ('send = "capital of France?"', '{ icontains = ["berlin"] }', False),
    "equals": ('send = "capital of France?"', '{ equals = "  Paris.\\n" }', True),
    "not_matches": ('send = "capital of France?"', '{ not_matches = "(?i)lyon" }', True),
    "not_matches missed": ('send = "capital of France?"', '{ not_matches = "Par" }', False),
    "json": ('send = "the city as JSON"', "{ json = true }", True),
    "json missed": ('send = "capital of France?"', "{ json = true }", False),
    "json_schema": (
        'send = "the city as JSON"',
        '{ json_schema = { type = "object", required = ["city"] } }',
        True,
    ),
    "json_schema missed": (
        'send = "the city as JSON"',
        '{ json_schema = { type = "object", required = ["country"] } }',
        False,
    ),
    "max_seconds": ('send = "capital of France?"', "{ max_seconds = 30 }", True),
    "max_first_token_seconds": (
        'send = "capital of France?"',
        "{ max_first_token_seconds = 30 }",
        True,
    ),
    "max_completion_tokens": ('send = "capital of France?"', "{ max_completion_tokens = 2 }", True),
    "max_completion_tokens missed": (
        'send = "capital of France?"',
        "{ max_completion_tokens = 1 }",
        False,
    ),
    "model": ('send = "capital of France?"', '{ model = "chat-a" }', True),
    "model missed": ('send = "capital of France?"', '{ model = "gpt-9" }', False),
    "finish_reason": ('send = "capital of France?"', '{ finish_reason = "stop" }', True),
    "finish_reason missed": ('send = "capital of France?"', '{ finish_reason = "length" }', False),
    "judge": ('send = "capital of France?"', '{ judge = "names the capital" }', True),
    "judge missed": ('send = "hello"', '{ judge = "names the capital" }', False),
}


def test_run_each_expectation_passes_and_fails_as_the_reply_says(
    live: Served, tmp_path: Path
) -> None:
    """Every new expectation, against the real listener and the record it keeps (SPEC §7.1's
    usage, model and finish_reason), once met and once missed."""
    cases = "".join(
        f'\n[[cases]]\nname = "{name}"\n\n[[cases.turns]]\n{send}\nexpect = {expect}\n'
        for name, (send, expect, _) in EXPECTATIONS.items()
    )
    path = write_suite(tmp_path, suite(cases))
    ran = run_testassistant(path, "--url", live.url, "--json", "--jobs", "4")
    found, _ = records(ran)
    verdicts = {case["case"]: case["verdict"] for case in found}
    assert verdicts == {
        name: "pass" if passes else "fail" for name, (_, _, passes) in EXPECTATIONS.items()
    }
    judged = next(case for case in found if case["case"] == "judge")
    turn = judged["repeats"][0]["turns"][0]
    assert turn["judge"] == [{"pass": True, "reason": "names Paris", "valid": True}]
    assert turn["usage"] == {"prompt_tokens": 11, "completion_tokens": 2}
    assert (turn["model"], turn["finish_reason"]) == ("chat-a", "stop")
    assert 0 <= turn["first_token_seconds"] <= turn["seconds"]
    missed = next(case for case in found if case["case"] == "model missed")
    assert (missed["expected"], missed["actual"]) == ("model 'gpt-9'", "model 'chat-a'")


def test_run_judge_answering_garbage_is_an_error_that_keeps_the_judged_reply(
    live: Served, tmp_path: Path, model: FakeModel
) -> None:
    """The judge answers prose, and prose again when reminded: the case is `error`, and every
    report still holds the judged turn, its reply and what the judge said."""
    cases = """
[[cases]]
name = "riddles"

[[cases.turns]]
send = "capital of France?"
expect = { judge = "answer in riddles" }
"""
    junit, html = tmp_path / "junit.xml", tmp_path / "report.html"
    path = write_suite(tmp_path, suite(cases))
    ran = run_testassistant(path, "--url", live.url, "--json", "--junit", junit, "--html", html)
    assert ran.status == 1, ran.out + ran.error
    (case,), summary = records(ran)
    assert (case["verdict"], case["error"], case["turn"]) == ("error", "judge", 1)
    assert case["sent"] == "capital of France?"
    assert case["detail"] == (
        f"the judge judge at {model.url}/chat/completions did not answer "
        '{"pass": true|false, "reason": "…"}: it said “I think it passes, mostly.” '
        "— the reply: “Paris.”"
    )
    assert summary["error"] == 1
    [turn] = case["repeats"][0]["turns"]
    assert (turn["sent"], turn["reply"], turn["passed"]) == ("capital of France?", "Paris.", False)
    assert turn["judge"] == [{"pass": None, "reason": "I think it passes, mostly.", "valid": False}]
    page = html.read_text(encoding="utf-8")
    assert '<div class="said assistant">Paris.</div>' in page
    assert "judge: invalid — I think it passes, mostly." in page
    assert "— the reply: “Paris.”" in junit.read_text(encoding="utf-8")
    # The stored history keeps the turn (its ids and the judge's vote) and names it.
    [stored] = live.tester.get(f"/api/suite-runs/{summary['run']}")["cases"]
    [kept] = stored["repeats"][0]["turns"]
    assert (kept["id"], kept["reply_id"], kept["judge"]) == (
        turn["id"],
        turn["reply_id"],
        turn["judge"],
    )
    assert (stored["failures"][0]["turn"], stored["failures"][0]["sent"]) == (
        1,
        "capital of France?",
    )


JUDGED_CAPITAL = """
[[cases]]
name = "{name}"

[[cases.turns]]
send = "capital of France?"
expect = {{ judge = "names the capital{how}" }}
"""


def graded(model: FakeModel, marker: str) -> list[dict[str, Any]]:
    """The grading requests the judge got about a rubric holding `marker`."""
    return [
        request
        for request in model.requests
        if request["model"] in (JUDGE, PLAIN_JUDGE) and marker in request["messages"][1]["content"]
    ]


def test_run_judge_verdict_after_prose_or_fenced_after_prose_is_read(
    live: Served, tmp_path: Path, model: FakeModel
) -> None:
    """One judge writes its verdict between two sentences, another fences it after one: each
    is read at once, and both cases pass."""
    cases = JUDGED_CAPITAL.format(name="chatty", how=" (chatty judge)")
    cases += JUDGED_CAPITAL.format(name="fenced", how=" (fenced judge)")
    ran = run_testassistant(write_suite(tmp_path, suite(cases)), "--url", live.url, "--json")
    assert ran.status == 0, ran.out + ran.error
    found, _ = records(ran)
    assert {case["case"]: case["verdict"] for case in found} == {"chatty": "pass", "fenced": "pass"}
    for case in found:
        [turn] = case["repeats"][0]["turns"]
        assert turn["judge"] == [{"pass": True, "reason": "names Paris", "valid": True}]
    # Read at once, in JSON mode: nothing asked again.
    for marker in ("chatty judge", "fenced judge"):
        [asked] = graded(model, marker)
        assert asked["response_format"] == {"type": "json_object"}


def test_run_three_votes_with_one_invalid_are_decided_by_the_valid_two(
    live: Served, tmp_path: Path, model: FakeModel
) -> None:
    """The judge's second vote of three is prose, and prose again when asked again: the two
    valid votes decide, the case passes, and the invalid vote is kept in every report."""
    text = suite(
        JUDGED_CAPITAL.format(name="split", how=" (split judge)"), head="[judge]\nvotes = 3\n"
    )
    html = tmp_path / "report.html"
    ran = run_testassistant(
        write_suite(tmp_path, text), "--url", live.url, "--json", "--html", html
    )
    assert ran.status == 0, ran.out + ran.error
    (case,), summary = records(ran)
    assert case["verdict"] == "pass"
    valid = {"pass": True, "reason": "names Paris", "valid": True}
    invalid = {"pass": None, "reason": "Still cannot say.", "valid": False}
    [turn] = case["repeats"][0]["turns"]
    assert turn["judge"] == [valid, invalid, valid]
    # Three votes, the unreadable one asked again once.
    assert len(graded(model, "split judge")) == 4
    assert "judge: invalid — Still cannot say." in html.read_text(encoding="utf-8")
    [stored] = live.tester.get(f"/api/suite-runs/{summary['run']}")["cases"]
    assert stored["repeats"][0]["turns"][0]["judge"] == [valid, invalid, valid]


def test_run_judge_refusing_json_mode_is_asked_without_it_at_once_and_from_then_on(
    live: Served, tmp_path: Path, model: FakeModel
) -> None:
    """The judge's server answers 400 to JSON mode: the same question is asked again without
    it, and every later question of the test run goes without it; both cases pass."""
    cases = JUDGED_CAPITAL.format(name="first", how=" (plain judge)")
    cases += JUDGED_CAPITAL.format(name="second", how=" (plain judge)")
    text = suite(cases, head=f'[judge]\nmodel = "{PLAIN_JUDGE}"\n')
    ran = run_testassistant(write_suite(tmp_path, text), "--url", live.url, "--json")
    assert ran.status == 0, ran.out + ran.error
    found, _ = records(ran)
    assert [case["verdict"] for case in found] == ["pass", "pass"]
    refused, fallback, later = graded(model, "plain judge")
    assert refused["response_format"] == {"type": "json_object"}
    assert fallback == {key: value for key, value in refused.items() if key != "response_format"}
    assert "response_format" not in later


def test_run_instances_side_by_side(live: Served, tmp_path: Path) -> None:
    """One case on two instances: each its own verdict, side by side in the report."""
    cases = """
[[cases]]
name = "capital"

[[cases.turns]]
send = "capital of France?"
expect = { contains = ["Paris"] }
"""
    path = write_suite(tmp_path, suite(cases))
    ran = run_testassistant(
        path, "--url", live.url, "--instance", "assistant", "--instance", "rival"
    )
    assert ran.status == 1
    assert "PASS  judged · capital [assistant] (1 turn) · 1/1 pass" in ran.out
    assert "FAIL  judged · capital [rival]: turn 1" in ran.out
    # The matrix is the two lines before the summary.
    header, row = [line.split() for line in ran.out.splitlines()[-3:-1]]
    assert header == ["assistant", "rival"]
    assert row == ["judged", "·", "capital", "pass", "1/1", "fail", "0/1"]


SIMULATED = """
[[cases]]
name = "{name}"

[cases.simulate]
persona = "a customer{persona}"
goal = "get a refund for order 42"
max_turns = 3
"""


def test_run_simulated_user_reaches_its_goal(live: Served, tmp_path: Path) -> None:
    path = write_suite(tmp_path, suite(SIMULATED.format(name="refund", persona="")))
    ran = run_testassistant(path, "--url", live.url, "--json")
    assert ran.status == 0, ran.out + ran.error
    (case,), _ = records(ran)
    turns = case["repeats"][0]["turns"]
    assert [turn["sent"] for turn in turns] == [
        "Hello, I have a problem.",
        "Please refund order 42.",
    ]
    assert case["repeats"][0]["judge"] == [{"pass": True, "reason": "approved", "valid": True}]


def test_run_simulated_user_that_never_reaches_its_goal_fails(live: Served, tmp_path: Path) -> None:
    text = SIMULATED.format(name="stuck", persona=", never satisfied")
    ran = run_testassistant(write_suite(tmp_path, suite(text)), "--url", live.url, "--json")
    assert ran.status == 1
    (case,), _ = records(ran)
    assert len(case["repeats"][0]["turns"]) == 3
    assert case["expected"] == "the goal met within 3 turns (get a refund for order 42)"
    assert case["actual"] == "not met: no refund yet"


CAPITAL = """
[[cases]]
name = "capital"

[[cases.turns]]
send = "capital of France?"
expect = { contains = ["Paris"] }

[[cases]]
name = "always wrong"

[[cases.turns]]
send = "capital of France?"
expect = { contains = ["Berlin"] }
"""


def test_run_compare_last_fails_on_a_significant_regression_only(
    live: Served, tmp_path: Path, script: Script
) -> None:
    """`--compare last --fail-on-regression` over four repeats: a case that passed 4/4 and now
    fails 0/4 regressed (one-sided Fisher p = 1/70 < 0.05, status 1), its p-value in its JSON
    record and the stored case; a case that failed before too is `same` and fails nothing."""
    path = write_suite(tmp_path, f'name = "regressions"\nproject = "qa"\n{CAPITAL}')
    four = ("--url", live.url, "--json", "--repeat", "4")
    first = run_testassistant(path, *four)
    assert first.status == 1, first.out + first.error
    _, first_summary = records(first)
    script.capital = "Marseille."
    try:
        regressed = run_testassistant(path, *four, "--compare", "last", "--fail-on-regression")
        again = run_testassistant(path, *four, "--fail-on-regression")
    finally:
        script.capital = "Paris."
    assert regressed.status == 1, regressed.out + regressed.error
    found, summary = records(regressed)
    told = {case["case"]: (case["change"], case["p_value"]) for case in found}
    assert told == {
        "capital": ("regressed", pytest.approx(1 / 70)),
        "always wrong": ("same", 1.0),
    }
    assert found[0]["interval"] == [0.0, pytest.approx(0.4899, abs=1e-4)]
    assert (summary["regressed"], summary["notes"]) == (1, [])
    stored = live.tester.get(f"/api/suite-runs/{summary['run']}")
    assert (stored["run"]["baseline"], stored["run"]["alpha"]) == (first_summary["run"], 0.05)
    assert {case["case"]: case["change"] for case in stored["cases"]} == {
        "capital": "regressed",
        "always wrong": "same",
    }
    kept = {case["case"]: case for case in stored["cases"]}["capital"]
    assert (kept["p_value"], kept["baseline_passed_runs"], kept["baseline_runs"]) == (
        pytest.approx(1 / 70),
        4,
        4,
    )
    # Both fail now, as they did in the run before: nothing regressed, status 0.
    assert again.status == 0, again.out + again.error
    found, summary = records(again)
    assert [case["verdict"] for case in found] == ["fail", "fail"]
    assert summary["regressed"] == 0
    fixed = run_testassistant(path, *four, "--compare", str(summary["run"]))
    assert {case["case"]: case["change"] for case in records(fixed)[0]} == {
        "capital": "fixed",
        "always wrong": "same",
    }


def test_run_drop_too_small_to_be_significant_is_same_within_noise(
    live: Served, tmp_path: Path, script: Script
) -> None:
    """Three repeats at alpha 0.05: 3/3 → 0/3 has p = 0.05, not below alpha, so the case is
    `same`, told "within noise" with its p-value; the run says once that three repeats cannot
    regress and that four could; `--fail-on-regression` passes."""
    path = write_suite(tmp_path, f'name = "noise"\nproject = "qa"\n{CAPITAL}')
    first = run_testassistant(path, "--url", live.url, "--repeat", "3")
    assert first.status == 1, first.out + first.error
    script.capital = "Marseille."
    try:
        ran = run_testassistant(path, "--url", live.url, "--repeat", "3", "--fail-on-regression")
    finally:
        script.capital = "Paris."
    assert ran.status == 0, ran.out + ran.error
    note = (
        "note: with repeat = 3, no drop can be significant at alpha 0.05 (even 3/3 → 0/3 has "
        "p = 0.05), so 2 cases cannot regress; repeat = 4 could show one"
    )
    assert ran.out.splitlines()[0] == note
    assert ran.out.count("note: ") == 1
    assert "· 0/3 fail, 95% interval 0–56% · same, within noise (p = 0.05 against 3/3)" in ran.out
    assert "; 0 regressed against run " in ran.out.splitlines()[-1]


def test_run_is_stored_for_the_tester_and_hidden_from_the_human(
    live: Served, tmp_path: Path
) -> None:
    """The run, its cases with verdict, k/N, instance, threads and each failure's expected and
    actual, through the tester listener; the human listener answers 404; the human's trail
    gains only rows labelled as the tester's (R16, R20)."""
    trail = live.human.get("/api/trail?limit=500")["rows"]
    path = write_suite(tmp_path, f'name = "stored"\nproject = "qa"\n{CAPITAL}')
    ran = run_testassistant(path, "--url", live.url, "--json", "--repeat", "2")
    found, summary = records(ran)
    stored = live.tester.get(f"/api/suite-runs/{summary['run']}")
    assert stored["run"]["suites"] == ["stored"]
    assert stored["run"]["counts"] == {"pass": 1, "flaky": 0, "fail": 1, "error": 0, "regressed": 0}
    cases = {case["case"]: case for case in stored["cases"]}
    for case in found:
        kept = cases[case["case"]]
        assert (kept["verdict"], kept["passed_runs"], kept["runs"]) == (
            case["verdict"],
            case["passed_repeats"],
            case["repeat_count"],
        )
        assert [repeat["thread"] for repeat in kept["repeats"]] == [
            repeat["thread"] for repeat in case["repeats"]
        ]
        # `attempts`, the deprecated name of `repeats`, is still served.
        assert kept["attempts"] == kept["repeats"]
        assert kept["instance"] == "assistant"
        assert sorted(kept["threads"]) == sorted(case["threads"])
    assert cases["always wrong"]["failures"][0]["expected"] == "the reply contains 'Berlin'"
    assert cases["always wrong"]["failures"][0]["actual"] == "Paris."
    newest = live.tester.get("/api/suite-runs")["runs"][0]
    assert newest["id"] == summary["run"]
    for route in ("/api/suite-runs", f"/api/suite-runs/{summary['run']}"):
        answer = live.human.client.get(route)
        assert (answer.status_code, answer.json()["error"]) == (404, "not-found")
    later = [row for row in live.human.get("/api/trail?limit=500")["rows"] if row not in trail]
    # Only rows of the run's own tester threads, its turns labelled as the tester's.
    run_threads = {thread for case in found for thread in case["threads"]}
    assert {row["thread"] for row in later} == run_threads
    assert any(row["text"].startswith("tester to assistant: ") for row in later)


def test_run_archives_the_threads_of_passed_repeats_only(live: Served, tmp_path: Path) -> None:
    """A passed repeat's thread leaves the tester's working list; a failed one stays for a
    person to open; `--keep-threads` keeps them all."""
    path = write_suite(tmp_path, f'name = "tidy"\nproject = "qa"\n{CAPITAL}')
    found, _ = records(run_testassistant(path, "--url", live.url, "--json"))
    threads = {case["case"]: case["threads"][0] for case in found}
    working = {t["id"] for t in live.tester.get("/api/chat/threads?limit=500")["threads"]}
    archived = {
        t["id"] for t in live.tester.get("/api/chat/threads?limit=500&archived=true")["threads"]
    }
    assert threads["capital"] in archived and threads["capital"] not in working
    assert threads["always wrong"] in working
    found, _ = records(run_testassistant(path, "--url", live.url, "--json", "--keep-threads"))
    working = {t["id"] for t in live.tester.get("/api/chat/threads?limit=500")["threads"]}
    assert {case["threads"][0] for case in found} <= working


def test_run_writes_an_html_report_of_every_case(live: Served, tmp_path: Path) -> None:
    path = write_suite(tmp_path, f'name = "html"\nproject = "qa"\n{CAPITAL}')
    report = tmp_path / "report.html"
    ran = run_testassistant(path, "--url", live.url, "--html", report)
    assert ran.status == 1
    page = report.read_text()
    assert "capital" in page and "always wrong" in page
    assert "expected the reply contains &#x27;Berlin&#x27;" in page


# --- what replies cost ------------------------------------------------------------------------

# Each reply records 11 tokens in and 2 out (the fake model's usage): $0.021 at chat-a's prices
# in the suite file, $0.2 at the rival instance's in the business file.
PRICING = "[pricing.chat-a]\ninput = 1000\noutput = 5000\n"
COSTS = """
[[cases]]
name = "within its cost"

[[cases.turns]]
send = "capital of France?"
expect = { max_cost = 0.05 }

[[cases]]
name = "over its cost"

[[cases.turns]]
send = "capital of France?"
expect = { max_cost = 0.02 }

[[cases]]
name = "priced by its instance"
instance = "rival"

[[cases.turns]]
send = "capital of France?"
expect = { max_cost = 0.1 }

[[cases]]
name = "conversation over its cost"

[[cases.turns]]
send = "capital of France?"

[[cases.turns]]
send = "capital of France?"

[cases.expect_conversation]
max_cost = 0.03
"""


def test_run_max_cost_passes_fails_or_is_unknown_and_every_report_tells_the_cost(
    live: Served, tmp_path: Path
) -> None:
    """`max_cost` against the usage the listener recorded, at the suite file's prices or, for a
    model it does not price, at its instance's in the business file: within it, over it, and
    with no price at all (no pass); tokens and cost in the text, --json, JUnit, HTML and the
    stored history."""
    path = write_suite(tmp_path, suite(COSTS, head=PRICING))
    junit, html = tmp_path / "junit.xml", tmp_path / "report.html"
    ran = run_testassistant(path, "--url", live.url, "--json", "--junit", junit, "--html", html)
    assert ran.status == 1, ran.out + ran.error
    found, summary = records(ran)
    shown = {case["case"]: case for case in found}
    assert {name: (case["verdict"], case["actual"]) for name, case in shown.items()} == {
        "within its cost": ("pass", None),
        "over its cost": ("fail", "it cost $0.021 (11 tokens in, 2 out)"),
        "priced by its instance": ("fail", "it cost $0.2 (11 tokens in, 2 out)"),
        "conversation over its cost": ("fail", "it cost $0.042"),
    }
    assert shown["over its cost"]["expected"] == "a cost of at most $0.02"
    assert shown["within its cost"]["cost"] == {
        "turns": 1,
        "prompt_tokens": 11,
        "completion_tokens": 2,
        "amount": 0.021,
        "turns_without_usage": 0,
        "turns_without_price": 0,
    }
    assert shown["within its cost"]["repeats"][0]["turns"][0]["cost"] == 0.021
    assert summary["cost"] == {
        "turns": 5,
        "prompt_tokens": 55,
        "completion_tokens": 10,
        "amount": 0.284,
        "turns_without_usage": 0,
        "turns_without_price": 0,
    }
    testcase = ElementTree.parse(junit).getroot().find("./testsuite/testcase")
    assert testcase is not None
    told = {p.get("name"): p.get("value") for p in testcase.iter("property")}
    assert (told["cost"], told["prompt_tokens"], told["turns_without_usage"]) == (
        "0.021",
        "11",
        "0",
    )
    page = html.read_text(encoding="utf-8")
    assert "model chat-a · finish stop · cost $0.021" in page
    assert "tokens 55 in, 10 out · cost $0.284; written" in page
    read = live.tester.get(f"/api/suite-runs/{summary['run']}")
    stored = read["cases"]
    kept = next(case for case in stored if case["case"] == "within its cost")
    [turn] = kept["repeats"][0]["turns"]
    assert (turn["usage"], turn["cost"]) == ({"prompt_tokens": 11, "completion_tokens": 2}, 0.021)
    # Each case's cost as --json told it, and the run's their sum, the summary's.
    assert {case["case"]: case["cost"] for case in stored} == {
        case["case"]: case["cost"] for case in found
    }
    assert read["run"]["cost"] == {**summary["cost"], "cases_without_cost": 0}
    text = run_testassistant(path, "--url", live.url, "-k", "within")
    assert (
        "PASS  judged · within its cost (1 turn) · 1/1 pass, 95% interval 21–100% · tokens 11 in, "
        "2 out · cost $0.021"
    ) in (text.out)
    assert text.out.splitlines()[-1].endswith(" s; tokens 11 in, 2 out · cost $0.021")
    # Without the suite file's [pricing], chat-a has no price anywhere: no pass.
    unpriced = write_suite(tmp_path, suite(COSTS), "unpriced.suite.toml")
    ran = run_testassistant(unpriced, "--url", live.url, "-k", "within", "--json")
    (case,), summary = records(ran)
    assert case["actual"] == (
        "the cost is unknown: no price for model 'chat-a' in the suite file's [pricing], nor for "
        "its instance in the business file"
    )
    assert (summary["cost"]["amount"], summary["cost"]["turns_without_price"]) == (None, 1)


def test_run_turns_without_usage_are_counted_as_unknown_never_as_zero(
    live: Served, tmp_path: Path, model: FakeModel
) -> None:
    """A model server that reports no usage: `max_cost` cannot pass, and every report counts
    the turns as without usage instead of costing them nothing."""
    path = write_suite(tmp_path, suite(COSTS, head=PRICING))
    usage, model.usage = model.usage, None
    try:
        ran = run_testassistant(path, "--url", live.url, "-k", "its cost", "--max-cost", "0.01")
    finally:
        model.usage = usage
    assert ran.status == 1, ran.out + ran.error
    assert (
        "FAIL  judged · within its cost: turn 1 “capital of France?”: expected a cost of at most "
        "$0.05; got “the cost is unknown: the backend recorded no token usage” · 0/1 fail, "
        "95% interval 0–79% · "
        "tokens unknown · cost unknown (1 turn without usage)"
    ) in ran.out
    # --max-cost counts no unknown turn: every case ran.
    assert "STOP" not in ran.out and "not run" not in ran.out
    assert ran.out.splitlines()[-1].endswith(
        " s; tokens unknown · cost unknown (4 turns without usage)"
    )


STOPPED = """
[[cases]]
name = "first"

[[cases.turns]]
send = "capital of France?"

[[cases.turns]]
send = "capital of France?"

[[cases]]
name = "second"

[[cases.turns]]
send = "capital of France?"

[[cases]]
name = "third"

[[cases.turns]]
send = "capital of France?"
"""


def requests_of(model: FakeModel, name: str) -> int:
    return sum(request["model"] == name for request in model.requests)


@pytest.mark.parametrize(
    ("max_cost", "first", "sent"),
    [
        # $0.021 of $0.03 after turn 1: turn 2 is sent; $0.042 then stops the rest.
        ("0.03", ("pass", None), 2),
        # $0.021 of $0.02 after turn 1: turn 2 is never sent, and the case has no verdict.
        ("0.02", ("error", "cost-limit"), 1),
    ],
)
def test_run_max_cost_stops_sending_turns_and_says_so(
    live: Served,
    tmp_path: Path,
    model: FakeModel,
    max_cost: str,
    first: tuple[str, str | None],
    sent: int,
) -> None:
    path = write_suite(tmp_path, suite(STOPPED, head=PRICING))
    before = requests_of(model, "chat-a")
    ran = run_testassistant(path, "--url", live.url, "--max-cost", max_cost)
    assert ran.status == 1, ran.out + ran.error
    assert requests_of(model, "chat-a") - before == sent
    lines = ran.out.splitlines()
    stop = next(line for line in lines if line.startswith("STOP"))
    cut = "1 repeat" if first[0] == "error" else "0 repeats"
    assert stop == (
        f"STOP  the test run reached --max-cost ${max_cost} (${0.021 * sent:g} counted) and sent "
        f"no turn after it: {cut} cut short, 2 cases not run"
    )
    assert lines[lines.index(stop) + 1 :][:2] == [
        "SKIP  judged · second: not run",
        "SKIP  judged · third: not run",
    ]
    ran = run_testassistant(path, "--url", live.url, "--max-cost", max_cost, "--json")
    found, summary = records(ran)
    [(case, verdict, error)] = [(c["case"], c["verdict"], c["error"]) for c in found]
    assert (case, (verdict, error)) == ("first", first)
    assert (summary["max_cost"], summary["max_cost_reached"], summary["not_run"]) == (
        float(max_cost),
        True,
        2,
    )
    assert [c["case"] for c in live.tester.get(f"/api/suite-runs/{summary['run']}")["cases"]] == [
        "first"
    ]
