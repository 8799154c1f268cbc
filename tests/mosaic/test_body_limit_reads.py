"""`mosaic.edge.body_limit` byte by byte: the server's request class over an in-memory transport,
with a limit small enough that a whole request arrives in one read.

The real-socket tests (tests/mosaic/test_body_limit.py) prove the refusal against `manage.py serve`;
these pin what a socket cannot show exactly: how much of a body is kept, that a refused request
whose body ends in the read that refused it never reaches the application, that the refusal is
the connection's only answer, and that Django, next, spools no body within the limit either.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from mosaic.edge.body_limit import BoundedHTTPFactory, BoundedRequest
from tests.mosaic.test_deploy import setting_in_a_process

LIMIT = 1000


class FakeServer(SimpleNamespace):
    """What daphne's request asks of its server; requests are kept, applications counted."""

    def __init__(self) -> None:
        super().__init__(
            proxy_forwarded_address_header=None,
            root_path="",
            request_buffer_size=65536,
            server_name="",
            applications=[],
            requests=[],
        )

    def protocol_connected(self, protocol: Any) -> None:
        self.requests.append(protocol)

    def protocol_disconnected(self, protocol: Any) -> None:
        pass

    def create_application(self, protocol: Any, scope: dict[str, Any]) -> None:
        self.applications.append(scope["path"])


@pytest.fixture
def limited(settings: Any) -> None:
    settings.MOSAIC_REQUEST_MAX_BYTES = LIMIT


def connection() -> tuple[Any, StringTransport, FakeServer]:
    server = FakeServer()
    factory = BoundedHTTPFactory(server)
    factory.reactor = Clock()  # the channel's idle timeout, never run
    channel = factory.buildProtocol(None)
    transport = StringTransport()
    channel.makeConnection(transport)
    return channel, transport, server


def request_head(headers: str) -> bytes:
    return f"POST /api/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode()


def chunked(body: bytes, piece: int = 100) -> bytes:
    parts = [body[i : i + piece] for i in range(0, len(body), piece)]
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"


def answers(transport: StringTransport) -> list[bytes]:
    return [b"HTTP/1.1 " + part for part in transport.value().split(b"HTTP/1.1 ")[1:]]


@pytest.mark.usefixtures("limited")
def test_declared_length_over_limit_whose_body_is_in_the_same_read_is_refused_once() -> None:
    """Refused at its headers, though the whole body came with them: one 413, no application."""
    channel, transport, server = connection()
    body = b"x" * (LIMIT + 1)
    channel.dataReceived(request_head(f"Content-Length: {len(body)}\r\n") + body)
    (answer,) = answers(transport)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"] == "too-large"
    assert server.applications == []
    assert transport.disconnecting


@pytest.mark.usefixtures("limited")
def test_chunked_body_over_limit_ending_in_the_same_read_is_refused_once() -> None:
    """A chunked body that passes the limit and ends in the same read: one 413, no
    application, and no more of it kept than the limit."""
    channel, transport, server = connection()
    channel.dataReceived(
        request_head("Transfer-Encoding: chunked\r\n") + chunked(b"x" * (LIMIT * 3))
    )
    (answer,) = answers(transport)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert server.applications == []
    assert transport.disconnecting
    (request,) = server.requests
    assert isinstance(request, BoundedRequest)
    assert len(request.content.getvalue()) <= LIMIT


@pytest.mark.usefixtures("limited")
def test_body_at_limit_reaches_application_from_memory() -> None:
    """A body of exactly the limit is served, from memory."""
    channel, transport, server = connection()
    body = b"x" * LIMIT
    channel.dataReceived(request_head("Transfer-Encoding: chunked\r\n") + chunked(body))
    assert server.applications == ["/api/auth/login"]
    assert answers(transport) == []
    (request,) = server.requests
    assert request.content.getvalue() == body


@pytest.mark.usefixtures("limited")
def test_form_post_is_not_parsed_by_the_server() -> None:
    """A malformed multipart body reaches the application, which answers it."""
    channel, transport, server = connection()
    body = b"not a multipart body"
    channel.dataReceived(
        request_head(f"Content-Type: multipart/form-data\r\nContent-Length: {len(body)}\r\n") + body
    )
    assert server.applications == ["/api/auth/login"]
    assert answers(transport) == []


def test_django_holds_any_body_within_a_raised_limit_in_memory() -> None:
    """Django's ASGI handler spools a body past FILE_UPLOAD_MAX_MEMORY_SIZE to a file: with a
    limit raised past Django's default, the threshold follows it."""
    threshold = setting_in_a_process(
        "settings.FILE_UPLOAD_MAX_MEMORY_SIZE", MOSAIC_REQUEST_MAX_BYTES="5000000"
    )
    assert int(threshold) >= 5_000_000
