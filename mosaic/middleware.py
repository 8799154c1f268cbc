"""Which listener a request arrived on, and that listener's urlconf."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase

from mosaic.listeners import LISTENER_KEY

URLCONFS = {"human": "mosaic.urls", "tester": "tester.urls"}


class ListenerMiddleware:
    """Sets `request.listener` from the ASGI scope's mark, and the listener's urlconf.

    A request without the mark (no ASGI listener in front, as under Django's test client) is
    the human listener's: the one that needs a signed-in human for everything.

    Async-capable, as Django's own middleware are: a sync-only middleware at the top of an async
    chain would cost every request a trip from the event loop to a thread and back.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponseBase | Awaitable[HttpResponseBase]:
        scope = getattr(request, "scope", None) or {}
        listener = scope.get(LISTENER_KEY, "human")
        request.listener = listener  # type: ignore[attr-defined]
        request.urlconf = URLCONFS[listener]  # type: ignore[attr-defined]
        return self.get_response(request)  # type: ignore[no-any-return]
