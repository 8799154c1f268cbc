"""Streamed runs end to end against the LiteLLM proxy (SPEC §7.1): a real `manage.py serve`
whose runner asks the proxy for `slow-upstream` (a reply of twelve pieces, a quarter second
apart, relayed by LiteLLM), spoken to over HTTP and WebSockets from both listeners.

LiteLLM that cannot start fails these tests; nothing here is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from tests.console.server import LiveServer
from tests.support.end_to_end import (
    Frame,
    Side,
    assert_stopped_without_reply,
    assert_streamed_then_landed,
    drafts,
    drafts_of,
    read_quiet,
    read_until,
    reply_to,
    result_of,
    serve_with_model,
    sockets,
    stop_mid_stream,
    turns_named,
)
from tests.support.model_servers import SLOW_PIECES, LiteLLMPeer

MODEL = "slow-upstream"
REPLY = "".join(SLOW_PIECES)


def replied_on(*threads: int) -> Callable[[list[Frame]], bool]:
    """Done when the trail shows the assistant's row in each of `threads`."""

    def done(frames: list[Frame]) -> bool:
        rows = [frame["row"] for frame in frames if frame["type"] == "trail.row"]
        return set(threads) <= {row["thread"] for row in rows if row["from_role"] == "assistant"}

    return done


@pytest.fixture(scope="module")
def server(litellm: LiteLLMPeer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    environment = {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": litellm.proxy.url,
        "MOSAIC_ASSISTANT_MODEL": MODEL,
        "MOSAIC_ASSISTANT_API_KEY": litellm.proxy.key,
        "MOSAIC_ASSISTANT_CONNECT_TIMEOUT": "5",
        "MOSAIC_ASSISTANT_IDLE_TIMEOUT": "10",
    }
    with serve_with_model(tmp_path_factory.mktemp("end_to_end_litellm"), environment) as served:
        yield served


@pytest.fixture
def sides(server: LiveServer) -> Iterator[tuple[Side, Side]]:
    human, tester = Side.human(server), Side.tester(server)
    yield human, tester
    human.close()
    tester.close()


def test_serve_drafts_reach_owner_socket_only_then_reply_lands_with_usage(
    sides: tuple[Side, Side],
) -> None:
    """SPEC §7.1: a human turn and a tester turn answered at once: each owner's thread socket
    gets its reply's drafts before the RESULT, and nothing of the other side's turn; neither
    trail gets a draft; the record keeps the model, finish_reason and usage LiteLLM reported."""
    human, tester = sides
    project = human.api.create_project("drafts")
    human_thread = human.api.create_thread(project, "human's")
    tester_thread = tester.api.create_thread(project, "tester's")

    async def scenario() -> dict[str, list[Frame]]:
        async with sockets(
            human.socket(f"/ws/chat/threads/{human_thread}/"),
            tester.socket(f"/ws/chat/threads/{tester_thread}/"),
            human.socket("/ws/trail/"),
            tester.socket("/ws/trail/"),
        ) as (human_chat, tester_chat, human_trail, tester_trail):
            turns["human"] = human.api.send(human_thread, "Hello from the human")
            turns["tester"] = tester.api.send(tester_thread, "Hello from the tester")
            seen = {
                "human": await read_until(human_chat, result_of(turns["human"]), "human's reply"),
                "tester": await read_until(
                    tester_chat, result_of(turns["tester"]), "tester's reply"
                ),
                "human trail": await read_until(
                    human_trail, replied_on(human_thread, tester_thread), "both replies' rows"
                ),
                "tester trail": await read_until(
                    tester_trail, replied_on(tester_thread), "the tester's reply's row"
                ),
            }
            for name, socket in (
                ("human", human_chat),
                ("tester", tester_chat),
                ("human trail", human_trail),
                ("tester trail", tester_trail),
            ):
                seen[name] += await read_quiet(socket)
            return seen

    turns: dict[str, int] = {}
    seen = asyncio.run(scenario())
    for side, thread in (("human", human_thread), ("tester", tester_thread)):
        owner = human if side == "human" else tester
        reply = assert_streamed_then_landed(seen[side], turns[side])
        assert reply["body"] == REPLY
        assert turns_named(seen[side]) == {turns[side], reply["id"]}
        stored = reply_to(owner.messages(thread), turns[side])
        assert stored is not None
        assert (stored["model"], stored["finish_reason"]) == (MODEL, "stop")
        assert stored["usage"]["prompt_tokens"] > 0
        assert stored["usage"]["completion_tokens"] > 0
    for trail in ("human trail", "tester trail"):
        assert {frame["type"] for frame in seen[trail]} == {"trail.row"}, seen[trail]
    assert {frame["row"]["thread"] for frame in seen["tester trail"]} == {tester_thread}


def test_serve_socket_joining_mid_reply_gets_draft_so_far_first(
    sides: tuple[Side, Side],
) -> None:
    """SPEC §7.1: a socket that connects while the reply streams gets the draft so far at
    once, then the rest of it, then the RESULT."""
    _, tester = sides
    project = tester.api.create_project("joining")
    thread = tester.api.create_thread(project, "joined late")

    async def scenario() -> tuple[list[Frame], list[Frame]]:
        async with sockets(tester.socket(f"/ws/chat/threads/{thread}/")) as (first,):
            turn = tester.api.send(thread, "Hello")
            early = await read_until(first, drafts_of(turn, 2), "two drafts")
            async with sockets(tester.socket(f"/ws/chat/threads/{thread}/?after={turn}")) as (
                late,
            ):
                joined = await read_until(late, result_of(turn), "the reply")
        return early, joined

    early, joined = asyncio.run(scenario())
    turn = early[0]["message"]["id"]
    assert joined[0]["type"] == "reply.state" and joined[0]["state"] == "working"
    assert joined[1]["type"] == "reply.draft"
    first_draft = drafts(joined, turn)[0]
    assert len(first_draft) >= len(drafts(early, turn)[1])
    assert assert_streamed_then_landed(joined, turn)["body"] == REPLY


def test_serve_stop_mid_stream_leaves_turn_stopped_without_reply(
    sides: tuple[Side, Side], litellm: LiteLLMPeer
) -> None:
    """SPEC §7.1, R13: the human stops a thread while its reply streams: the turn is
    `stopped`, no reply ever lands, the request to the model is closed (LiteLLM in turn hangs
    up on the model behind it), and the next turn is answered."""
    human, _ = sides
    project = human.api.create_project("stopping")
    thread = human.api.create_thread(project, "stopped mid-stream")
    litellm.slow.hung_up.clear()
    stopped = asyncio.run(
        stop_mid_stream(human, thread, body="Tell me everything", later_body="Then briefly")
    )
    assert_stopped_without_reply(stopped, thread)
    assert litellm.slow.hung_up.wait(10)
