"""The tester listener's request gates (L3, L4, L5).

The tester listener has no sign-in: every request there is the tester, built on its own by
`TesterListenerAuthentication` and never from a human (L5). Writes pass the fence (L4) and L3's
checks before any broker call.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from broker import refusals
from broker.access import access_tester_actor
from broker.actors import Actor
from chat.gates import PROXY_SECRET_HEADER, JsonBody, SameOriginFetch, is_write

# L4: the only writes the tester may make, (method, route) exactly — the chat writes, the
# changes to its own threads and their read marks, the tester's stop, the three writes of its
# suite runs' history (start, record a case, end), and a chat completion of its
# OpenAI-compatible endpoint (SPEC §6.1).
TESTER_WRITES = frozenset(
    {
        ("POST", "chat-projects"),
        ("POST", "chat-threads"),
        ("PATCH", "chat-thread"),
        ("POST", "chat-thread-read"),
        ("POST", "chat-thread-messages"),
        ("POST", "chat-thread-open"),
        ("POST", "chat-turn-edit"),
        ("POST", "chat-turn-regenerate"),
        ("POST", "chat-thread-branch"),
        ("POST", "chat-stop"),
        ("POST", "suite-runs"),
        ("POST", "suite-run-cases"),
        ("POST", "suite-run-end"),
        ("POST", "openai-chat-completions"),
    }
)
TESTER_WRITE_ROUTES = frozenset(name for _, name in TESTER_WRITES)
# Proxy user headers the tester listener refuses outright, whatever their spelling.
_PROXY_HEADERS = ("x-user",)


class TesterPrincipal:
    """DRF's `request.user` on the tester listener; the actor is what the views use."""

    is_authenticated = True
    is_active = True
    username = "tester"

    def get_username(self) -> str:
        return self.username


class TesterListenerAuthentication(BaseAuthentication):
    """L5: every request on the tester listener is the tester (`tester-off` while it is off)."""

    def authenticate(self, request: Request) -> tuple[TesterPrincipal, Actor]:
        return TesterPrincipal(), access_tester_actor(business_slug=settings.MOSAIC_TESTER_BUSINESS)


class TesterActorRequired(BasePermission):
    """L5: a tester-listener view that finds any other actor refuses."""

    message = "The tester listener serves only the tester."
    code = refusals.TESTER_REQUIRED

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, Actor) and request.auth.is_tester


class TesterFence(BasePermission):
    """L4: a tester write is an allow-listed method on an allow-listed route, exactly."""

    message = (
        "The tester listener permits only chat writes, the tester's stop, its suite runs and "
        "chat completions."
    )
    code = refusals.TESTER_REFUSED

    def has_permission(self, request: Request, view: Any) -> bool:
        match = request.resolver_match
        return fence_admits(request.method or "", match.url_name if match is not None else None)


def fence_admits(method: str, url_name: str | None) -> bool:
    """L4: reads pass; a write passes when its method and route are allow-listed together."""
    return method in SAFE_METHODS or (method, url_name) in TESTER_WRITES


def _normalised(name: str) -> str:
    return name.strip().lower().replace("_", "-")


class NoProxyUserHeader(BasePermission):
    """L3: no proxy user header, nor the proxy's secret, reaches the tester listener, under any
    spelling."""

    message = "The tester listener accepts no proxy user header."
    code = refusals.PROXY_HEADER_REFUSED

    def has_permission(self, request: Request, view: Any) -> bool:
        refused = {
            *_PROXY_HEADERS,
            _normalised(PROXY_SECRET_HEADER),
            _normalised(settings.MOSAIC_PROXY_USER_HEADER),
        } - {""}
        scope = getattr(request._request, "scope", None)
        names = (
            [key.decode("latin-1") for key, _ in scope.get("headers", [])]
            if scope is not None
            else list(request.headers)
        )
        return not any(_normalised(name) in refused for name in names)


class TesterOrigin(BasePermission):
    """L3: tester writes come from exactly `http://127.0.0.1:PORT` of the tester listener."""

    message = "Tester writes must come from the tester listener's own origin."
    code = refusals.ORIGIN_REFUSED

    def has_permission(self, request: Request, view: Any) -> bool:
        expected = f"http://127.0.0.1:{settings.MOSAIC_TESTER_PORT}"
        return not is_write(request) or request.headers.get("Origin") == expected


TESTER_AUTHENTICATION = (TesterListenerAuthentication,)
TESTER_GATES = (
    TesterActorRequired,
    TesterFence,
    NoProxyUserHeader,
    TesterOrigin,
    SameOriginFetch,
    JsonBody,
)
