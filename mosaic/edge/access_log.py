"""One log line per request (docs/operations.md, Logs), written at the edge of every listener.

The line is written once the request ends, whatever answered it: a chat view, a page, a static
file, a probe, or a refusal made before any view (L1, L8, `too-large`, a busy server's 503). What
only the inner layers know is noted on the scope's mark by Django's `ListenerMiddleware`: the
matched route, and the user a chat view named (L6). Plain lines read
`chat METHOD PATH STATUS user="…"` for the chat API, `http METHOD PATH STATUS` for everything
else, and `ws PATH CODE` when a WebSocket ends; with MOSAIC_LOG_FORMAT=json each is one JSON
object with every field (`mosaic.logs`). daphne's own access log is off (`manage.py serve`): it
repeated every line.

Each request has an id: the `X-Request-ID` a trusted proxy (MOSAIC_TRUSTED_PROXIES) sent, else
a new one; it is logged and returned in the response's `X-Request-ID`. A client's own header
from anywhere else is not believed, so no client can make its lines pass for another's.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

from chat.client_address import client_of_scope

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

request_log = logging.getLogger("mosaic.requests")

# The scope's mark, where inner layers note what only they know: a dict, so the copies of the
# scope that later layers make (`named`) share it.
MARK_KEY = "mosaic.request"
REQUEST_ID_HEADER = b"x-request-id"
# A proxy's id is logged as sent: printable, short, and nothing that could split a log line.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Routes of requests no Django view matched: few, so a metric's labels stay bounded.
STATIC_ROUTE = "static"
UNMATCHED_ROUTE = "unmatched"
# The paths answered at the edge, before any route is matched, each its own route: the probes
# (`mosaic.edge.health`) and the ops listener's metrics (`mosaic.ops`).
HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"
EDGE_ROUTES = frozenset({HEALTHZ, READYZ, METRICS})

# Observers of each ended request (`mosaic.edge.metrics` counts them), called with its fields.
observers: list[Callable[[dict[str, Any]], None]] = []


def _mark(scope: Any) -> dict[str, Any] | None:
    mark = scope.get(MARK_KEY) if isinstance(scope, MutableMapping) else None
    return mark if isinstance(mark, dict) else None


def mark_route(scope: Any, route: str) -> None:
    """The URL pattern the request matched (Django's `ResolverMatch.route`)."""
    if (mark := _mark(scope)) is not None:
        mark["route"] = route


def mark_chat_user(scope: Any, user: str) -> None:
    """L6: a chat request, by `user` (a username, `tester`, or empty when nobody signed in)."""
    if (mark := _mark(scope)) is not None:
        mark["user"] = user


def request_id_of(scope: Scope) -> str:
    """The trusted proxy's `X-Request-ID`, or a new id."""
    peer = (scope.get("client") or ("", 0))[0]
    if peer in settings.MOSAIC_TRUSTED_PROXIES:
        sent = [v for k, v in scope.get("headers", []) if k.lower() == REQUEST_ID_HEADER]
        value = sent[0].decode("latin-1") if len(sent) == 1 else ""
        if _REQUEST_ID.fullmatch(value):
            return value
    return uuid.uuid4().hex


def actor_kind(user: str | None) -> str:
    """Who made a request, as a kind: `tester`, `human`, `anonymous`, or `-` (not a chat
    request: its actor is not read at the edge)."""
    if user is None:
        return "-"
    if user == "tester":
        return "tester"
    return "human" if user else "anonymous"


def _route_of(mark: dict[str, Any], path: str) -> str:
    if "route" in mark:
        return str(mark["route"])
    if path in EDGE_ROUTES:
        return path
    return (
        STATIC_ROUTE if path.startswith(f"/{settings.STATIC_URL.lstrip('/')}") else UNMATCHED_ROUTE
    )


def _write_line(kind: str, scope: Scope, mark: dict[str, Any], listener: str) -> None:
    status = mark["status"] if mark["status"] is not None else "-"
    path = str(scope.get("path", ""))
    fields: dict[str, Any] = {
        "listener": listener,
        "kind": kind,
        "method": scope.get("method", "GET") if kind == "http" else "WEBSOCKET",
        "path": path,
        "route": _route_of(mark, path),
        "status": status,
        "ms": round((time.monotonic() - mark["started"]) * 1000, 1),
        "actor": actor_kind(mark.get("user")),
        "client": client_of_scope(scope),
        "request_id": mark["request_id"],
    }
    if kind == "websocket":
        request_log.info("ws %s %s", path, status, extra={"request": fields})
    elif "user" in mark:
        line = 'chat %s %s %s user="%s"'
        request_log.info(
            line, fields["method"], path, status, mark["user"], extra={"request": fields}
        )
    else:
        request_log.info("http %s %s %s", fields["method"], path, status, extra={"request": fields})
    for observe in observers:
        observe(fields)


def log_refused_by_server(scope: Scope, status: int, listener: str) -> None:
    """The line of a request the server refused before any listener's app ran
    (`mosaic.edge.body_limit`): the same fields, a new request id."""
    mark = {"status": status, "started": time.monotonic(), "request_id": request_id_of(scope)}
    _write_line("http", scope, mark, listener)


def one_line_each(app: ASGIApp, *, listener: str) -> ASGIApp:
    """Log each HTTP request and each WebSocket of `listener` once, with its request id, which
    HTTP responses carry in `X-Request-ID`."""

    async def logged(scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        mark: dict[str, Any] = {
            "status": None,
            "started": time.monotonic(),
            "request_id": request_id_of(scope),
        }

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                mark["status"] = message.get("status")
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != REQUEST_ID_HEADER
                ]
                headers.append((REQUEST_ID_HEADER, mark["request_id"].encode()))
                message = {**message, "headers": headers}
            elif message["type"] == "websocket.close" and mark["status"] is None:
                mark["status"] = message.get("code", 1000)
            await send(message)

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "websocket.disconnect" and mark["status"] is None:
                mark["status"] = message.get("code", 1000)
            return message

        try:
            await app({**scope, MARK_KEY: mark}, watched_receive, watched_send)
        finally:
            _write_line(str(kind), scope, mark, listener)

    return logged
