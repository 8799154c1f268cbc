"""A listener as an ASGI application, built the same way for each: its own guard first, then
HTTP (Django on the worker pool, static files, the body cap) and WebSockets (L7's origins, then
its sockets), behind the probes, the socket counts and one log line per request.

Each listener's build names what is its own (`human.listener`, `tester.listener`); the scope
is marked with the listener's name here, on the server side, where no header can forge it, and
`mosaic.middleware` picks the listener's urlconf from that mark.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from django.conf import settings

from broker import refusals
from mosaic.edge.access_log import ASGIApp, Message, Receive, Scope, Send, one_line_each
from mosaic.edge.answers import refuse
from mosaic.edge.handler import PooledHandler, Workers
from mosaic.edge.health import with_probes
from mosaic.edge.metrics import counted_sockets
from mosaic.edge.sockets import unavailable_closes, websocket_origin_only

LISTENER_KEY = "mosaic.listener"


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


def build_listener(
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
