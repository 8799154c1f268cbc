"""The judge: what counts as a vote, and how an OpenAI-compatible server is asked (a scripted
one on 127.0.0.1; nothing leaves the machine)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tester.suites.judge import (
    GRADER,
    JSON_MODE,
    REMINDER,
    USER_PLAYER,
    Judge,
    JudgeConfig,
    JudgeError,
    Verdict,
    Vote,
    read_vote,
)

VERDICT = '{"pass": true, "reason": "x"}'


@pytest.mark.parametrize(
    ("content", "vote"),
    [
        (VERDICT, Vote(True, "x")),
        ('{"pass": false, "reason": "too long"}', Vote(False, "too long")),
        ('  \n{"reason": "", "pass": false}\n', Vote(False, "")),
        (f"```json\n{VERDICT}\n```", Vote(True, "x")),
        ('```\n{"pass": false, "reason": "y"}\n```', Vote(False, "y")),
        (f"\n```json\n{VERDICT}```\n", Vote(True, "x")),
        # Prose before, after or both, and a fence after prose.
        (f"Here: {VERDICT}", Vote(True, "x")),
        ('Here is my verdict: {"pass": false, "reason": "x"} hope that helps', Vote(False, "x")),
        (f"Sure.\n```json\n{VERDICT}\n```\nAnything else?", Vote(True, "x")),
        (f"{VERDICT}\nThe reply names the city.", Vote(True, "x")),
        # Braces that are no JSON, or JSON that is no verdict, before the verdict.
        (f'The {{city}} slot is filled: {{"city": "Paris"}}. {VERDICT}', Vote(True, "x")),
        # A verdict nested in a wrapper, or in a list.
        (f'{{"verdict": {VERDICT}}}', Vote(True, "x")),
        (f"[{VERDICT}]", Vote(True, "x")),
        # The same verdict twice is one verdict, the first reason.
        (f'{VERDICT} so: {{"pass": true, "reason": "y"}}', Vote(True, "x")),
    ],
)
def test_read_vote_finds_the_first_verdict_bare_fenced_or_among_prose(
    content: str, vote: Vote
) -> None:
    assert read_vote(content) == vote


@pytest.mark.parametrize(
    "content",
    [
        "",
        "Yes, it passes.",
        '{"pass": true, "reason": "x"',
        '{"pass": true}',
        '{"reason": "x"}',
        '{"pass": "true", "reason": "x"}',
        '{"pass": 1, "reason": "x"}',
        '{"pass": true, "reason": null}',
        '{"pass": true, "reason": ["x"]}',
        '{"pass": true, "reason": "x {\\"pass\\": false}"',
        # Two verdicts that disagree: the judge has not decided.
        f'```json\n{VERDICT}\n```\n```json\n{{"pass": false, "reason": "y"}}\n```',
        '{"pass": false, "reason": "a"} or rather {"pass": true, "reason": "b"}',
        # Braces by the thousand, and nesting deeper than the decoder goes.
        "{" * 100_000,
        '{"a": ' + "[" * 100_000,
    ],
)
def test_read_vote_finds_none_in_anything_but_a_verdict(content: str) -> None:
    assert read_vote(content) is None


def test_vote_as_json_says_whether_it_is_valid() -> None:
    assert Vote(True, "x").as_json() == {"pass": True, "reason": "x", "valid": True}
    assert Vote(None, "Looks fine.").as_json() == {
        "pass": None,
        "reason": "Looks fine.",
        "valid": False,
    }


# --- a scripted OpenAI-compatible server ------------------------------------------------------


def completion(content: str) -> str:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]})


def vote(passed: bool, reason: str) -> tuple[int, str]:
    return 200, completion(json.dumps({"pass": passed, "reason": reason}))


@dataclass
class Scripted:
    """Answers `answers` in order, one per request, and keeps what it was asked."""

    answers: list[tuple[int, str]]
    url: str = ""
    paths: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


@contextmanager
def judge_server(*answers: tuple[int, str]) -> Iterator[Scripted]:
    script = Scripted(list(answers))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            script.paths.append(self.path)
            script.headers.append(dict(self.headers))
            script.requests.append(json.loads(self.rfile.read(length)))
            status, body = script.answers.pop(0)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # A short poll: `shutdown` waits for the loop to notice, half a second by default.
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    script.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield script
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


TRANSCRIPT = [("user", "hello"), ("assistant", "Hi, Ada.")]


def test_judge_asks_at_temperature_zero_with_the_model_and_the_configured_key() -> None:
    with judge_server(vote(True, "greets by name")) as server:
        config = JudgeConfig(server.url + "/", "grader-7b", api_key_env="SUITE_JUDGE_KEY")
        judge = Judge(config, environ={"SUITE_JUDGE_KEY": "s3cret", "MOSAIC_JUDGE_API_KEY": "no"})
        verdict = judge.grade_reply("Greets the user by name.", TRANSCRIPT)
    assert verdict == Verdict(True, (Vote(True, "greets by name"),))
    assert server.paths == ["/v1/chat/completions"]
    [request] = server.requests
    assert (request["model"], request["temperature"]) == ("grader-7b", 0)
    assert request["response_format"] == {"type": "json_object"}
    assert [message["role"] for message in request["messages"]] == ["system", "user"]
    assert request["messages"][0]["content"] == GRADER
    prompt = request["messages"][1]["content"]
    assert "Greets the user by name." in prompt and "ASSISTANT: Hi, Ada." in prompt
    assert server.headers[0]["Authorization"] == "Bearer s3cret"


@pytest.mark.parametrize(
    ("api_key_env", "environ", "authorization"),
    [
        (None, {"MOSAIC_JUDGE_API_KEY": "default-key"}, "Bearer default-key"),
        (None, {}, None),
        ("SUITE_JUDGE_KEY", {"SUITE_JUDGE_KEY": ""}, None),
    ],
)
def test_judge_sends_the_default_key_or_none(
    api_key_env: str | None, environ: dict[str, str], authorization: str | None
) -> None:
    with judge_server(vote(True, "ok")) as server:
        Judge(JudgeConfig(server.url, "m", api_key_env), environ=environ).grade_reply(
            "r", TRANSCRIPT
        )
    assert server.headers[0].get("Authorization") == authorization


@pytest.mark.parametrize(
    ("votes", "passed"),
    [
        ([(True, "a"), (False, "b"), (True, "c")], True),
        ([(False, "a"), (True, "b"), (False, "c")], False),
        ([(False, "a"), (False, "b"), (False, "c")], False),
    ],
)
def test_judge_with_three_votes_asks_three_times_and_the_majority_decides(
    votes: list[tuple[bool, str]], passed: bool
) -> None:
    with judge_server(*(vote(*v) for v in votes)) as server:
        judge = Judge(JudgeConfig(server.url, "m", votes=3), environ={})
        verdict = judge.grade_conversation("Polite throughout.", TRANSCRIPT)
    assert len(server.requests) == 3
    assert verdict.passed is passed
    assert verdict.reasons == ["a", "b", "c"]


def test_judge_goal_met_grades_the_transcript_against_the_persona_and_goal() -> None:
    with judge_server(vote(False, "no task yet")) as server:
        verdict = Judge(JudgeConfig(server.url, "m"), environ={}).goal_met(
            persona="a busy manager", goal="a task is created", transcript=TRANSCRIPT
        )
    assert verdict == Verdict(False, (Vote(False, "no task yet"),))
    prompt = server.requests[0]["messages"][1]["content"]
    assert "a busy manager" in prompt and "a task is created" in prompt


def test_judge_user_turn_is_the_models_answer_stripped() -> None:
    with judge_server((200, completion("  Please create a task.\n"))) as server:
        said = Judge(JudgeConfig(server.url, "m"), environ={}).user_turn(
            persona="a busy manager", goal="a task is created", transcript=[]
        )
    assert said == "Please create a task."
    [request] = server.requests
    assert (request["temperature"], request["messages"][0]["content"]) == (0, USER_PLAYER)
    # A user's turn is words, not JSON.
    assert "response_format" not in request


def free_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ((500, '{"error": "down"}'), "answered 500"),
        # An OpenAI-shaped error: its message is what the run tells.
        ((503, '{"error": {"message": "model  overloaded"}}'), "answered 503: model overloaded$"),
        ((401, '{"error": "bad key"}'), "answered 401"),
        ((200, "not json"), "did not answer"),
        ((200, '{"choices": []}'), "answered no message"),
        ((200, '{"choices": [{"message": {"content": null}}]}'), "answered no message"),
    ],
)
def test_judge_answering_no_verdict_raises_judge_error(answer: tuple[int, str], error: str) -> None:
    with judge_server(answer) as server:
        judge = Judge(JudgeConfig(server.url, "m"), environ={})
        with pytest.raises(JudgeError, match=error):
            judge.grade_reply("r", TRANSCRIPT)


def test_judge_unreachable_raises_judge_error() -> None:
    judge = Judge(JudgeConfig(f"http://127.0.0.1:{free_port()}/v1", "m"), environ={})
    with pytest.raises(JudgeError, match="did not answer"):
        judge.grade_reply("r", TRANSCRIPT)


def test_judge_writing_an_empty_user_turn_raises_judge_error() -> None:
    with judge_server((200, completion("  \n"))) as server:
        judge = Judge(JudgeConfig(server.url, "m"), environ={})
        with pytest.raises(JudgeError, match="empty user turn"):
            judge.user_turn(persona="p", goal="g", transcript=TRANSCRIPT)


def judged_by(server: Scripted, votes: int = 1) -> Judge:
    return Judge(JudgeConfig(server.url, "grader-7b", votes=votes), environ={})


def said(text: str) -> tuple[int, str]:
    return 200, completion(text)


def test_judge_reads_a_verdict_after_prose_or_in_a_fence_after_prose() -> None:
    prose = 'Here is my verdict: {"pass": false, "reason": "no name"} hope that helps'
    fenced = 'Sure. ```json\n{"pass": true, "reason": "greets Ada"}\n```'
    with judge_server(said(prose), said(fenced)) as server:
        judge = judged_by(server)
        first = judge.grade_reply("Greets by name.", TRANSCRIPT)
        second = judge.grade_reply("Greets by name.", TRANSCRIPT)
    assert (first, second) == (
        Verdict(False, (Vote(False, "no name"),)),
        Verdict(True, (Vote(True, "greets Ada"),)),
    )
    # Each read at once: nothing asked again.
    assert len(server.requests) == 2


def test_judge_asks_an_unreadable_answer_again_once_with_a_reminder() -> None:
    with judge_server(said("It greets Ada, so it passes."), vote(True, "greets Ada")) as server:
        verdict = judged_by(server).grade_reply("Greets by name.", TRANSCRIPT)
    assert verdict == Verdict(True, (Vote(True, "greets Ada"),))
    first, again = server.requests
    # Asked again with its answer and a reminder of the form after the question, in JSON mode.
    assert again["messages"] == [
        *first["messages"],
        {"role": "assistant", "content": "It greets Ada, so it passes."},
        {"role": "user", "content": REMINDER},
    ]
    assert again["response_format"] == JSON_MODE


def test_judge_unreadable_twice_is_an_invalid_vote_and_no_valid_vote_is_an_error() -> None:
    with judge_server(said("It passes."), said("  I said: it passes.\n")) as server:
        judge = judged_by(server)
        with pytest.raises(JudgeError) as raised:
            judge.grade_reply("Greets by name.", TRANSCRIPT)
    # Asked twice, not more; the vote keeps what the judge said the second time.
    assert len(server.requests) == 2
    assert raised.value.votes == (Vote(None, "I said: it passes."),)
    assert str(raised.value) == (
        f"the judge grader-7b at {judge.url} did not answer "
        '{"pass": true|false, "reason": "…"}: it said “I said: it passes.”'
    )


def test_judge_with_three_votes_counts_only_the_valid_ones_and_keeps_every_reason() -> None:
    """One vote of three is unreadable, asked again, and still unreadable: the two valid
    votes decide, and the invalid one is kept with what the judge said."""
    answers = [vote(False, "a"), said("Hmm."), said("Still hmm."), vote(False, "c")]
    with judge_server(*answers) as server:
        verdict = judged_by(server, votes=3).grade_conversation("Polite.", TRANSCRIPT)
    assert len(server.requests) == 4
    assert verdict == Verdict(False, (Vote(False, "a"), Vote(None, "Still hmm."), Vote(False, "c")))
    assert verdict.reasons == ["a", "c"]


@pytest.mark.parametrize(
    ("answers", "passed"),
    [
        ([vote(True, "a"), said("?"), said("?"), vote(True, "c")], True),
        # A tie of valid votes is no majority for a pass.
        ([vote(True, "a"), vote(False, "b"), said("?"), said("?")], False),
        # One valid vote of three decides alone.
        ([said("?"), said("?"), vote(True, "b"), said("?"), said("?")], True),
    ],
)
def test_judge_majority_of_valid_votes_decides(
    answers: list[tuple[int, str]], passed: bool
) -> None:
    with judge_server(*answers) as server:
        verdict = judged_by(server, votes=3).grade_conversation("Polite.", TRANSCRIPT)
    assert verdict.passed is passed
    assert len(verdict.votes) == 3


def test_judge_with_no_valid_vote_of_three_is_an_error_keeping_them_all() -> None:
    with (
        judge_server(*[said(f"no {n}") for n in range(6)]) as server,
        pytest.raises(JudgeError, match="in any of its 3 votes: it said “no 1”") as raised,
    ):
        judged_by(server, votes=3).grade_conversation("Polite.", TRANSCRIPT)
    assert raised.value.votes == (Vote(None, "no 1"), Vote(None, "no 3"), Vote(None, "no 5"))


def test_judge_failing_request_between_votes_keeps_the_votes_before_it() -> None:
    with (
        judge_server(vote(True, "a"), (503, '{"error": {"message": "busy"}}')) as server,
        pytest.raises(JudgeError, match=r"answered 503: busy$") as raised,
    ):
        judged_by(server, votes=3).grade_conversation("Polite.", TRANSCRIPT)
    assert raised.value.votes == (Vote(True, "a"),)
    # A server that fails is not asked the same again: that is no unreadable answer.
    assert len(server.requests) == 2


def refusal(status: int, message: str) -> tuple[int, str]:
    return status, json.dumps({"error": {"message": message, "type": "invalid_request_error"}})


@pytest.mark.parametrize(
    "refused",
    [
        refusal(400, "Invalid parameter: 'response_format' of type 'json_object' is not supported"),
        refusal(400, "Unsupported parameter: json_object"),
        (422, '{"detail": [{"loc": ["body", "response_format"], "msg": "extra fields"}]}'),
    ],
)
def test_judge_refused_json_mode_asks_again_without_it_and_remembers(
    refused: tuple[int, str],
) -> None:
    with judge_server(refused, vote(True, "a"), vote(False, "b")) as server:
        judge = judged_by(server)
        first = judge.grade_reply("Greets by name.", TRANSCRIPT)
        later = judge.grade_reply("Greets by name.", TRANSCRIPT)
    assert (first.passed, later.passed) == (True, False)
    refused_request, fallback, later_request = server.requests
    assert refused_request["response_format"] == JSON_MODE
    # The same question without JSON mode, at once; and every later one goes without it.
    assert fallback == {k: v for k, v in refused_request.items() if k != "response_format"}
    assert "response_format" not in later_request
    assert judge.takes_json_mode is False


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        # Not about the parameter: a key, a rate, a server that failed, another mistake.
        (refusal(401, "response_format needs a paid key"), "answered 401"),
        (refusal(429, "too many requests; response_format"), "answered 429"),
        (refusal(500, "response_format crashed the server"), "answered 500"),
        (refusal(400, "the prompt is too long"), "answered 400: the prompt is too long$"),
    ],
)
def test_judge_error_that_does_not_refuse_json_mode_is_no_reason_to_fall_back(
    answer: tuple[int, str], error: str
) -> None:
    with judge_server(answer) as server:
        judge = judged_by(server)
        with pytest.raises(JudgeError, match=error):
            judge.grade_reply("r", TRANSCRIPT)
    assert len(server.requests) == 1
    assert judge.takes_json_mode is True


def test_judge_refusing_json_mode_and_then_the_question_too_says_the_second_refusal() -> None:
    answers = [refusal(400, "response_format unsupported"), refusal(400, "model not loaded")]
    with (
        judge_server(*answers) as server,
        pytest.raises(JudgeError, match=r"answered 400: model not loaded$"),
    ):
        judged_by(server).grade_reply("r", TRANSCRIPT)
    assert len(server.requests) == 2
