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
    USER_PLAYER,
    Judge,
    JudgeConfig,
    JudgeError,
    Verdict,
    Vote,
    parse_vote,
)


@pytest.mark.parametrize(
    ("content", "vote"),
    [
        ('{"pass": true, "reason": "x"}', Vote(True, "x")),
        ('{"pass": false, "reason": "too long"}', Vote(False, "too long")),
        ('  \n{"reason": "", "pass": false}\n', Vote(False, "")),
        ('```json\n{"pass": true, "reason": "x"}\n```', Vote(True, "x")),
        ('```\n{"pass": false, "reason": "y"}\n```', Vote(False, "y")),
        ('\n```json\n{"pass": true, "reason": "x"}```\n', Vote(True, "x")),
    ],
)
def test_parse_vote_accepts_a_verdict_bare_or_in_a_lone_fenced_block(
    content: str, vote: Vote
) -> None:
    assert parse_vote(content) == vote


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
        '[{"pass": true, "reason": "x"}]',
        'Here: {"pass": true, "reason": "x"}',
        '```json\n{"pass": true, "reason": "x"}\n```\n```json\n{"pass": false, "reason": "y"}\n```',
    ],
)
def test_parse_vote_refuses_anything_but_a_verdict(content: str) -> None:
    with pytest.raises(JudgeError, match="the judge did not answer"):
        parse_vote(content)


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
        ((200, completion("It passes.")), "the judge did not answer"),
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
