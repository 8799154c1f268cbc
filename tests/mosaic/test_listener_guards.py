"""The ASGI guards of `mosaic/edge/listener.py` at the byte level: the refusal answer (L1, L8),
the WebSocket close (L1, L7), the loopback redirect (L8) and the choice of listener by port."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings

from broker import events
from chat.errors import close_code
from mosaic.edge.listener import capped_body, delivering_pushes
from mosaic.edge.ports import by_port
from tester import listener as tester_listener
from tests.support.listeners import HUMAN, TESTER, application, raw_request


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
    assert answer.headers[:2] == [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(answer.body)).encode()),
    ]
    assert [name for name, _ in answer.headers[2:]] == [b"x-request-id"]
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
    assert answer.headers[:2] == [
        (b"location", b"http://127.0.0.1:7333/some/page"),
        (b"content-length", b"0"),
    ]
    assert [name for name, _ in answer.headers[2:]] == [b"x-request-id"]
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
        (("127.0.0.1", 7334), "ops"),
        (("127.0.0.1", 7332), HUMAN),
        (("127.0.0.1", 8000), HUMAN),
        (None, HUMAN),
    ],
    ids=["tester-port", "ops-port", "human-port", "other-port", "no-server"],
)
def test_by_port_sends_tester_port_to_tester_listener_only(settings, server, chosen: str) -> None:
    """One process, every listener: the server socket's port alone picks the tester or the ops
    listener; anything else is the human listener, which needs a signed-in human for
    everything."""
    settings.MOSAIC_OPS_PORT = 7334
    listeners_by_name = {HUMAN: Recorder(), TESTER: Recorder(), "ops": Recorder()}
    scope: dict[str, Any] = {"type": "http"}
    if server is not None:
        scope["server"] = server

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        return None

    async_to_sync(by_port(**listeners_by_name))(scope, receive, send)
    for name, recorder in listeners_by_name.items():
        assert recorder.calls == ([(scope, receive, send)] if name == chosen else [])


def run_guard(guard: Any, scope: dict[str, Any], inputs: list[dict[str, Any]]) -> list[Any]:
    """Run an ASGI guard over `inputs`; what it sent back."""
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return inputs.pop(0) if inputs else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    async_to_sync(guard)(scope, receive, send)
    return sent


class Reader:
    """An ASGI application that reads the whole request body, as Django does."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            self.messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                return


def chunk(size: int, *, more: bool) -> dict[str, Any]:
    return {"type": "http.request", "body": b"x" * size, "more_body": more}


HTTP_SCOPE = {"type": "http", "method": "POST", "path": "/api/chat/projects"}


@pytest.mark.parametrize(
    ("guard", "scope_type"),
    [
        (tester_listener.tester_host_only, "lifespan"),
        (capped_body, "lifespan"),
        (capped_body, "websocket"),
    ],
    ids=["l8-lifespan", "body-cap-lifespan", "body-cap-websocket"],
)
def test_guard_passes_scopes_it_does_not_guard_through_unchanged(guard, scope_type: str) -> None:
    """L8 guards HTTP and WebSockets, the body cap HTTP only: anything else goes to the
    application as it came, with the server's own receive and send."""
    inner = Recorder()
    scope = {"type": scope_type}

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        return None

    async_to_sync(guard(inner))(scope, receive, send)
    assert inner.calls == [(scope, receive, send)]


def test_tester_listener_websocket_from_a_remote_client_is_refused(settings) -> None:
    """L8: a WebSocket to the tester listener from a non-loopback address closes, host-refused,
    even with the right Host and Origin."""
    inner = Recorder()
    port = settings.MOSAIC_TESTER_PORT
    scope = {
        "type": "websocket",
        "path": "/ws/trail/",
        "headers": [
            (b"host", f"127.0.0.1:{port}".encode()),
            (b"origin", f"http://127.0.0.1:{port}".encode()),
        ],
        "client": ("203.0.113.9", 50000),
    }
    sent = run_guard(
        tester_listener.tester_host_only(inner), scope, [{"type": "websocket.connect"}]
    )
    assert sent == [
        {"type": "websocket.close", "code": close_code("host-refused"), "reason": "host-refused"}
    ]
    assert inner.calls == []


def test_tester_listener_request_from_a_remote_client_is_refused_with_a_sentence(
    settings,
) -> None:
    """L8: an HTTP request to the tester listener from a non-loopback address is refused
    `host-refused`, with a sentence, before the application sees it."""
    inner = Recorder()
    port = settings.MOSAIC_TESTER_PORT
    scope = {
        **HTTP_SCOPE,
        "headers": [(b"host", f"127.0.0.1:{port}".encode())],
        "client": ("203.0.113.9", 50000),
    }
    sent = run_guard(tester_listener.tester_host_only(inner), scope, [chunk(0, more=False)])
    assert sent[0]["status"] == 400
    answer = json.loads(sent[1]["body"])
    assert answer["error"] == "host-refused"
    assert isinstance(answer["detail"], str) and answer["detail"].strip()
    assert inner.calls == []


def test_tester_listener_request_for_another_host_is_refused_with_a_sentence(business) -> None:
    """L8 (DNS rebinding): another Host is refused, and the refusal says which address to use."""
    answer = raw_request(TESTER, "GET", "/api/chat/projects", [(b"host", b"evil.example:7333")])
    assert (answer.status, answer.json()["error"]) == (400, "host-refused")
    assert isinstance(answer.json()["detail"], str)
    assert answer.json()["detail"].strip()


@pytest.mark.parametrize("length", [b"101", b"Content-Length", b" 101 ", b"-1", b"1e3"], ids=str)
def test_capped_body_refuses_a_declared_length_over_the_cap_or_unreadable(
    settings, length: bytes
) -> None:
    """`too-large`: a Content-Length over the cap, or not a plain number, is refused before the
    application reads a byte, whatever the small body that follows."""
    settings.MOSAIC_REQUEST_MAX_BYTES = 100
    inner = Reader()
    scope = {**HTTP_SCOPE, "headers": [(b"Content-Length", length)]}
    sent = run_guard(capped_body(inner), scope, [chunk(1, more=False)])
    assert sent[0]["status"] == 413
    answer = json.loads(sent[1]["body"])
    assert answer["error"] == "too-large"
    assert isinstance(answer["detail"], str) and answer["detail"].strip()
    assert inner.messages == []


def test_capped_body_passes_a_body_of_exactly_the_cap_on_unchanged(settings) -> None:
    """`too-large` is over the cap, not at it; the application reads the body as it came."""
    settings.MOSAIC_REQUEST_MAX_BYTES = 100
    inner = Reader()
    scope = {**HTTP_SCOPE, "headers": [(b"content-length", b"100")]}
    body = [chunk(60, more=True), chunk(40, more=False)]
    sent = run_guard(capped_body(inner), scope, list(body))
    assert sent == []
    assert inner.messages == body


def test_capped_body_refuses_a_streamed_body_over_the_cap(settings) -> None:
    """`too-large`: a body with no declared length is counted as it streams in."""
    settings.MOSAIC_REQUEST_MAX_BYTES = 100
    inner = Reader()
    sent = run_guard(capped_body(inner), {**HTTP_SCOPE, "headers": []}, [chunk(60, more=True)] * 2)
    assert sent[0]["status"] == 413
    answer = json.loads(sent[1]["body"])
    assert answer["error"] == "too-large"
    assert isinstance(answer["detail"], str) and answer["detail"].strip()
    assert inner.messages == []


def test_capped_body_passes_a_disconnect_before_the_body_to_the_application(settings) -> None:
    """A client gone before its body is the application's to see, not a silent drop."""
    inner = Reader()
    sent = run_guard(
        capped_body(inner), {**HTTP_SCOPE, "headers": []}, [{"type": "http.disconnect"}]
    )
    assert sent == []
    assert inner.messages == [{"type": "http.disconnect"}]


def test_capped_body_reads_no_further_than_the_last_chunk(settings) -> None:
    """SPEC §6 `too-large`: a chunk without `more_body` ends the body (ASGI's default is False),
    so the guard hands it on without waiting for another message, which a real server sends
    only once the client goes away."""
    settings.MOSAIC_REQUEST_MAX_BYTES = 100
    inner = Reader()
    received: list[dict[str, Any]] = []
    last = {"type": "http.request", "body": b"{}"}

    async def receive() -> dict[str, Any]:
        message = last if not received else {"type": "http.disconnect"}
        received.append(message)
        return message

    async def send(message: Any) -> None:
        raise AssertionError(f"nothing is answered: {message}")

    async_to_sync(capped_body(inner))({**HTTP_SCOPE, "headers": []}, receive, send)
    assert received == [last]
    assert inner.messages == [last]


def test_delivering_pushes_names_the_serving_event_loop_to_the_broker(monkeypatch) -> None:
    """SPEC §6 (new rows arrive live): pushes committed on any thread go out on the loop the
    consumers wait on, so the listener names its running loop before the application runs."""
    named: list[Any] = []
    monkeypatch.setattr(events, "deliver_on", named.append)
    inner = Recorder()
    scope = {"type": "http"}
    loops: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        return None

    async def serve() -> None:
        loops.append(asyncio.get_running_loop())
        await delivering_pushes(inner)(scope, receive, send)

    async_to_sync(serve)()
    assert named == loops
    assert inner.calls == [(scope, receive, send)]
