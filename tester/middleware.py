"""L4 for every route of the tester listener, not only the chat API's."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.urls import Resolver404, resolve
from django.utils.deprecation import MiddlewareMixin

from broker import refusals
from chat.errors import error_response
from tester.gates import TesterFence, fence_admits


class TesterFenceMiddleware(MiddlewareMixin):
    """On the tester listener, a write to any route but the allow-listed chat writes is 403
    `tester-refused`, JSON, before CSRF or any view runs: the Console page, the schema and its
    docs page included, whose views are not DRF's and carry no `TesterFence`. A path that is no
    route there stays 404 `not-found`. Runs after `ListenerMiddleware`, which names the listener.
    """

    def process_request(self, request: HttpRequest) -> HttpResponseBase | None:
        return _refused(request)


def _refused(request: HttpRequest) -> HttpResponseBase | None:
    if getattr(request, "listener", None) != "tester" or fence_admits(request.method or "", None):
        # Not the tester listener, or a read.
        return None
    try:
        match = resolve(request.path_info, urlconf=getattr(request, "urlconf", None))
    except Resolver404:
        # No such route here: Django answers 404 `not-found` (L4).
        return None
    if fence_admits(request.method or "", match.url_name):
        return None
    return error_response(refusals.TESTER_REFUSED, TesterFence.message)
