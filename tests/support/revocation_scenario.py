"""A sign-in ended while a reply streams to its socket, over a real server.

The human's thread socket shows a reply being written; the model holds its stream after the
first words. The sign-in is ended (`revoke`), and only once that call has returned — the
revocation committed — is the model let go: it then sends the rest of the reply, with
`MARKER`. So a frame written after the revocation is one that carries the marker, by
construction, whatever the machine's speed. The outcome says what the socket received before
and after, and how long after the revocation returned its close came.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tests.cluster.clients import Api
from tests.cluster.websocket import connect

MARKER = "[written after the sign-in ended]"
# The model's stream: the role, the first words, then (held until released) the marker.
PIECES = ["first words ", MARKER]
HOLD_AFTER = 2
# Generous: the runner takes the turn and the model starts streaming.
START_SECONDS = 60.0


@dataclass
class Outcome:
    # The frames up to the first draft; those after it (the model holds meanwhile, so every
    # one of them would come from the revocation's time or later); the close's code, and how
    # long after the revocation returned it came (0 when it came first).
    before: list[dict[str, Any]]
    after: list[dict[str, Any]]
    close_code: int | None
    seconds_to_close: float

    def assert_closed_at_once(self, code: int, context: str = "") -> None:
        """The socket had the reply's first draft, then closed `code` within 1 s of the
        revocation's return with no frame after — the marker's above all."""
        assert [frame["type"] for frame in self.before][-1] == "reply.draft"
        assert self.after == [], f"frames after the revocation: {self.after}"
        assert MARKER not in str(self.after)
        assert self.close_code == code, context
        assert self.seconds_to_close < 1.0


async def thread_of(api: Api, name: str) -> int:
    project = await api.ok("/api/chat/projects", {"name": name})
    return await api.thread(int(project["project"]["id"]), name)


async def revoke_mid_reply(
    *,
    api: Api,
    socket_base: str,
    name: str,
    holding: threading.Event,
    release: threading.Event,
    revoke: Callable[[], Awaitable[None]],
    body: str = "tell me something",
) -> Outcome:
    """Open the thread `name`'s socket on the listener at `socket_base` with `api`'s session,
    send a turn, wait for its first draft while the model holds, `revoke`, release the model,
    and read until the socket closes."""
    thread = await thread_of(api, name)
    ws_url = socket_base.replace("http://", "ws://") + f"/ws/chat/threads/{thread}/"
    socket = await connect(ws_url, origin=socket_base, cookies=dict(api.client.cookies))
    before: list[dict[str, Any]] = []
    try:
        await api.send(thread, body)

        async def until_first_draft() -> None:
            while (text := await socket.receive()) is not None:
                before.append(json.loads(text))
                if before[-1]["type"] == "reply.draft":
                    return
            raise AssertionError(f"closed ({socket.close_code}) before a draft: {before}")

        await asyncio.wait_for(until_first_draft(), START_SECONDS)
        assert holding.is_set(), "the model streams the marker only once released"
        # Read on while the revocation runs: the close may come before the call returns (it
        # is sent on commit), and a client that does not answer it is cut off.
        after: list[dict[str, Any]] = []

        async def until_closed() -> float:
            while (text := await socket.receive()) is not None:
                after.append(json.loads(text))
            return time.monotonic()

        reader = asyncio.create_task(until_closed())
        await revoke()
        revoked_at = time.monotonic()
        release.set()
        try:
            # Twice the bound the tests assert: a late close is measured rather than cut off.
            closed_at = await asyncio.wait_for(reader, 2.0)
        except TimeoutError:
            return Outcome(before, after, None, float("inf"))
        return Outcome(before, after, socket.close_code, max(0.0, closed_at - revoked_at))
    finally:
        await socket.close()


def revoked_while_streaming(
    *,
    sign_in_url: str,
    socket_base: str,
    username: str,
    password: str,
    name: str,
    holding: threading.Event,
    release: threading.Event,
    revoke: Callable[[Api], Awaitable[None]],
    restore: Callable[[], None],
    body: str = "tell me something",
) -> Outcome:
    """Sign in on `sign_in_url` and run `revoke_mid_reply`; then let the model go and
    `restore` the user, so the next case can sign in as at the start."""
    holding.clear()
    release.clear()

    async def scenario() -> Outcome:
        api = Api(sign_in_url)
        try:
            await api.sign_in(username, password)
            return await revoke_mid_reply(
                api=api,
                socket_base=socket_base,
                name=name,
                holding=holding,
                release=release,
                revoke=lambda: revoke(api),
                body=body,
            )
        finally:
            await api.aclose()

    try:
        return asyncio.run(scenario())
    finally:
        release.set()
        restore()
