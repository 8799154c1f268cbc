"""The human listener's request gates (L2, L9), and the two both listeners share.

Permission classes are coarse and tiny: each checks one thing about the request and carries its
own `message` and `code`. Ownership is never decided here — that is the broker's (R1).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.middleware.csrf import CsrfViewMiddleware
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from broker import refusals
from broker.access import access_human_actor
from broker.actors import Actor
from broker.refusals import Refusal


def is_write(request: Request) -> bool:
    return request.method not in SAFE_METHODS


# --- shared by both listeners ------------------------------------------------------------


class DenyAll(BasePermission):
    """A view bound to no listener refuses everything."""

    message = "This route is not served here."
    code = refusals.NOT_FOUND

    def has_permission(self, request: Request, view: Any) -> bool:
        return False


class SameOriginFetch(BasePermission):
    """Writes carry `Sec-Fetch-Site: same-origin` (L2, L3)."""

    message = "Writes must come from this listener's own pages (Sec-Fetch-Site: same-origin)."
    code = refusals.FETCH_METADATA_REFUSED

    def has_permission(self, request: Request, view: Any) -> bool:
        return not is_write(request) or request.headers.get("Sec-Fetch-Site") == "same-origin"


class JsonBody(BasePermission):
    """Writes are `Content-Type: application/json` (L2, L3)."""

    message = "Writes must be JSON (Content-Type: application/json)."
    code = refusals.UNSUPPORTED_MEDIA_TYPE

    def has_permission(self, request: Request, view: Any) -> bool:
        media_type = request.content_type.split(";", 1)[0].strip().lower()
        return not is_write(request) or media_type == "application/json"


# --- the human listener ------------------------------------------------------------------


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


@dataclass(frozen=True)
class ProxyUser:
    """The user a trusted proxy named; the actor is what the views use."""

    username: str
    is_authenticated: bool = True
    is_active: bool = True

    def get_username(self) -> str:
        return self.username


# L9: the header that proves a request came through the trusted proxy (MOSAIC_PROXY_SECRET).
PROXY_SECRET_HEADER = "X-Mosaic-Proxy-Secret"
_PROXY_SECRET_NAME = PROXY_SECRET_HEADER.lower().encode("latin-1")


def proxy_username(scope: Any) -> str | None:
    """L9: the username the trusted proxy named in an ASGI scope (HTTP or WebSocket), or None.

    The one decision for both transports. Only when MOSAIC_PROXY_USER_HEADER and
    MOSAIC_PROXY_SECRET are both configured, only from an address in MOSAIC_TRUSTED_PROXIES,
    only with the proxy's secret in `X-Mosaic-Proxy-Secret`, and only when each header occurs
    exactly once under exactly its name: underscore spellings and duplicates authenticate nobody.
    """
    name = settings.MOSAIC_PROXY_USER_HEADER.strip().lower().encode("latin-1")
    secret = settings.MOSAIC_PROXY_SECRET.encode()
    # No secret fails closed: settings and a system check refuse to start without one, but
    # neither runs where settings are changed at runtime.
    if not name or not secret or scope is None:
        return None
    client = scope.get("client") or ("", 0)
    if client[0] not in settings.MOSAIC_TRUSTED_PROXIES:
        return None
    headers = scope.get("headers", [])
    values = [value for key, value in headers if key.lower() == name]
    proofs = [value for key, value in headers if key.lower() == _PROXY_SECRET_NAME]
    if len(values) != 1 or len(proofs) != 1 or not hmac.compare_digest(proofs[0], secret):
        return None
    return str(values[0].decode("latin-1").strip())


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
