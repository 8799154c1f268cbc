"""The body limit at the server: daphne reads a whole request before the application sees it.

daphne hands an HTTP request to the application only once Twisted has read all of its body, and
Twisted spools a body declared over 100 kB to a temporary file while it reads. The listeners'
own guard (`mosaic.edge.listener.capped_body`) could only refuse after the whole upload was in. So
the server's request class refuses first:

- a declared `Content-Length` over MOSAIC_REQUEST_MAX_BYTES as soon as the headers are in,
  before a byte of the body is read;
- a chunked body as soon as what arrived passes the limit: at most the limit and the read that
  passed it (64 KiB, Twisted's socket read).

Either gets the usual JSON `too-large` 413 with `Connection: close`, is logged as every request
is (`mosaic.edge.access_log`), and the connection closes: nothing more is read. A body within the
limit is kept in memory, never in a file.

Twisted would also parse form posts (`multipart/form-data`, urlencoded) before daphne sees them,
answering a malformed one with a bare 400 of its own. Django parses bodies, so Twisted parses
none and the application answers (SPEC §6).
"""

from __future__ import annotations

import json
from io import BytesIO
from typing import Any
from urllib.parse import unquote

from daphne.http_protocol import HTTPFactory, WebRequest  # type: ignore[import-untyped]
from daphne.server import Server  # type: ignore[import-untyped]
from django.conf import settings

from broker import refusals
from chat.errors import STATUS, body
from mosaic.edge.access_log import log_refused_by_server
from mosaic.edge.ports import listener_at


def too_large_response(limit: int) -> bytes:
    """The whole `too-large` answer, head and JSON body, closing the connection."""
    payload = json.dumps(body(refusals.TOO_LARGE, f"The body is over {limit} bytes.")).encode()
    head = (
        f"HTTP/1.1 {STATUS[refusals.TOO_LARGE]} Content Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + payload


class BoundedRequest(WebRequest):  # type: ignore[misc]
    """daphne's request, refusing a body over MOSAIC_REQUEST_MAX_BYTES while it arrives."""

    refused = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django parses bodies; Twisted's parse would answer a malformed multipart itself.
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    def gotLength(self, length: int | None) -> None:
        """The headers are in: refuse a declared length over the limit, or hold the body in
        memory (Twisted's own choice is a temporary file past 100 kB)."""
        if length is not None and length > settings.MOSAIC_REQUEST_MAX_BYTES:
            self.refuse_too_large()
            return
        self.content = BytesIO()

    def handleContentChunk(self, data: bytes) -> None:
        """Keep a piece of the body, or refuse once the body passes the limit (chunked)."""
        if self.refused:
            # The rest of the read that passed the limit, on its way to the closed connection.
            return
        if self.content.tell() + len(data) > settings.MOSAIC_REQUEST_MAX_BYTES:
            self.refuse_too_large()
            return
        self.content.write(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        # A refused body may still end within the read that refused it: it is not served.
        if not self.refused:
            super().requestReceived(command, path, version)

    def refuse_too_large(self) -> None:
        """Answer `too-large` and close: the connection reads nothing more, and the request
        never reaches the application."""
        self.refused = True
        channel = self.channel
        # The request line as the channel read it: the request learns it once the body is in.
        method = getattr(channel, "_command", b"-").decode("latin-1")
        target = getattr(channel, "_path", b"-").split(b"?", 1)[0]
        peer, host = channel.transport.getPeer(), channel.transport.getHost()
        scope = {
            "type": "http",
            "method": method,
            "path": unquote(target.decode("latin-1")),
            "client": (getattr(peer, "host", ""), getattr(peer, "port", 0)),
            "headers": [
                (name.lower(), value)
                for name, values in self.requestHeaders.getAllRawHeaders()
                for value in values
            ],
        }
        listener = listener_at(getattr(host, "port", None))
        log_refused_by_server(scope, STATUS[refusals.TOO_LARGE], listener)
        # Twisted answers `Expect: 100-continue` once the headers are in: after this answer,
        # it would invite the very body refused.
        self.requestHeaders.removeHeader(b"Expect")
        channel.transport.write(too_large_response(settings.MOSAIC_REQUEST_MAX_BYTES))
        channel.loseConnection()


class BoundedHTTPFactory(HTTPFactory):  # type: ignore[misc]
    """daphne's HTTP factory, its requests `BoundedRequest`."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BoundedRequest
        return protocol


class BoundedServer(Server):  # type: ignore[misc]
    """daphne serving `BoundedRequest`s.

    daphne builds its HTTP factory inside `run()` (`self.http_factory = HTTPFactory(self)`)
    with no hook to choose the class, so the attribute is a property: daphne's assignment
    installs ours, before any listener is given it."""

    @property
    def http_factory(self) -> BoundedHTTPFactory:
        return self._bounded_http_factory

    @http_factory.setter
    def http_factory(self, built: HTTPFactory) -> None:
        self._bounded_http_factory = (
            built if isinstance(built, BoundedHTTPFactory) else BoundedHTTPFactory(self)
        )
