"""The human listener's request gates (L2, L9): who the human is, and what a human write needs.

Permission classes are coarse and tiny: each checks one thing about the request and carries its
own `message` and `code`. Ownership is never decided here — that is the broker's (R1). The
gates both listeners share, and who a trusted proxy names (`proxy_username`), are `chat.gates`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.middleware.csrf import CsrfViewMiddleware
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from broker import refusals
from broker.access import access_human_actor
from broker.actors import Actor
from broker.refusals import Refusal
from chat.gates import JsonBody, ProxyUser, SameOriginFetch, is_write, proxy_username


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request: Any, reason: str) -> str:
        return reason


def enforce_csrf(request: Request) -> None:
    """L2: a human write carries Django's CSRF token, whoever authenticated the human."""
    if not is_write(request):
        return
    check = _CsrfCheck(lambda _request: None)  # type: ignore[arg-type]
    check.process_request(request._request)
    reason = check.process_view(request._request, None, (), {})  # type: ignore[arg-type]
    if reason:
        raise Refusal(refusals.CSRF_FAILED, f"CSRF check failed: {reason}")


class ProxyUserAuthentication(BaseAuthentication):
    """L9: the human a trusted proxy names (`proxy_username`); writes need the CSRF token too."""

    def authenticate(self, request: Request) -> tuple[ProxyUser, Actor] | None:
        username = proxy_username(getattr(request._request, "scope", None))
        if username is None:
            return None
        enforce_csrf(request)
        return ProxyUser(username), access_human_actor(username=username)


def proxy_user_sockets(app: Any) -> Any:
    """L9's ASGI twin: a human-listener WebSocket the trusted proxy names a user for is that
    user's, decided by `proxy_username` exactly as over HTTP. Runs inside Channels'
    `AuthMiddlewareStack`, so the proxy's user wins over a session's, as over HTTP."""

    async def authenticate(scope: Any, receive: Any, send: Any) -> None:
        username = proxy_username(scope)
        if username is not None:
            scope = {**scope, "user": ProxyUser(username)}
        await app(scope, receive, send)

    return authenticate


class HumanSessionAuthentication(BaseAuthentication):
    """The signed-in human (session cookie); writes need Django's CSRF token (L2)."""

    def authenticate(self, request: Request) -> tuple[Any, Actor] | None:
        user = getattr(request._request, "user", None)
        if user is None or not user.is_authenticated or not user.is_active:
            return None
        enforce_csrf(request)
        return user, access_human_actor(username=user.get_username())


class HumanActorRequired(BasePermission):
    """L2: an authenticated human of the business; anyone else is not signed in."""

    message = "Sign in as the business's human."
    code = refusals.NOT_AUTHENTICATED

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, Actor) and request.auth.is_human


class TrustedHumanOrigin(BasePermission):
    """L2: writes come from a trusted Origin (production: https only)."""

    message = "Writes must come from a trusted origin."
    code = refusals.ORIGIN_REFUSED

    def has_permission(self, request: Request, view: Any) -> bool:
        origin = request.headers.get("Origin")
        return not is_write(request) or origin in settings.MOSAIC_HUMAN_ORIGINS


class ConsoleSendEnabled(BasePermission):
    """L2: human writes need Console send on; a stop and signing out never do."""

    message = "Sending from the Console is disabled."
    code = refusals.SEND_DISABLED

    def has_permission(self, request: Request, view: Any) -> bool:
        always_allowed = getattr(view, "allowed_without_send", False)
        return not is_write(request) or always_allowed or settings.MOSAIC_CONSOLE_SEND


HUMAN_AUTHENTICATION = (ProxyUserAuthentication, HumanSessionAuthentication)
HUMAN_GATES = (
    HumanActorRequired,
    TrustedHumanOrigin,
    SameOriginFetch,
    JsonBody,
    ConsoleSendEnabled,
)
# Signing in: L2's Origin and Fetch Metadata, no session yet and so no CSRF token.
SIGN_IN_GATES = (TrustedHumanOrigin, SameOriginFetch, JsonBody)
