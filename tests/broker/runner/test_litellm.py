"""The chat completions backend against a real peer: the LiteLLM proxy, started once for the
session on a free port (SPEC §7.1: streaming, failures classified, what the server reported).

Its models are LiteLLM's mocks — `mock_response` (streamed three characters a chunk),
`mock_delay`, and the error mocks `litellm.ContextWindowExceededError` (400),
`litellm.InternalServerError` (500) and `litellm.RateLimitError` (429; the router then cools
the model down and answers 429 with `Retry-After`) — and fake models the proxy relays: one that
streams slowly, one cut at its token limit, and one whose stream turns malformed (LiteLLM's
`mock_response` streams everything at once and cannot end in `length`).

LiteLLM that cannot start fails these tests; nothing here is skipped.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from broker.runner.backends import Reply, ReplyFailed, TurnCancelled, no_drafts
from broker.runner.backends.chat_completions import ChatCompletionsBackend
from tests.broker.runner.test_backends import Tools, make_turn
from tests.model_servers import FakeModel, LiteLLMProxy, serve_fake_model

MOCK_REPLY = "Hello from the proxy, streamed in small pieces."
COOLDOWN = 3
SLOW_PIECES = [f"piece{number} " for number in range(12)]
SLOW_CHUNK_DELAY = 0.25


def proxy_config(
    *, slow_upstream: str, cut_off_upstream: str, malformed_upstream: str
) -> dict[str, object]:
    def model(name: str, **params: object) -> dict[str, object]:
        return {
            "model_name": name,
            "litellm_params": {"model": f"openai/{name}", "api_key": "unused", **params},
        }

    return {
        "model_list": [
            model("mock-stream", mock_response=MOCK_REPLY),
            model("thinking", mock_response=MOCK_REPLY, mock_delay=30),
            model("context-too-long", mock_response="litellm.ContextWindowExceededError"),
            model("down", mock_response="litellm.InternalServerError"),
            model("busy", mock_response="litellm.RateLimitError"),
            model("slow-upstream", api_base=slow_upstream),
            model("cut-off-upstream", api_base=cut_off_upstream),
            model("malformed-upstream", api_base=malformed_upstream),
        ],
        # One try per request (retries are the run's); a rate-limited model cools down at its
        # first 429, after which the router answers 429 with Retry-After: COOLDOWN.
        "router_settings": {
            "num_retries": 0,
            "cooldown_time": COOLDOWN,
            "allowed_fails_policy": {"RateLimitErrorAllowedFails": 0},
        },
        "litellm_settings": {"num_retries": 0, "request_timeout": 60},
    }


class Peer:
    """The running proxy, and the fake model behind it that streams slowly."""

    def __init__(self, proxy: LiteLLMProxy, slow: FakeModel) -> None:
        self.proxy = proxy
        self.slow = slow

    def backend(self, model: str, *, idle_timeout: float = 10.0) -> ChatCompletionsBackend:
        return ChatCompletionsBackend(
            base_url=self.proxy.url,
            model=model,
            api_key=self.proxy.key,
            connect_timeout=5.0,
            idle_timeout=idle_timeout,
        )


def chunk(content: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]})


@pytest.fixture(scope="session")
def litellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    """The LiteLLM proxy for the whole session; it fails (never skips) when it cannot start."""
    with ExitStack() as stack:
        slow = stack.enter_context(
            serve_fake_model(FakeModel(pieces=SLOW_PIECES, chunk_delay=SLOW_CHUNK_DELAY))
        )
        cut_off = stack.enter_context(
            serve_fake_model(FakeModel(content="It was the best of", finish_reason="length"))
        )
        # A first chunk, then one that is not JSON: the proxy has already answered 200.
        malformed = stack.enter_context(
            serve_fake_model(FakeModel(raw_events=[chunk("Hel"), '{"choices": [{"del']))
        )
        proxy = LiteLLMProxy(
            config=proxy_config(
                slow_upstream=slow.url,
                cut_off_upstream=cut_off.url,
                malformed_upstream=malformed.url,
            ),
            workdir=tmp_path_factory.mktemp("litellm"),
        )
        stack.callback(proxy.stop)
        try:
            proxy.start()
        except RuntimeError as error:
            pytest.fail(str(error), pytrace=False)
        print(f"\nLiteLLM proxy answered {proxy.started_in:.1f} s after its start")
        yield Peer(proxy, slow)


def ask(backend: ChatCompletionsBackend, drafts: list[str] | None = None) -> Reply:
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


def test_litellm_streamed_reply_drafts_before_reply_and_records_usage(litellm: Peer) -> None:
    """SPEC §7.1: drafts (the whole text so far) arrive before the reply, which equals the
    mock; the model, finish reason and usage the proxy reported are kept."""
    drafts: list[str] = []
    reply = ask(litellm.backend("mock-stream"), drafts)
    assert reply.text == MOCK_REPLY
    assert len(drafts) >= 10  # three characters a chunk
    assert drafts[0] == MOCK_REPLY[:3]
    assert all(MOCK_REPLY.startswith(draft) for draft in drafts)
    assert drafts[-1] == MOCK_REPLY
    assert (reply.model, reply.finish_reason) == ("mock-stream", "stop")
    assert reply.prompt_tokens is not None and reply.prompt_tokens > 0
    assert reply.completion_tokens is not None and reply.completion_tokens > 0
    assert reply.first_token_ms is not None


def test_litellm_reply_cut_at_token_limit_keeps_length(litellm: Peer) -> None:
    """SPEC §7.1: `length` relayed by the proxy is returned as is (the run marks it)."""
    reply = ask(litellm.backend("cut-off-upstream"))
    assert (reply.text, reply.finish_reason) == ("It was the best of", "length")


def test_litellm_slow_stream_drafts_as_it_goes_and_is_not_cut_off(litellm: Peer) -> None:
    """SPEC §7.1: the idle timeout is between chunks: a reply streaming for longer than it
    is never cut off, and drafts show it growing."""
    started = time.monotonic()
    drafts: list[float] = []
    reply = litellm.backend("slow-upstream", idle_timeout=1.0).reply(
        make_turn("hi"),
        tools=Tools(55),
        cancel=threading.Event(),
        draft=lambda _: drafts.append(time.monotonic() - started),
    )
    took = time.monotonic() - started
    assert reply.text == "".join(SLOW_PIECES)
    assert took > 1.0 * 2
    assert drafts[0] < took / 2
    assert reply.model and reply.finish_reason == "stop"


def test_litellm_stop_mid_stream_closes_request(litellm: Peer) -> None:
    """SPEC §7: a stop mid-stream closes the request at once; the proxy in turn hangs up on
    the model behind it."""
    litellm.slow.hung_up.clear()
    cancel = threading.Event()
    drafts: list[str] = []

    def draft(text: str) -> None:
        drafts.append(text)
        if len(drafts) == 2:
            cancel.set()

    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        litellm.backend("slow-upstream").reply(
            make_turn("hi"), tools=Tools(55), cancel=cancel, draft=draft
        )
    assert drafts == ["piece0 ", "piece0 piece1 "]
    assert time.monotonic() - started < 3 * SLOW_CHUNK_DELAY + 2
    assert litellm.slow.hung_up.wait(5)


def test_litellm_stop_while_model_thinks_returns_at_once(litellm: Peer) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        litellm.backend("thinking").reply(
            make_turn("hi"), tools=Tools(55), cancel=cancel, draft=no_drafts
        )
    assert time.monotonic() - started < 1.5


def test_litellm_model_silent_past_idle_timeout_is_transient(litellm: Peer) -> None:
    failed = failure(litellm.backend("thinking", idle_timeout=0.5))
    assert failed.transient
    assert failed.sentence == "The model server sent nothing for 0.5 s (idle timeout)."


def test_litellm_context_window_400_is_permanent(litellm: Peer) -> None:
    """SPEC §7.1: a prompt too long for the model fails at once, in a sentence."""
    failed = failure(litellm.backend("context-too-long"))
    assert not failed.transient and failed.retry_after is None
    assert failed.sentence.startswith("The prompt is too long for the model: ")
    assert "context window exceeded" in failed.sentence
    assert len(failed.sentence) < 260


def test_litellm_internal_error_500_is_transient(litellm: Peer) -> None:
    failed = failure(litellm.backend("down"))
    assert failed.transient
    assert failed.sentence.startswith("The model server failed (500): ")
    assert "mock internal server error" in failed.sentence


def test_litellm_rate_limit_429_is_transient_with_retry_after(litellm: Peer) -> None:
    """SPEC §7.1: 429 is transient; once LiteLLM cools the model down it answers with
    `Retry-After`, which the failure carries."""
    first = failure(litellm.backend("busy"))
    assert first.transient
    assert first.sentence.startswith("The model server is busy (429).")
    cooled = failure(litellm.backend("busy"))
    assert cooled.transient
    assert cooled.retry_after == COOLDOWN
    assert cooled.sentence.startswith(
        f"The model server is busy (429); it asked to wait {COOLDOWN} s."
    )


def test_litellm_unknown_model_is_permanent(litellm: Peer) -> None:
    failed = failure(litellm.backend("no-such-model"))
    assert not failed.transient
    assert "no-such-model" in failed.sentence


def test_litellm_bad_key_is_permanent(litellm: Peer) -> None:
    """A key the proxy does not accept fails at once (LiteLLM without a key database answers
    400 rather than 401: either is permanent)."""
    backend = litellm.backend("mock-stream")
    backend.api_key = "sk-wrong"
    failed = failure(backend)
    assert not failed.transient
    assert failed.sentence.startswith("The model server refused the")


def test_litellm_stream_broken_mid_reply_is_transient(litellm: Peer) -> None:
    """An upstream whose stream turns malformed after the first chunk: the proxy reports the
    error inside its 200 stream, and the failure is transient, in a sentence."""
    drafts: list[str] = []
    with pytest.raises(ReplyFailed) as raised:
        ask(litellm.backend("malformed-upstream"), drafts)
    failed = raised.value
    assert failed.transient
    assert failed.sentence.startswith("The model server reported an error mid-reply: ")
    assert drafts == ["Hel"]
