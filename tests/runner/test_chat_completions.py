"""The OpenAI-compatible chat completions backend (SPEC §7, `runner.backends.chat_completions`),
through a fake server on loopback."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest

from runner.backends import Reply, ReplyFailed, TurnCancelled, chat_completions, no_drafts
from runner.backends.chat_completions import ChatCompletionsBackend
from runner.backends.failures import MESSAGE_LIMIT
from runner.turns import TESTER_LINE
from tests.support.model_servers import FakeModel
from tests.support.turns import Tools, make_turn


def chat_backend(fake_model: FakeModel, **options) -> ChatCompletionsBackend:
    options.setdefault("idle_timeout", 5.0)
    options.setdefault("connect_timeout", 2.0)
    return ChatCompletionsBackend(
        base_url=fake_model.url, model="local-model", api_key=options.pop("key", ""), **options
    )


def ask(backend: ChatCompletionsBackend, *, drafts: list[str] | None = None) -> Reply:
    return backend.reply(
        make_turn("hi"),
        tools=Tools(55),
        cancel=threading.Event(),
        draft=no_drafts if drafts is None else drafts.append,
    )


def failure(backend: ChatCompletionsBackend) -> ReplyFailed:
    with pytest.raises(ReplyFailed) as raised:
        ask(backend)
    return raised.value


def assert_readable(sentence: str) -> None:
    """A sentence for a person: no exception names, reprs or tracebacks."""
    for mark in ("Error(", "Error:", "Exception", "Traceback", "{'", '{"', "httpx", "openai"):
        assert mark not in sentence, sentence


def test_chat_completions_tester_turn_prompt_begins_with_tester_line(fake_model) -> None:
    """SPEC §7: a tester turn's prompt begins with the tester line; history becomes messages."""
    turn = make_turn("and now?", "first question", tester=True)
    text = (
        chat_backend(fake_model, key="sk-test")
        .reply(turn, tools=Tools(None), cancel=threading.Event(), draft=no_drafts)
        .text
    )
    assert text == "model reply"
    (request,) = fake_model.requests
    assert request["model"] == "local-model"
    messages = request["messages"]
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].split("\n")[0] == TESTER_LINE
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "first question"),
        ("assistant", "reply 0"),
        ("user", "and now?"),
    ]
    assert fake_model.headers[0]["authorization"] == "Bearer sk-test"


def test_chat_completions_human_turn_prompt_has_no_tester_line(fake_model) -> None:
    chat_backend(fake_model).reply(
        make_turn("hello"), tools=Tools(55), cancel=threading.Event(), draft=no_drafts
    )
    prompt = fake_model.requests[0]["messages"]
    assert TESTER_LINE not in prompt[0]["content"]
    assert prompt[-1] == {"role": "user", "content": "hello"}


def test_chat_completions_asks_for_a_stream_with_usage_and_no_limits_unless_set(
    fake_model,
) -> None:
    ask(chat_backend(fake_model))
    ask(chat_backend(fake_model, max_tokens=64, temperature=0.2))
    plain, limited = fake_model.requests
    assert plain["stream"] is True
    assert plain["stream_options"] == {"include_usage": True}
    assert "max_tokens" not in plain and "temperature" not in plain
    assert (limited["max_tokens"], limited["temperature"]) == (64, 0.2)


def test_chat_completions_streamed_reply_drafts_whole_text_and_records_what_server_said(
    fake_model,
) -> None:
    """SPEC §7.1: drafts carry the whole reply so far; the reply records the model the server
    reported, its finish reason, token usage and the time to the first token."""
    fake_model.content = "The launch is on Friday at noon."
    fake_model.reported_model = "llama-3.2-3b-q4"
    drafts: list[str] = []
    reply = ask(chat_backend(fake_model), drafts=drafts)
    assert drafts == [
        "The ",
        "The launch ",
        "The launch is ",
        "The launch is on ",
        "The launch is on Friday ",
        "The launch is on Friday at ",
        "The launch is on Friday at noon.",
    ]
    assert reply.text == "The launch is on Friday at noon."
    assert (reply.model, reply.finish_reason) == ("llama-3.2-3b-q4", "stop")
    assert (reply.prompt_tokens, reply.completion_tokens) == (11, 2)
    assert reply.first_token_ms is not None and 0 <= reply.first_token_ms < 5000


def test_chat_completions_loads_the_certificates_once_per_process(fake_model, monkeypatch) -> None:
    """Loading the certificates holds the GIL for tens of milliseconds: once per request, it
    stalled every other thread of a busy runner (P5). Three requests and the check of
    the served models load them once, into the context every request checks TLS against."""
    from runner.backends import chat_completions

    loads: list[ssl.SSLContext] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(context)
        real(context, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    chat_completions.tls_context.cache_clear()
    backend = chat_backend(fake_model)
    for _ in range(3):
        assert ask(backend).text == fake_model.content
    backend.check()
    assert loads == [chat_completions.tls_context()]


def test_chat_completions_first_draft_arrives_while_model_still_streams(fake_model) -> None:
    fake_model.content = "one two three four five"
    fake_model.chunk_delay = 0.15
    started = time.monotonic()
    first_draft_at: list[float] = []
    backend = chat_backend(fake_model)
    reply = backend.reply(
        make_turn("hi"),
        tools=Tools(55),
        cancel=threading.Event(),
        draft=lambda _: first_draft_at.append(time.monotonic() - started),
    )
    finished_at = time.monotonic() - started
    assert reply.text == "one two three four five"
    assert finished_at >= 0.15 * 5
    assert first_draft_at[0] < finished_at - 0.3
    assert reply.first_token_ms is not None and reply.first_token_ms < finished_at * 1000 - 300


def test_chat_completions_slow_model_that_keeps_streaming_is_not_cut_off(fake_model) -> None:
    """SPEC §7.1: the idle timeout is between chunks, not for the whole reply."""
    fake_model.content = "a b c d e f g h"
    fake_model.chunk_delay = 0.15
    started = time.monotonic()
    reply = ask(chat_backend(fake_model, idle_timeout=0.5))
    assert reply.text == "a b c d e f g h"
    assert time.monotonic() - started > 2 * 0.5


def test_chat_completions_silence_between_chunks_is_idle_timeout(fake_model) -> None:
    fake_model.content = "a b"
    fake_model.chunk_delay = 3
    started = time.monotonic()
    failed = failure(chat_backend(fake_model, idle_timeout=0.3))
    assert failed.transient and failed.retry_after is None
    assert failed.sentence == "The model server sent nothing for 0.3 s (idle timeout)."
    assert time.monotonic() - started < 2


def test_chat_completions_model_silent_before_answer_is_idle_timeout(fake_model) -> None:
    fake_model.delay = 5
    failed = failure(chat_backend(fake_model, idle_timeout=0.3))
    assert failed.transient
    assert "sent nothing for 0.3 s" in failed.sentence


def test_chat_completions_cut_at_token_limit_returned_with_length(fake_model) -> None:
    """SPEC §7.1: `length` is recorded as is; the run shows the reply as cut off."""
    fake_model.content = "It was the best of"
    fake_model.finish_reason = "length"
    reply = ask(chat_backend(fake_model, max_tokens=5))
    assert (reply.text, reply.finish_reason) == ("It was the best of", "length")


def test_chat_completions_server_that_does_not_stream_is_read_whole(fake_model) -> None:
    """A server answering one JSON completion to a stream request still gives its reply."""
    fake_model.streams = False
    fake_model.reported_model = "plain-server"
    reply = ask(chat_backend(fake_model))
    assert reply == Reply(
        text="model reply",
        model="plain-server",
        finish_reason="stop",
        prompt_tokens=11,
        completion_tokens=2,
        first_token_ms=reply.first_token_ms,
    )
    assert reply.first_token_ms is not None


@pytest.mark.parametrize(
    ("finish_reason", "transient", "sentence"),
    [
        ("stop", True, "The model returned no text."),
        ("length", False, "The model reached its token limit before writing any text."),
        ("content_filter", False, "The model server withheld the reply (content filter)."),
    ],
)
@pytest.mark.parametrize("streams", [True, False], ids=["streamed", "whole"])
def test_chat_completions_reply_without_text_is_classified(
    fake_model, streams: bool, finish_reason: str, transient: bool, sentence: str
) -> None:
    fake_model.streams = streams
    fake_model.content = "  "
    fake_model.finish_reason = finish_reason
    failed = failure(chat_backend(fake_model))
    assert (failed.transient, failed.sentence) == (transient, sentence)


@pytest.mark.parametrize(
    ("status", "headers", "retry_after", "sentence"),
    [
        (408, {}, None, "The model server timed out the request (408)."),
        (
            429,
            {"Retry-After": "3"},
            3.0,
            "The model server is busy (429); it asked to wait 3 s. It said: slow down",
        ),
        (429, {"retry-after-ms": "1500"}, 1.5, None),
        (500, {}, None, "The model server failed (500): slow down"),
        (502, {}, None, "The model server failed (502): slow down"),
        (
            503,
            {"Retry-After": "10"},
            10.0,
            "The model server failed (503); it asked to wait 10 s: slow down",
        ),
    ],
)
def test_chat_completions_transient_status_is_retried_later(
    fake_model,
    status: int,
    headers: dict[str, str],
    retry_after: float | None,
    sentence: str | None,
) -> None:
    """SPEC §7.1: 408, 429 and 5xx are transient, honouring `Retry-After`; one attempt here
    (retries are the run's)."""
    fake_model.status = status
    fake_model.answer_headers = headers
    fake_model.error_message = "slow down"
    failed = failure(chat_backend(fake_model))
    assert failed.transient
    assert failed.retry_after == retry_after
    if sentence is not None:
        assert failed.sentence == sentence
    assert_readable(failed.sentence)
    assert len(fake_model.requests) == 1


def test_chat_completions_retry_after_as_http_date(fake_model) -> None:
    fake_model.status = 503
    later = datetime.now(UTC) + timedelta(seconds=30)
    fake_model.answer_headers = {"Retry-After": format_datetime(later, usegmt=True)}
    failed = failure(chat_backend(fake_model))
    assert failed.retry_after is not None and 25 <= failed.retry_after <= 30


@pytest.mark.parametrize(
    ("status", "error", "sentence"),
    [
        (
            400,
            {
                "message": "This model's maximum context length is 4096 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
            "The prompt is too long for the model: This model's maximum context length is "
            "4096 tokens.",
        ),
        (
            400,
            {"message": "the request exceeds the available context size", "code": 400},
            "The prompt is too long for the model: the request exceeds the available context size",
        ),
        (
            400,
            {"message": "temperature must be at most 2", "type": "invalid_request_error"},
            "The model server refused the request (400): temperature must be at most 2",
        ),
        (
            401,
            {"message": "Incorrect API key provided.", "code": "invalid_api_key"},
            "The model server refused the API key (401): Incorrect API key provided.",
        ),
        (
            404,
            {"message": "The model `gpt-9` does not exist", "code": "model_not_found"},
            "The model server does not know this model or endpoint (404): The model `gpt-9` "
            "does not exist",
        ),
        (422, {"message": "messages: field required"}, None),
    ],
    ids=["context-openai", "context-llama.cpp", "bad-parameter", "bad-key", "unknown-model", "422"],
)
def test_chat_completions_permanent_status_fails_at_once_with_server_words(
    fake_model, status: int, error: dict[str, object], sentence: str | None
) -> None:
    """SPEC §7.1: other 4xx (context too long, unknown model, bad key) are permanent."""
    fake_model.status = status
    fake_model.error_body = json.dumps({"error": error})
    fake_model.answer_headers = {"Retry-After": "5"}
    failed = failure(chat_backend(fake_model))
    assert not failed.transient
    assert failed.retry_after is None
    if sentence is not None:
        assert failed.sentence == sentence
    assert_readable(failed.sentence)


def test_chat_completions_long_server_message_is_trimmed(fake_model) -> None:
    fake_model.status = 400
    fake_model.error_message = "context length exceeded " + "x" * 5000
    failed = failure(chat_backend(fake_model))
    assert failed.sentence.startswith("The prompt is too long for the model: context length")
    assert failed.sentence.endswith("…")
    assert len(failed.sentence) < MESSAGE_LIMIT + 60


def test_chat_completions_html_error_page_is_not_shown(fake_model) -> None:
    fake_model.status = 502
    fake_model.error_body = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    failed = failure(chat_backend(fake_model))
    assert failed.transient
    assert failed.sentence == "The model server failed (502)."


@pytest.mark.parametrize(
    ("answer", "sentence"),
    [
        (
            {"raw_body": '{"id": "chatcmpl-1", "choices": [{"mess'},
            "The model server's answer could not be read: it is not valid JSON.",
        ),
        (
            {"raw_body": '{"id": "chatcmpl-1", "object": "chat.completion"}'},
            "The model server's answer could not be read: it has no choices.",
        ),
        (
            {"raw_body": '"just a string"'},
            "The model server's answer could not be read: it is not a JSON object.",
        ),
        (
            {"raw_events": ['{"choices": [{"delta": {"content": "Hel', "[DONE]"]},
            "The model server's answer could not be read: a streamed chunk is not valid JSON.",
        ),
        (
            {"raw_events": ["[1, 2]", "[DONE]"]},
            "The model server's answer could not be read: a streamed chunk is not a JSON object.",
        ),
        (
            {"raw_events": ['{"choices": [{"index": 0, "delta": {"content": 42}}]}', "[DONE]"]},
            "The model server's answer could not be read: its text is not a string.",
        ),
        (
            {"break_after": 2},
            "The model server's answer broke off before it was complete.",
        ),
        (
            {"finish_reason": None},
            "The model server's stream ended before the reply was finished.",
        ),
        (
            {"raw_events": ['{"error": {"message": "model overloaded", "code": "503"}}']},
            "The model server reported an error mid-reply: model overloaded",
        ),
    ],
    ids=[
        "cut-json",
        "no-choices",
        "not-an-object",
        "cut-chunk",
        "chunk-not-object",
        "text-not-string",
        "stream-broke-off",
        "no-finish-reason",
        "error-event",
    ],
)
def test_chat_completions_malformed_answer_is_transient_failure(
    fake_model, answer: dict[str, object], sentence: str
) -> None:
    """Decision: a 200 that is not a chat completion is a transient failure (a proxy's glitch
    or a cut body mends; a server that never speaks the protocol fails after the last
    attempt) — never a JSONDecodeError escaping as a traceback."""
    for name, value in answer.items():
        setattr(fake_model, name, value)
    failed = failure(chat_backend(fake_model))
    assert (failed.transient, failed.sentence) == (True, sentence)


def test_chat_completions_error_event_with_client_status_is_permanent(fake_model) -> None:
    fake_model.raw_events = ['{"error": {"message": "bad request", "code": "400"}}']
    failed = failure(chat_backend(fake_model))
    assert not failed.transient
    assert failed.sentence == "The model server reported an error mid-reply: bad request"


def test_chat_completions_stop_mid_stream_closes_request_at_once(fake_model) -> None:
    """SPEC §7: stop means stop — a stop mid-stream closes the HTTP request (the server sees
    the client hang up) and raises `TurnCancelled`."""
    fake_model.content = "a b c d e f g h i j"
    fake_model.chunk_delay = 1.0
    cancel = threading.Event()
    drafts: list[str] = []

    def draft(text: str) -> None:
        drafts.append(text)
        if text == "a b ":
            cancel.set()

    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        chat_backend(fake_model).reply(make_turn("hi"), tools=Tools(55), cancel=cancel, draft=draft)
    # "b" came two chunk delays in (after the role chunk and "a"); the stop took effect well
    # before the next chunk was due.
    assert time.monotonic() - started < 2 * 1.0 + 0.8
    assert drafts == ["a ", "a b "]
    assert fake_model.hung_up.wait(2)


def test_chat_completions_stop_while_model_thinks_closes_request(fake_model) -> None:
    """SPEC §7: a cancelled turn does not wait for the model."""
    fake_model.delay = 30
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        chat_backend(fake_model).reply(
            make_turn("hi"), tools=Tools(55), cancel=cancel, draft=no_drafts
        )
    # Far below the model's 30 s, on a loaded machine too; the hang-up is waited for, not timed.
    assert time.monotonic() - started < 10.0
    assert fake_model.hung_up.wait(20)


def test_chat_completions_unreachable_server_is_transient() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    backend = ChatCompletionsBackend(base_url=f"http://127.0.0.1:{port}/v1", model="m")
    failed = failure(backend)
    assert failed.transient
    assert failed.sentence == "The model server could not be reached (Connection refused)."


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose listen queue is full: a new connection is never accepted."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    waiting = []
    for _ in range(4):
        client = socket.socket()
        client.setblocking(False)
        client.connect_ex(("127.0.0.1", port))
        waiting.append(client)
    yield port
    for client in waiting:
        client.close()
    server.close()


def test_chat_completions_connect_timeout_is_transient(full_backlog: int) -> None:
    backend = ChatCompletionsBackend(
        base_url=f"http://127.0.0.1:{full_backlog}/v1", model="m", connect_timeout=0.3
    )
    started = time.monotonic()
    failed = failure(backend)
    assert failed.transient
    assert failed.sentence == "The model server did not accept a connection within 0.3 s."
    assert time.monotonic() - started < 2


def test_chat_completions_unexpected_client_error_is_classified_and_logged(
    fake_model, monkeypatch, caplog
) -> None:
    """Any exception from the client library becomes a classified failure, never a
    traceback in the turn; the log keeps the details for operators."""

    def broken_client(**options: object) -> None:
        raise KeyError("x-internal")

    monkeypatch.setattr(chat_completions, "AsyncOpenAI", broken_client)
    failed = failure(chat_backend(fake_model))
    assert failed.transient
    assert failed.sentence == (
        "The request to the model server failed unexpectedly (KeyError); the runner's log has "
        "the details."
    )
    assert "x-internal" in caplog.text


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"idle_timeout": 0}, "timeouts"),
        ({"connect_timeout": -1}, "timeouts"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": -0.1}, "temperature"),
    ],
)
def test_chat_completions_invalid_options_are_refused(options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ChatCompletionsBackend(base_url="http://127.0.0.1:1/v1", model="m", **options)
