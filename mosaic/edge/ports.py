"""Which listener a connection reaches: chosen by the port it arrived on (the server socket's,
never a header), and the loopback addresses the tester and ops listeners answer alone."""

from __future__ import annotations

from django.conf import settings

from mosaic.edge.access_log import ASGIApp, Receive, Scope, Send

LOOPBACK = frozenset({"127.0.0.1", "::1"})


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
