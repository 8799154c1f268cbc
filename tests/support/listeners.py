"""Clients for the real ASGI applications of both listeners.

Requests go through the whole stack — the listener's ASGI guards, Django's middleware, DRF —
exactly as daphne would hand them over. Calls are synchronous: the application runs on an event
loop in another thread while Django's views run back on the test's own thread (asgiref's
thread-sensitive mode), so the test's database transaction is the one they see.
"""

from __future__ import annotations

import asyncio
import functools
import json as jsonlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

HUMAN = "human"
TESTER = "tester"


@contextmanager
def test_database_kept_open() -> Iterator[None]:
    """As Django's test client does: a finished request must not close the connection that
    holds the test's transaction."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def write_headers(origin: str, csrf_token: str | None = None) -> dict[str, str]:
    """What a listener's own page sends with a write: its Origin, Fetch Metadata, JSON, and the
    CSRF token when it has one (L2, L3)."""
    headers = {
        "Origin": origin,
        "Sec-Fetch-Site": "same-origin",
        "Content-Type": "application/json",
    }
    if csrf_token:
        headers["X-CSRFToken"] = csrf_token
    return headers


@functools.cache
def application(listener: str) -> Any:
    # The listeners themselves, not mosaic.asgi: importing it would run django.setup() again,
    # whose logging configuration drops the handlers pytest captures logs with. The request
    # path runs on the test's own thread, where its database transaction is.
    from human.listener import build_human_application
    from mosaic.edge.handler import CallingThread
    from mosaic.edge.listener import http_handler, plain_http_handler
    from tester.listener import build_tester_application

    if listener == HUMAN:
        return build_human_application(http_handler(CallingThread()))
    return build_tester_application(plain_http_handler(CallingThread()))


@dataclass
class ListenerClient:
    """A browser-like client of one listener: keeps cookies, sends the right write headers."""

    listener: str
    client_host: str = "127.0.0.1"
    cookies: httpx.Cookies = field(default_factory=httpx.Cookies)

    @property
    def port(self) -> int:
        return settings.MOSAIC_HUMAN_PORT if self.listener == HUMAN else settings.MOSAIC_TESTER_PORT

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_headers(self) -> dict[str, str]:
        """What this listener's own page would send with a write."""
        return write_headers(self.origin, self.cookies.get("csrftoken"))

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        write_headers: bool | None = None,
    ) -> httpx.Response:
        sent = {}
        if write_headers if write_headers is not None else method not in ("GET", "HEAD"):
            sent.update(self.write_headers())
        sent.update(headers or {})
        sent = {name: value for name, value in sent.items() if value is not None}
        if json is not None:
            content = jsonlib.dumps(json).encode()
        with test_database_kept_open():
            return async_to_sync(self._send)(method, path, content, sent)

    async def _send(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str]
    ) -> httpx.Response:
        transport = httpx.ASGITransport(
            app=application(self.listener), client=(self.client_host, 50000)
        )
        async with httpx.AsyncClient(
            transport=transport, base_url=self.origin, cookies=self.cookies
        ) as client:
            response = await client.request(method, path, content=content, headers=headers)
            self.cookies.update(client.cookies)
            return response

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, json: Any = None, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, json=json, **kwargs)

    def sign_in(self, username: str, password: str) -> httpx.Response:
        response = self.post("/api/auth/login", {"username": username, "password": password})
        assert response.status_code == 200, response.text
        return response


@dataclass
class RawAnswer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    def json(self) -> Any:
        return jsonlib.loads(self.body)


def http_scope(
    listener: str,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    client: tuple[str, int] = ("127.0.0.1", 50000),
) -> dict[str, Any]:
    """An HTTP scope as daphne builds it, header names and duplicates exactly as given."""
    port = settings.MOSAIC_HUMAN_PORT if listener == HUMAN else settings.MOSAIC_TESTER_PORT
    if body and not any(name.lower() == b"content-length" for name, _ in headers):
        headers = [*headers, (b"content-length", str(len(body)).encode())]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": client,
        "server": ("127.0.0.1", port),
    }


async def call(app: Any, scope: dict[str, Any], body: bytes = b"") -> RawAnswer:
    """One request through an ASGI application, on the running loop."""
    # Not asgiref's ApplicationCommunicator: it runs the application in an empty context,
    # which would send Django's views to another thread, off the test's transaction.
    sent: list[dict[str, Any]] = []
    inputs = [{"type": "http.request", "body": body, "more_body": False}]
    finished = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if inputs:
            return inputs.pop(0)
        # The client stays connected until the answer is complete.
        await finished.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            finished.set()

    await app(scope, receive, send)
    start = sent[0]
    answer = b"".join(m.get("body", b"") for m in sent[1:])
    return RawAnswer(start["status"], start["headers"], answer)


def raw_request(
    listener: str,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    client: tuple[str, int] = ("127.0.0.1", 50000),
) -> RawAnswer:
    """One request as a raw ASGI scope: header names and duplicates exactly as given, which
    HTTP clients (and Django's test client) would normalise away."""
    scope = http_scope(listener, method, path, headers, body, client)
    with test_database_kept_open():
        return async_to_sync(call)(application(listener), scope, body)
