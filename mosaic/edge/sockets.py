"""What every listener puts in front of its WebSockets: L7's origin check, the streams' routes,
and `unavailable` as a close code when a service under a socket fails."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker import refusals
from chat.errors import close_code
from mosaic.edge.access_log import ASGIApp, Message, Receive, Scope, Send
from mosaic.edge.answers import refuse

logger = logging.getLogger("mosaic.chat")

# A service the WebSockets need is down: the database, or the Redis channel layer.
UNAVAILABLE_ERRORS = (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError)


def websocket_origin_only(allowed: Callable[[], list[str]], app: ASGIApp) -> ASGIApp:
    """L7: a WebSocket opens only from an allowed origin, matched whole (`scheme://host:port`).
    Django's HTTP middleware never runs for a WebSocket, so this is its CSRF check."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            origins = [v for k, v in scope.get("headers", []) if k.lower() == b"origin"]
            origin = origins[0].decode("latin-1") if len(origins) == 1 else ""
            if origin not in allowed():
                await refuse(scope, send, refusals.ORIGIN_REFUSED, "Origin not allowed.")
                return
        await app(scope, receive, send)

    return guard


async def _no_such_socket(scope: Scope, receive: Receive, send: Send) -> None:
    await refuse(scope, send, refusals.NOT_FOUND, "No such WebSocket.")


def websocket_routes(listener: str) -> ASGIApp:
    """The Console's two streams, with the listener's actor bound in (L5)."""
    from channels.routing import URLRouter
    from django.urls import path, re_path

    import chat.routes  # noqa: F401  (registers the `id` path converter)
    from chat.consumers import ThreadConsumer, TrailConsumer

    return URLRouter(  # type: ignore[no-any-return]
        [
            path("ws/trail/", TrailConsumer.as_asgi(listener=listener)),
            path("ws/chat/threads/<id:thread_id>/", ThreadConsumer.as_asgi(listener=listener)),
            re_path(r"", _no_such_socket),  # type: ignore[arg-type]
        ]
    )


def unavailable_closes(app: ASGIApp) -> ASGIApp:
    """SPEC §6 `unavailable` on WebSockets: when the database or the channel layer fails under a
    socket (the session's user, the access check, joining or reading a group), the socket closes
    with 4503 so the client retries after its last id, instead of a bare 500 to its handshake or
    1011. A close code travels only after accept, so a socket not yet accepted is accepted first."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await app(scope, receive, send)
            return
        sent: set[str] = set()

        async def tracked(message: Message) -> None:
            sent.add(message["type"])
            await send(message)

        try:
            await app(scope, receive, tracked)
        except UNAVAILABLE_ERRORS as error:
            logger.warning("WebSocket closed: service unavailable (%s)", type(error).__name__)
            if "websocket.close" in sent:
                return
            if "websocket.accept" not in sent:
                await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": close_code(refusals.UNAVAILABLE)})

    return guard
