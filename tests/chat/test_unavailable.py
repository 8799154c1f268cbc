"""SPEC §6 `unavailable`: a database (or channel layer) that fails under a request answers 503
`{"error": "unavailable", …}`, never a 500, and under a WebSocket closes it with 4503.

The real outage — connections cut under running processes — is `tests/cluster/test_faults.py`;
these pin the two places that turn it into the answer, in-process and in every pass."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.db import OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError

from chat import gates
from mosaic.listeners import unavailable_closes

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
