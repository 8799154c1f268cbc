"""End to end through the product's own surfaces: a real `manage.py serve` (the browser tests'
`LiveServer`) whose runner asks a real model server, driven over HTTP and WebSockets as the
Console drives it (SPEC §6, §7.1).

The cases here are shared by the runs against the LiteLLM proxy (the suite) and against a real
model (`make model-check`); each returns what it saw, and asserts what holds for any model.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Origin

from tests.console.api import LiveApi
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving

# Generous: a wait ends as soon as what it waits for arrives.
WAIT_SECONDS = 120.0
# A socket counts as quiet when no frame came for this long.
QUIET_SECONDS = 0.5

Frame = dict[str, Any]


@contextmanager
def serve_with_model(
    workdir: Path, model_environment: dict[str, str], *, business_file: str | None = None
) -> Iterator[LiveServer]:
    """`manage.py serve` (see `serving`) whose runner's reply backend is set by
    `model_environment`, with the demo business reloaded from `business_file` when given."""
    with serving(
        workdir,
        f"mosaic_end_to_end_{os.getpid()}",
        settings=model_environment,
        business_file=business_file,
    ) as server:
        yield server


class Side:
    """One side of the bus as its Console speaks to it: the chat API and the sockets."""

    def __init__(self, base_url: str, *, username: str | None = None) -> None:
        self.api = LiveApi(base_url)
        if username is not None:
            self.api.sign_in(username, PASSWORD)

    @classmethod
    def human(cls, server: LiveServer) -> Side:
        return cls(server.human_url, username=HUMAN_USERNAME)

    @classmethod
    def tester(cls, server: LiveServer) -> Side:
        return cls(server.tester_url)

    def close(self) -> None:
        self.api.close()

    def socket(self, path: str) -> connect:
        """A WebSocket of this listener, opened as its own page opens it (Origin, cookies)."""
        base = self.api.base_url
        cookies = "; ".join(f"{name}={value}" for name, value in self.api.client.cookies.items())
        return connect(
            "ws://" + base.removeprefix("http://") + path,
            origin=Origin(base),
            additional_headers={"Cookie": cookies} if cookies else None,
            proxy=None,
            open_timeout=WAIT_SECONDS,
        )

    def create_thread(self, project: int, name: str, *, instance: str | None = None) -> int:
        body: dict[str, Any] = {"project": project, "name": name}
        if instance is not None:
            body["instance"] = instance
        return int(self.api.post("/api/chat/threads", body)["thread"]["id"])

    def messages(self, thread: int) -> list[dict[str, Any]]:
        """The thread's record, as the API shows it."""
        return list(self.api.get(f"/api/chat/threads/{thread}/messages")["messages"])

    def stop(self, thread: int) -> dict[str, Any]:
        return dict(self.api.post("/api/chat/stop", {"thread": thread}))


@asynccontextmanager
async def sockets(*opened: connect) -> AsyncIterator[list[ClientConnection]]:
    connections = [await each for each in opened]
    try:
        yield connections
    finally:
        for connection in connections:
            await connection.close()


async def read_until(
    socket: ClientConnection, done: Callable[[list[Frame]], bool], what: str
) -> list[Frame]:
    """Frames from `socket` until `done(frames)`; fails, saying `what` it waited for, when that
    takes longer than WAIT_SECONDS."""
    frames: list[Frame] = []
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            while not done(frames):
                frames.append(json.loads(await socket.recv()))
    except TimeoutError:
        raise AssertionError(
            f"no {what} within {WAIT_SECONDS:g} s; {len(frames)} frames, the last {frames[-3:]}"
        ) from None
    return frames


async def read_quiet(socket: ClientConnection) -> list[Frame]:
    """Frames from `socket` until none came for QUIET_SECONDS."""
    frames: list[Frame] = []
    while True:
        try:
            async with asyncio.timeout(QUIET_SECONDS):
                frames.append(json.loads(await socket.recv()))
        except TimeoutError:
            return frames


def result_of(turn: int) -> Callable[[list[Frame]], bool]:
    """Done when the RESULT in reply to `turn` has come."""
    return lambda frames: any(reply_frame(frame, turn) for frame in frames)


def settled(turn: int) -> Callable[[list[Frame]], bool]:
    """Done when `turn` got its RESULT or failed."""
    return lambda frames: result_of(turn)(frames) or state_of(turn, "failed")(frames)


def state_of(turn: int, state: str) -> Callable[[list[Frame]], bool]:
    return lambda frames: any(
        frame["type"] == "reply.state" and frame["in_reply_to"] == turn and frame["state"] == state
        for frame in frames
    )


def drafts_of(turn: int, count: int = 1) -> Callable[[list[Frame]], bool]:
    return lambda frames: len(drafts(frames, turn)) >= count


def reply_frame(frame: Frame, turn: int) -> bool:
    return (
        frame["type"] == "message"
        and frame["message"]["class"] == "RESULT"
        and frame["message"]["in_reply_to"] == turn
    )


def drafts(frames: list[Frame], turn: int) -> list[str]:
    return [f["text"] for f in frames if f["type"] == "reply.draft" and f["in_reply_to"] == turn]


def turns_named(frames: list[Frame]) -> set[int]:
    """Every turn a thread socket's frames speak of: a message's own id and the one it
    answers, a state's or a draft's turn."""
    named: set[int] = set()
    for frame in frames:
        if frame["type"] == "message":
            named.add(frame["message"]["id"])
            if frame["message"]["in_reply_to"] is not None:
                named.add(frame["message"]["in_reply_to"])
        else:
            named.add(frame["in_reply_to"])
    return named


def reply_to(messages: list[dict[str, Any]], turn: int) -> dict[str, Any] | None:
    replies = [m for m in messages if m["class"] == "RESULT" and m["in_reply_to"] == turn]
    assert len(replies) <= 1, replies  # exactly one reply per turn (SPEC §7)
    return replies[0] if replies else None


def turn_record(messages: list[dict[str, Any]], turn: int) -> dict[str, Any]:
    return next(m for m in messages if m["id"] == turn)


def assert_streamed_then_landed(frames: list[Frame], turn: int) -> dict[str, Any]:
    """The owner's socket showed the reply growing before the RESULT came, each draft the
    whole text so far; the RESULT's message shape."""
    at = next(index for index, frame in enumerate(frames) if reply_frame(frame, turn))
    reply = frames[at]["message"]
    before, after = frames[:at], frames[at + 1 :]
    texts = drafts(before, turn)
    assert texts, f"no draft before the reply: {frames}"
    assert not drafts(after, turn), after
    assert all(len(a) <= len(b) for a, b in itertools.pairwise(texts)), texts
    assert all(reply["body"].startswith(text) for text in texts), (texts, reply)
    assert state_of(turn, "working")(before)
    return dict(reply)


@dataclass
class Stopped:
    """What a stop mid-stream left: the frames of the owner's socket, the stop's answer, and
    the record afterwards, once a later turn was answered."""

    frames: list[Frame]
    answer: dict[str, Any]
    messages: list[dict[str, Any]]
    turn: int
    later: int


async def stop_mid_stream(side: Side, thread: int, *, body: str, later_body: str) -> Stopped:
    """Send `body`, stop the thread once its reply is streaming, then send `later_body` and
    wait for its reply: a stopped turn never blocks the turns after it (SPEC §7.1)."""
    async with sockets(side.socket(f"/ws/chat/threads/{thread}/")) as (chat,):
        turn = side.api.send(thread, body)
        frames = await read_until(chat, drafts_of(turn), "draft of the turn to stop")
        answer = side.stop(thread)
        frames += await read_until(chat, state_of(turn, "stopped"), "stopped state")
        later = side.api.send(thread, later_body)
        frames += await read_until(chat, result_of(later), "reply to the later turn")
    return Stopped(frames, answer, side.messages(thread), turn, later)


def assert_stopped_without_reply(stopped: Stopped, thread: int) -> None:
    """The stop named the thread; the stopped turn has no reply and shows `stopped`, and no
    draft of it came after the stop's state; the later turn was answered."""
    assert [entry["thread"] for entry in stopped.answer["stopped"]] == [thread], stopped.answer
    assert reply_to(stopped.messages, stopped.turn) is None
    assert turn_record(stopped.messages, stopped.turn)["reply_state"] == "stopped"
    assert reply_to(stopped.messages, stopped.later) is not None
    assert turn_record(stopped.messages, stopped.later)["reply_state"] == "answered"
    at = next(
        index
        for index, frame in enumerate(stopped.frames)
        if state_of(stopped.turn, "stopped")([frame])
    )
    assert not drafts(stopped.frames[at:], stopped.turn), stopped.frames[at:]
    assert not any(reply_frame(frame, stopped.turn) for frame in stopped.frames)
