"""The request gates both listeners share, and who a trusted proxy names (L9).

Permission classes are coarse and tiny: each checks one thing about the request and carries its
own `message` and `code`. Ownership is never decided here — that is the broker's (R1). Each
listener's own gates are its package's (`human.gates`, `tester.gates`).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from broker import refusals


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


# --- who a trusted proxy names (L9): read by chat's views and sockets, for the human ------


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
