"""The ASGI guards of `mosaic/listeners.py` at the byte level: the refusal answer (L1, L8),
the WebSocket close (L1, L7), the loopback redirect (L8) and the choice of listener by port."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings

from chat.errors import close_code
from mosaic.listeners import by_port
from tests.listeners import HUMAN, TESTER, application, raw_request


def websocket_answer(listener: str, path: str, headers: list[tuple[bytes, bytes]]) -> list[Any]:
    """What a listener sends to a WebSocket handshake before the client says anything more."""
    port = settings.MOSAIC_HUMAN_PORT if listener == HUMAN else settings.MOSAIC_TESTER_PORT
    scope = {
        "type": "websocket",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", port),
        "subprotocols": [],
    }
    sent: list[Any] = []
    inputs = [{"type": "websocket.connect"}]

    async def receive() -> dict[str, Any]:
        return inputs.pop(0) if inputs else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> None:
        await application(listener)(scope, receive, send)

    async_to_sync(run)()
    return sent


def test_refuse_tester_header_answers_json_with_its_length(business) -> None:
    """L1: the refusal before routing is the contract's JSON body, typed and sized."""
    answer = raw_request(
        HUMAN,
        "GET",
        "/api/chat/projects",
        [(b"host", b"127.0.0.1:7332"), (b"x-mosaic-tester", b"")],
    )
    assert answer.status == 403
    assert answer.headers == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(answer.body)).encode()),
    ]
    assert answer.json()["error"] == "tester-listener-required"
    assert json.loads(answer.body)["detail"]


@pytest.mark.parametrize(
    ("listener", "path", "headers", "code"),
    [
        (
            HUMAN,
            "/ws/trail/",
            [(b"host", b"127.0.0.1:7332"), (b"x-mosaic-tester", b"1")],
            "tester-listener-required",
        ),
        (
            TESTER,
            "/ws/trail/",
            [(b"host", b"127.0.0.1:7333"), (b"origin", b"http://localhost:7333")],
            "origin-refused",
        ),
        (
            TESTER,
            "/ws/nothing/",
            [(b"host", b"127.0.0.1:7333"), (b"origin", b"http://127.0.0.1:7333")],
            "not-found",
        ),
    ],
    ids=["l1-tester-header", "l7-origin", "unknown-socket"],
)
def test_websocket_refusal_closes_with_code_and_reason(
    business, listener: str, path: str, headers: list[tuple[bytes, bytes]], code: str
) -> None:
    """L1, L7: a refused WebSocket is closed before it is accepted, its reason the code."""
    assert websocket_answer(listener, path, headers) == [
        {"type": "websocket.close", "code": close_code(code), "reason": code}
    ]


def test_tester_listener_redirects_localhost_page_to_loopback_address(business) -> None:
    """L8: a page request for `localhost:PORT` goes to the same path on `127.0.0.1:PORT`."""
    answer = raw_request(TESTER, "GET", "/some/page", [(b"host", b"localhost:7333")])
    assert answer.status == 302
    assert answer.headers == [
        (b"location", b"http://127.0.0.1:7333/some/page"),
        (b"content-length", b"0"),
    ]
    assert answer.body == b""


class Recorder:
    """An ASGI application that only records what it was called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls.append((scope, receive, send))


@pytest.mark.parametrize(
    ("server", "chosen"),
    [
        (("127.0.0.1", 7333), TESTER),
        (("127.0.0.1", 7332), HUMAN),
        (("127.0.0.1", 8000), HUMAN),
        (None, HUMAN),
    ],
    ids=["tester-port", "human-port", "other-port", "no-server"],
)
def test_by_port_sends_tester_port_to_tester_listener_only(server, chosen: str) -> None:
    """One process, both listeners: the server socket's port alone picks the tester listener;
    anything else is the human listener, which needs a signed-in human for everything."""
    human, tester = Recorder(), Recorder()
    scope: dict[str, Any] = {"type": "http"}
    if server is not None:
        scope["server"] = server

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        return None

    async_to_sync(by_port(human=human, tester=tester))(scope, receive, send)
    picked, other = (tester, human) if chosen == TESTER else (human, tester)
    assert picked.calls == [(scope, receive, send)]
    assert other.calls == []
