"""The human listener as an ASGI application: L1 before any routing, the session's user or the
trusted proxy's on its WebSockets (L9), and the human's origins (L7)."""

from __future__ import annotations

from django.conf import settings

from broker import refusals
from human.gates import proxy_user_sockets
from mosaic.edge.access_log import ASGIApp, Receive, Scope, Send
from mosaic.edge.answers import refuse
from mosaic.edge.listener import build_listener
from mosaic.edge.sockets import websocket_routes

TESTER_HEADER = b"x-mosaic-tester"


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


def human_origins() -> list[str]:
    return list(settings.MOSAIC_HUMAN_ORIGINS)


def build_human_application(django_http: ASGIApp) -> ASGIApp:
    """The human listener: L1 first, then HTTP (Django, static files) and WebSockets (L7,
    the session's user, or the trusted proxy's as over HTTP: L9)."""
    from channels.auth import AuthMiddlewareStack

    sockets = AuthMiddlewareStack(proxy_user_sockets(websocket_routes("human")))
    return build_listener("human", refuse_tester_header, django_http, human_origins, sockets)
