"""The chat completions backend against a real peer: the LiteLLM proxy, started once for the
session on a free port (SPEC §7.1: streaming, failures classified, what the server reported).

Its models are LiteLLM's mocks and fake models the proxy relays (`tests/support/model_servers.py`,
`proxy_config`).

LiteLLM that cannot start fails these tests; nothing here is skipped.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from runner.backends import Reply, ReplyFailed, TurnCancelled, no_drafts
from runner.backends.chat_completions import ChatCompletionsBackend
from tests.support.model_servers import (
    ACTING_REPLY,
    COOLDOWN,
    MOCK_REPLY,
    SLOW_CHUNK_DELAY,
    SLOW_PIECES,
    LiteLLMPeer,
)
from tests.support.turns import Tools, make_turn


def backend(peer: LiteLLMPeer, model: str, *, idle_timeout: float = 10.0) -> ChatCompletionsBackend:
    return ChatCompletionsBackend(
        base_url=peer.proxy.url,
        model=model,
        api_key=peer.proxy.key,
        connect_timeout=5.0,
        idle_timeout=idle_timeout,
    )


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


def test_litellm_streamed_reply_drafts_before_reply_and_records_usage(litellm: LiteLLMPeer) -> None:
    """SPEC §7.1: drafts (the whole text so far) arrive before the reply, which equals the
    mock; the model, finish reason and usage the proxy reported are kept."""
    drafts: list[str] = []
    reply = ask(backend(litellm, "mock-stream"), drafts)
    assert reply.text == MOCK_REPLY
    assert len(drafts) >= 10  # three characters a chunk
    assert drafts[0] == MOCK_REPLY[:3]
    assert all(MOCK_REPLY.startswith(draft) for draft in drafts)
    assert drafts[-1] == MOCK_REPLY
    assert (reply.model, reply.finish_reason) == ("mock-stream", "stop")
    assert reply.prompt_tokens is not None and reply.prompt_tokens > 0
    assert reply.completion_tokens is not None and reply.completion_tokens > 0
    assert reply.first_token_ms is not None


def test_litellm_reply_cut_at_token_limit_keeps_length(litellm: LiteLLMPeer) -> None:
    """SPEC §7.1: `length` relayed by the proxy is returned as is (the run marks it)."""
    reply = ask(backend(litellm, "cut-off-upstream"))
    assert (reply.text, reply.finish_reason) == ("It was the best of", "length")


def test_litellm_slow_stream_drafts_as_it_goes_and_is_not_cut_off(litellm: LiteLLMPeer) -> None:
    """SPEC §7.1: the idle timeout is between chunks: a reply streaming for longer than it
    is never cut off, and drafts show it growing."""
    started = time.monotonic()
    drafts: list[float] = []
    reply = backend(litellm, "slow-upstream", idle_timeout=1.0).reply(
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


def test_litellm_stop_mid_stream_closes_request(litellm: LiteLLMPeer) -> None:
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
        backend(litellm, "slow-upstream").reply(
            make_turn("hi"), tools=Tools(55), cancel=cancel, draft=draft
        )
    assert drafts == ["piece0 ", "piece0 piece1 "]
    assert time.monotonic() - started < 3 * SLOW_CHUNK_DELAY + 2
    assert litellm.slow.hung_up.wait(5)


def test_litellm_stop_while_model_thinks_returns_at_once(litellm: LiteLLMPeer) -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        backend(litellm, "thinking").reply(
            make_turn("hi"), tools=Tools(55), cancel=cancel, draft=no_drafts
        )
    assert time.monotonic() - started < 1.5


def test_litellm_model_silent_past_idle_timeout_is_transient(litellm: LiteLLMPeer) -> None:
    failed = failure(backend(litellm, "thinking", idle_timeout=0.5))
    assert failed.transient
    assert failed.sentence == "The model server sent nothing for 0.5 s (idle timeout)."


def test_litellm_context_window_400_is_permanent(litellm: LiteLLMPeer) -> None:
    """SPEC §7.1: a prompt too long for the model fails at once, in a sentence."""
    failed = failure(backend(litellm, "context-too-long"))
    assert not failed.transient and failed.retry_after is None
    assert failed.sentence.startswith("The prompt is too long for the model: ")
    assert "context window exceeded" in failed.sentence
    assert len(failed.sentence) < 260


def test_litellm_internal_error_500_is_transient(litellm: LiteLLMPeer) -> None:
    failed = failure(backend(litellm, "down"))
    assert failed.transient
    assert failed.sentence.startswith("The model server failed (500): ")
    assert "mock internal server error" in failed.sentence


def test_litellm_rate_limit_429_is_transient_with_retry_after(litellm: LiteLLMPeer) -> None:
    """SPEC §7.1: 429 is transient; once LiteLLM cools the model down it answers with
    `Retry-After`, which the failure carries."""
    first = failure(backend(litellm, "busy"))
    assert first.transient
    assert first.sentence.startswith("The model server is busy (429).")
    cooled = failure(backend(litellm, "busy"))
    assert cooled.transient
    assert cooled.retry_after == COOLDOWN
    assert cooled.sentence.startswith(
        f"The model server is busy (429); it asked to wait {COOLDOWN} s."
    )


def test_litellm_unknown_model_is_permanent(litellm: LiteLLMPeer) -> None:
    failed = failure(backend(litellm, "no-such-model"))
    assert not failed.transient
    assert "no-such-model" in failed.sentence


def test_litellm_bad_key_is_permanent(litellm: LiteLLMPeer) -> None:
    """A key the proxy does not accept fails at once (LiteLLM without a key database answers
    400 rather than 401: either is permanent)."""
    wrong_key = backend(litellm, "mock-stream")
    wrong_key.api_key = "sk-wrong"
    failed = failure(wrong_key)
    assert not failed.transient
    assert failed.sentence.startswith("The model server refused the")


def test_litellm_stream_broken_mid_reply_is_transient(litellm: LiteLLMPeer) -> None:
    """An upstream whose stream turns malformed after the first chunk: the proxy reports the
    error inside its 200 stream, and the failure is transient, in a sentence."""
    drafts: list[str] = []
    with pytest.raises(ReplyFailed) as raised:
        ask(backend(litellm, "malformed-upstream"), drafts)
    failed = raised.value
    assert failed.transient
    assert failed.sentence.startswith("The model server reported an error mid-reply: ")
    assert drafts == ["Hel"]


# --- tools (SPEC §7.2) -----------------------------------------------------------------------


def test_litellm_relays_a_tool_call_and_its_result_and_the_answer(litellm: LiteLLMPeer) -> None:
    """SPEC §7.2: a model behind the proxy asks for a call; the proxy's stream of it is read,
    the call made, its result sent back through the proxy, and the model's words are the reply."""
    tools = Tools(55)
    reply = backend(litellm, "acting-upstream").reply(
        make_turn("book it"), tools=tools, cancel=threading.Event(), draft=no_drafts
    )
    assert reply.text == ACTING_REPLY
    assert tools.titles == ["relayed"]
    told = [m for m in litellm.acting.requests[-1]["messages"] if m["role"] == "tool"]
    assert [json.loads(m["content"])["task"] for m in told] == [42]
