"""Which listener a request arrived on, and that listener's urlconf; and what the request's log
line needs from Django's side: the route it matched, and the user a chat view named (L6)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

from mosaic.edge.access_log import mark_chat_user, mark_route
from mosaic.edge.listener import LISTENER_KEY

URLCONFS = {"human": "human.urls", "tester": "tester.urls"}


class ListenerMiddleware(MiddlewareMixin):
    """Sets `request.listener` from the ASGI scope's mark, and the listener's urlconf.

    A request without the mark (no ASGI listener in front, as under Django's test client) is
    the human listener's: the one that needs a signed-in human for everything.
    """

    def process_request(self, request: HttpRequest) -> None:
        scope = getattr(request, "scope", None) or {}
        listener = scope.get(LISTENER_KEY, "human")
        request.listener = listener  # type: ignore[attr-defined]
        request.urlconf = URLCONFS[listener]  # type: ignore[attr-defined]

    def process_view(self, request: HttpRequest, *args: Any) -> None:
        # The request's log line and metrics name the route it matched, not its path (ids).
        match = request.resolver_match
        if match is not None:
            mark_route(getattr(request, "scope", None), f"/{match.route}")

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        # L6: a chat view names the request's user on it (`chat.api.base`); the line says it.
        user = getattr(request, "chat_user", None)
        if user is not None:
            mark_chat_user(getattr(request, "scope", None), user)
        return response
