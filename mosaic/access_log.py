"""One log line per request (README, Logs), at the edge of both listeners.

A chat request's line is the app's own, L6's `chat METHOD PATH STATUS user="…"` (written where
the actor is known, `chat.api.base.ChatView`); every other request — a page, a static file, a
refusal made before any view (L1, L8, `too-large`, a busy server's 503) — gets its line here:
`http METHOD PATH STATUS`, and a WebSocket one line when it ends: `ws PATH CODE`. daphne's own
access log is off (`manage.py serve`): it repeated every one of these lines. The server's own
`too-large`, answered before the app runs (`mosaic.body_limit`), writes the same line.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

request_log = logging.getLogger("mosaic.requests")

# The scope's mark that the app wrote the request's line itself (L6): a dict, so the copies of
# the scope that later layers make (`named`) share it.
LOGGED_KEY = "mosaic.logged"


def log_http(method: object, path: object, status: object) -> None:
    """The line of an HTTP request the app did not log itself."""
    request_log.info("http %s %s %s", method, path, status)


def mark_logged(scope: Any) -> None:
    """The request's line is written: the edge writes none."""
    mark = scope.get(LOGGED_KEY) if isinstance(scope, MutableMapping) else None
    if isinstance(mark, dict):
        mark["done"] = True


def one_line_each(app: ASGIApp) -> ASGIApp:
    """Log each HTTP request and each WebSocket once, unless the app logged it (L6)."""

    async def logged(scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        mark: dict[str, Any] = {"done": False, "status": None}

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                mark["status"] = message.get("status")
            elif message["type"] == "websocket.close" and mark["status"] is None:
                mark["status"] = message.get("code", 1000)
            await send(message)

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "websocket.disconnect" and mark["status"] is None:
                mark["status"] = message.get("code", 1000)
            return message

        try:
            await app({**scope, LOGGED_KEY: mark}, watched_receive, watched_send)
        finally:
            if not mark["done"]:
                status = mark["status"] if mark["status"] is not None else "-"
                if kind == "http":
                    log_http(scope.get("method"), scope.get("path"), status)
                else:
                    request_log.info("ws %s %s", scope.get("path"), status)

    return logged
