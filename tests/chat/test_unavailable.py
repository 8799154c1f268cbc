"""SPEC §6 `unavailable`: a database (or channel layer) that fails under a request answers 503
`{"error": "unavailable", …}`, never a 500, and under a WebSocket closes it with 4503.

The real outage — connections cut under running processes — is `tests/cluster/test_faults.py`;
these pin the two places that turn it into the answer, in-process and in every pass."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from human import gates
from mosaic.edge.sockets import unavailable_closes

UNAVAILABLE = {"error": "unavailable", "detail": "The service is unavailable; retry shortly."}


@pytest.mark.django_db(transaction=True)
def test_read_database_down_while_authenticating_answers_503_not_500(
    human_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's user is read inside DRF; the request log must not authenticate again
    (and fail again, outside DRF's handler) once the view has answered 503."""

    def down(self: Any, request: Any) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(gates.HumanSessionAuthentication, "authenticate", down)
    response = human_client.get("/api/chat/projects")
    assert (response.status_code, response.json()) == (503, UNAVAILABLE)
    assert response.headers["Retry-After"] == "1"


def failing(error: Exception, *, accept_first: bool) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()  # websocket.connect
        if accept_first:
            await send({"type": "websocket.accept"})
        raise error

    return app


@pytest.mark.parametrize("accept_first", [False, True], ids=["before-accept", "after-accept"])
@pytest.mark.parametrize(
    "error",
    [OperationalError("database down"), RedisConnectionError("layer down")],
    ids=["database", "channel-layer"],
)
def test_websocket_service_down_closes_4503(error: Exception, accept_first: bool) -> None:
    async def scenario() -> tuple[bool, int | None]:
        communicator = WebsocketCommunicator(
            unavailable_closes(failing(error, accept_first=accept_first)), "/ws/trail/"
        )
        connected, code = await communicator.connect()
        if connected:
            closed = await communicator.receive_output()
            code = closed.get("code")
        await communicator.wait()
        return connected, code

    assert async_to_sync(scenario)() == (True, 4503)


def test_websocket_other_errors_are_not_dressed_as_unavailable() -> None:
    """Only a service outage is `unavailable`; a bug still surfaces as one."""

    async def scenario() -> None:
        communicator = WebsocketCommunicator(
            unavailable_closes(failing(ValueError("bug"), accept_first=False)), "/ws/trail/"
        )
        await communicator.connect()

    with pytest.raises(ValueError, match="bug"):
        async_to_sync(scenario)()


def guarded_socket(app: Any) -> list[Any]:
    """Run a WebSocket through `unavailable_closes`; what it sent to the client, in order."""
    sent: list[Any] = []
    inputs = [{"type": "websocket.connect"}]
    scope = {"type": "websocket", "path": "/ws/trail/", "headers": []}

    async def receive() -> dict[str, Any]:
        return inputs.pop(0) if inputs else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: Any) -> None:
        sent.append(message)

    async_to_sync(unavailable_closes(app))(scope, receive, send)
    return sent


@pytest.mark.parametrize("accept_first", [False, True], ids=["before-accept", "after-accept"])
def test_websocket_service_down_sends_accept_once_then_close_4503(accept_first: bool) -> None:
    """SPEC §6 `unavailable`: the client gets one accept and one well-formed close, 4503, the
    same whether the outage came before or after the socket was accepted."""
    assert guarded_socket(failing(OperationalError("down"), accept_first=accept_first)) == [
        {"type": "websocket.accept"},
        {"type": "websocket.close", "code": 4503},
    ]


def test_websocket_service_down_after_its_close_sends_nothing_more() -> None:
    """SPEC §6: a socket the application already closed (a refusal) is not reopened to be
    closed again when the outage surfaces after it."""

    async def refused_then_down(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.close", "code": 4403, "reason": "thread-not-owned"})
        raise OperationalError("down")

    assert guarded_socket(refused_then_down) == [
        {"type": "websocket.close", "code": 4403, "reason": "thread-not-owned"}
    ]


def test_websocket_service_down_logs_one_warning_naming_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SPEC §6 `unavailable`: operators see which service failed under a socket, by the error's
    type only (never its text, which may carry connection details)."""
    caplog.set_level(logging.WARNING, logger="mosaic.chat")
    guarded_socket(failing(RedisConnectionError("redis://secret@host"), accept_first=True))
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "mosaic.chat"]
    assert lines == [(logging.WARNING, "WebSocket closed: service unavailable (ConnectionError)")]


@pytest.mark.parametrize("scope_type", ["http", "lifespan"])
def test_unavailable_closes_passes_other_scopes_through_unchanged(scope_type: str) -> None:
    """The guard is for WebSockets only: anything else reaches the application as it came,
    with the server's own receive and send."""
    calls: list[Any] = []
    scope = {"type": scope_type}

    async def app(*args: Any) -> None:
        calls.append(args)

    async def receive() -> dict[str, Any]:
        return {}

    async def send(message: Any) -> None:
        return None

    async_to_sync(unavailable_closes(app))(scope, receive, send)
    assert calls == [(scope, receive, send)]
