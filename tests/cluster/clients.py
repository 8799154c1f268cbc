"""Clients of the cluster's listeners: the chat API over HTTP, and a trail follower that
reconnects after its last id as the Console does."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.cluster.websocket import connect
from tests.support.listeners import write_headers


class Api:
    """One listener's chat API, sent as its own page sends it (Origin, Fetch Metadata, CSRF)."""

    def __init__(self, base_url: str, cookies: httpx.Cookies | None = None) -> None:
        self.base_url = base_url
        self.client = httpx.AsyncClient(base_url=base_url, timeout=10, cookies=cookies)

    async def aclose(self) -> None:
        await self.client.aclose()

    def headers(self) -> dict[str, str]:
        return write_headers(self.base_url, self.client.cookies.get("csrftoken"))

    async def get(self, path: str) -> httpx.Response:
        return await self.client.get(path)

    async def post(self, path: str, body: dict[str, Any], *, key: str = "") -> httpx.Response:
        headers = self.headers()
        if key:
            headers["Idempotency-Key"] = key
        return await self.client.post(path, content=json.dumps(body), headers=headers)

    async def ok(self, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = await (self.get(path) if body is None else self.post(path, body))
        assert answer.status_code in (200, 201), (path, answer.status_code, answer.text)
        return answer.json()

    async def sign_in(self, username: str, password: str) -> None:
        await self.ok("/api/auth/login", {"username": username, "password": password})

    async def thread(self, project: int, name: str) -> int:
        answer = await self.ok("/api/chat/threads", {"project": project, "name": name})
        return int(answer["thread"]["id"])

    async def send(self, thread: int, body: str, *, patience: float = 30.0) -> tuple[int, int]:
        """Send a turn, retrying while the service answers 503 with one Idempotency-Key, as the
        Console does; returns the message id and how many 503 answers came first."""
        key = uuid.uuid4().hex
        refused = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        while True:
            try:
                answer = await self.post(
                    f"/api/chat/threads/{thread}/messages", {"body": body}, key=key
                )
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 201:
                return int(answer.json()["message"]["id"]), refused
            assert answer is None or answer.status_code == 503, answer.text
            refused += 1
            assert loop.time() < deadline, f"no 201 for {body!r} within {patience}s"
            await asyncio.sleep(0.1)

    async def all_rows(self, path: str, key: str) -> list[dict[str, Any]]:
        """Every row of a list route, paging with `after`."""
        rows: list[dict[str, Any]] = []
        while True:
            after = rows[-1]["id"] if rows else 0
            separator = "&" if "?" in path else "?"
            page = (await self.ok(f"{path}{separator}after={after}&limit=500"))[key]
            rows += page
            if len(page) < 500:
                return rows


@dataclass
class Follower:
    """A live trail on one human listener, reconnecting after its last id with a short
    back-off (the Console's connection.js: 0.5 s doubling; shorter here to keep the test quick)."""

    ws_url: str
    origin: str
    cookies: dict[str, str]
    after: int = 0
    received: list[int] = field(default_factory=list)
    texts: dict[int, str] = field(default_factory=dict)
    connects: int = 0
    closes: list[int | None] = field(default_factory=list)
    refusals: int = 0
    live: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def last(self) -> int:
        return self.received[-1] if self.received else self.after

    def start(self) -> None:
        self.task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def run(self) -> None:
        backoff = 0.1
        while True:
            try:
                socket = await connect(
                    f"{self.ws_url}/ws/trail/?after={self.last}",
                    origin=self.origin,
                    cookies=self.cookies,
                )
            except (OSError, Exception):
                self.refusals += 1
                await asyncio.sleep(backoff)
                backoff = min(2.0, backoff * 2)
                continue
            self.connects += 1
            self.live.set()
            backoff = 0.1
            try:
                while (text := await socket.receive()) is not None:
                    frame = json.loads(text)
                    if frame.get("type") == "trail.row":
                        row = frame["row"]
                        self.received.append(int(row["id"]))
                        self.texts[int(row["id"])] = row["text"]
            finally:
                await socket.close()
            self.live.clear()
            self.closes.append(socket.close_code)
            await asyncio.sleep(backoff)

    async def wait_for(self, ids: set[int], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not ids <= set(self.received):
            missing = sorted(ids - set(self.received))[:10]
            assert loop.time() < deadline, (
                f"{self.ws_url}: rows {missing}… not received; live={self.live.is_set()} "
                f"connects={self.connects} closes={self.closes} last={self.last}"
            )
            await asyncio.sleep(0.05)
