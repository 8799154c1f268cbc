"""The tester listener as an ASGI application: L8 before any routing (loopback clients and
`Host: 127.0.0.1:PORT` only), its own origin (L7), and no session read: every request there is
the tester (L5)."""

from __future__ import annotations

from django.conf import settings

from broker import refusals
from mosaic.edge.access_log import ASGIApp, Receive, Scope, Send
from mosaic.edge.answers import refuse
from mosaic.edge.listener import build_listener
from mosaic.edge.ports import LOOPBACK
from mosaic.edge.sockets import websocket_routes
from tester.openai.errors import openai_shaped


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


def tester_origins() -> list[str]:
    return [f"http://127.0.0.1:{settings.MOSAIC_TESTER_PORT}"]


def tester_guard(app: ASGIApp) -> ASGIApp:
    """L8, with every error under `/v1/` in OpenAI's shape, its own included (SPEC §6.1)."""
    return openai_shaped(tester_host_only(app))


def build_tester_application(django_http: ASGIApp) -> ASGIApp:
    """The tester listener: L8 first, then HTTP and WebSockets (L7); no session is read."""
    sockets = websocket_routes("tester")
    return build_listener("tester", tester_guard, django_http, tester_origins, sockets)
