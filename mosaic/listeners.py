"""The two listeners as ASGI applications, and the guards that run before any routing.

- The human listener refuses any request carrying `X-Mosaic-Tester`, HTTP or WebSocket (L1).
- The tester listener answers only loopback clients and `Host: 127.0.0.1:PORT` (L8).
- Both answer `/healthz` and `/readyz` before any guard (`mosaic.health`).
- Both cap request bodies (`too-large`) and mark the scope with their name, which Django's
  `ListenerMiddleware` reads to pick the listener's urlconf. The mark is set here, on the
  server side: no header can forge it.

`by_port` serves both from one process, choosing by the port the connection arrived on (the
server socket's, never a header).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker import refusals
from chat.errors import close_code
from mosaic.access_log import ASGIApp, Message, Receive, Scope, Send, one_line_each
from mosaic.answers import refuse
from mosaic.handler import PooledHandler, Workers
from mosaic.health import with_probes
from mosaic.metrics import counted_sockets

logger = logging.getLogger("mosaic.chat")

LISTENER_KEY = "mosaic.listener"
# A service the WebSockets need is down: the database, or the Redis channel layer.
UNAVAILABLE_ERRORS = (OperationalError, InterfaceError, RedisConnectionError, RedisTimeoutError)
TESTER_HEADER = b"x-mosaic-tester"
LOOPBACK = frozenset({"127.0.0.1", "::1"})


def _normalised(name: bytes) -> bytes:
    return name.strip().lower().replace(b"_", b"-")


def refuse_tester_header(app: ASGIApp) -> ASGIApp:
    """L1: the human listener refuses `X-Mosaic-Tester` (any value, empty included, any
    spelling) before routing, so the broker is never called."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and any(
            _normalised(name) == TESTER_HEADER for name, _ in scope.get("headers", [])
        ):
            await refuse(
                scope,
                send,
                refusals.TESTER_LISTENER_REQUIRED,
                "Tester traffic goes to the tester listener.",
            )
            return
        await app(scope, receive, send)

    return guard


def tester_host_only(app: ASGIApp) -> ASGIApp:
    """L8: loopback clients only, and `Host: 127.0.0.1:PORT` (DNS rebinding). A page request
    for `localhost:PORT` is sent to the same path on `127.0.0.1:PORT`."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        port = settings.MOSAIC_TESTER_PORT
        client = scope.get("client") or ("", 0)
        hosts = [value for name, value in scope.get("headers", []) if name.lower() == b"host"]
        host = hosts[0].decode("latin-1") if len(hosts) == 1 else ""
        if client[0] not in LOOPBACK:
            await refuse(
                scope, send, refusals.HOST_REFUSED, "The tester listener is loopback only."
            )
            return
        if host == f"127.0.0.1:{port}":
            await app(scope, receive, send)
            return
        if host == f"localhost:{port}" and scope["type"] == "http" and scope["method"] == "GET":
            await _redirect(send, f"http://127.0.0.1:{port}{scope.get('path', '/')}")
            return
        await refuse(scope, send, refusals.HOST_REFUSED, f"Use http://127.0.0.1:{port}.")

    return guard


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 302,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


def capped_body(app: ASGIApp) -> ASGIApp:
    """Refuse an HTTP request body over MOSAIC_REQUEST_MAX_BYTES (`too-large`), whether it
    declares its length or streams in chunks, before the application reads any of it."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        limit: int = settings.MOSAIC_REQUEST_MAX_BYTES
        for name, value in scope.get("headers", []):
            if name.lower() == b"content-length" and (
                not value.strip().isdigit() or int(value) > limit
            ):
                await refuse(scope, send, refusals.TOO_LARGE, f"The body is over {limit} bytes.")
                return
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            chunks.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > limit:
                await refuse(scope, send, refusals.TOO_LARGE, f"The body is over {limit} bytes.")
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await app(scope, replay, send)

    return guard


def named(listener: str, app: ASGIApp) -> ASGIApp:
    """Mark every scope with the listener's name (read by `mosaic.middleware`)."""

    async def marked(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, LISTENER_KEY: listener}, receive, send)

    return marked


def delivering_pushes(app: ASGIApp) -> ASGIApp:
    """Tell the broker which event loop serves the consumers (`broker.events.deliver_on`)."""
    from broker import events

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        events.deliver_on(asyncio.get_running_loop())
        await app(scope, receive, send)

    return serve


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


def by_port(*, human: ASGIApp, tester: ASGIApp, ops: ASGIApp) -> ASGIApp:
    """One process, every listener: the tester port's connections go to the tester listener,
    the ops port's to the ops listener, any other to the human listener."""

    apps = {"human": human, "tester": tester, "ops": ops}

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server") or ("", None)
        await apps[listener_at(server[1])](scope, receive, send)

    return route


def listener_at(port: int | None) -> str:
    """The listener a connection to `port` reaches: `tester`, `ops`, or else `human`."""
    if port == settings.MOSAIC_TESTER_PORT:
        return "tester"
    if settings.MOSAIC_OPS_PORT and port == settings.MOSAIC_OPS_PORT:
        return "ops"
    return "human"


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


def static_files(app: ASGIApp) -> ASGIApp:
    """Django's static files in front of `app`, where a path that leaves the static directories
    (`/static/../x`) is `not-found` like any missing file, not a SuspiciousFileOperation 500."""
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
    from django.core.exceptions import SuspiciousOperation
    from django.http import Http404

    class StaticFiles(ASGIStaticFilesHandler):
        def serve(self, request: Any) -> Any:
            try:
                return super().serve(request)
            except SuspiciousOperation as error:
                raise Http404("No such file.") from error

    # Django types its inner application as its own handler; any ASGI application serves.
    return StaticFiles(app)  # type: ignore[arg-type, return-value]


def human_origins() -> list[str]:
    return list(settings.MOSAIC_HUMAN_ORIGINS)


def tester_origins() -> list[str]:
    return [f"http://127.0.0.1:{settings.MOSAIC_TESTER_PORT}"]


def _listener(
    name: str,
    guard: Callable[[ASGIApp], ASGIApp],
    django_http: ASGIApp,
    origins: Callable[[], list[str]],
    sockets: ASGIApp,
) -> ASGIApp:
    """A listener named `name`: its `guard` first, then HTTP (Django, static files) and
    WebSockets (L7: `origins`, then `sockets`), behind the probes and one log line each."""
    from channels.routing import ProtocolTypeRouter

    listener = delivering_pushes(
        guard(
            ProtocolTypeRouter(
                {
                    "http": named(name, capped_body(static_files(django_http))),
                    "websocket": unavailable_closes(
                        named(name, websocket_origin_only(origins, sockets))
                    ),
                }
            )
        )
    )
    return one_line_each(with_probes(counted_sockets(listener, listener=name)), listener=name)


def build_human_application(django_http: ASGIApp) -> ASGIApp:
    """The human listener: L1 first, then HTTP (Django, static files) and WebSockets (L7,
    the session's user, or the trusted proxy's as over HTTP: L9)."""
    from channels.auth import AuthMiddlewareStack

    from chat.gates import proxy_user_sockets

    sockets = AuthMiddlewareStack(proxy_user_sockets(websocket_routes("human")))
    return _listener("human", refuse_tester_header, django_http, human_origins, sockets)


def http_handler(workers: Workers) -> ASGIApp:
    """Django's HTTP handler for the human listener, its request path on `workers`."""
    return PooledHandler(workers)


def plain_http_handler(workers: Workers) -> ASGIApp:
    """Django's handler for the tester listener, which serves plain HTTP on loopback by design
    (SPEC §5): production's HTTPS redirect would send the product's own tests to a port with no
    TLS. HSTS needs no such care: Django adds it to HTTPS responses only."""
    from django.test.utils import override_settings

    # The middleware read their settings once, while the handler builds its chain.
    with override_settings(SECURE_SSL_REDIRECT=False):
        return http_handler(workers)


def build_tester_application(django_http: ASGIApp) -> ASGIApp:
    """The tester listener: L8 first, then HTTP and WebSockets (L7); no session is read."""
    sockets = websocket_routes("tester")
    return _listener("tester", tester_host_only, django_http, tester_origins, sockets)
