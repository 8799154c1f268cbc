"""Who may reach the tester's OpenAI-compatible routes (SPEC §6.1, L3, L5).

Their clients are programs — an eval tool, a script on the `openai` client — which send no
Origin and no Fetch Metadata, so L3's proof that a write came from the tester's own page cannot
be asked of them. They prove themselves with a key instead, `Authorization: Bearer` with
MOSAIC_TESTER_API_KEY, which a page elsewhere cannot know. What a browser does send still
counts: a request that says it comes from a page elsewhere (`Sec-Fetch-Site: cross-site` or
`same-site`, an Origin that is not the listener's own) is refused before its key is read. The
rest of L3 holds as on every tester route: no proxy user header, JSON writes. The actor is the
tester, built on its own (L5), and the fence (L4) names the one write.
"""

from __future__ import annotations

import hmac
from typing import Any

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from broker import refusals
from broker.access import access_tester_actor
from broker.actors import Actor
from broker.refusals import Refusal
from chat.gates import JsonBody
from tester.gates import NoProxyUserHeader, TesterActorRequired, TesterFence, TesterPrincipal
from tester.listener import tester_origins

# What a browser says of a request from a page that is not the listener's own.
FOREIGN_FETCH_SITES = frozenset({"cross-site", "same-site"})


def key_matches(authorization: str) -> bool:
    """Whether `Authorization` carries MOSAIC_TESTER_API_KEY as a bearer token; never when no
    key is configured."""
    key = settings.MOSAIC_TESTER_API_KEY
    scheme, _, token = authorization.strip().partition(" ")
    if not key or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), key.encode())


class TesterKeyAuthentication(BaseAuthentication):
    """The tester, for a request with the key (L5: built on its own, `tester-off` while off)."""

    def authenticate(self, request: Request) -> tuple[TesterPrincipal, Actor]:
        if not settings.MOSAIC_TESTER_API_KEY:
            raise Refusal(
                refusals.NOT_AUTHENTICATED,
                "The tester's OpenAI-compatible endpoint has no key: set MOSAIC_TESTER_API_KEY.",
            )
        if not key_matches(request.headers.get("Authorization", "")):
            raise Refusal(
                refusals.NOT_AUTHENTICATED,
                "Incorrect API key provided: send `Authorization: Bearer` with the value of "
                "MOSAIC_TESTER_API_KEY.",
            )
        return TesterPrincipal(), access_tester_actor(business_slug=settings.MOSAIC_TESTER_BUSINESS)

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


class NotFromPageElsewhere(BasePermission):
    """A browser's word that the request comes from a page elsewhere refuses it, every method:
    Fetch Metadata first, then the Origin."""

    message = "The tester's OpenAI-compatible routes refuse requests from other sites' pages."
    code = refusals.FETCH_METADATA_REFUSED

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.headers.get("Sec-Fetch-Site", "").lower() not in FOREIGN_FETCH_SITES


class NoForeignOrigin(BasePermission):
    """An Origin, when a client sends one, is the tester listener's own."""

    message = "The tester's OpenAI-compatible routes refuse requests from other origins."
    code = refusals.ORIGIN_REFUSED

    def has_permission(self, request: Request, view: Any) -> bool:
        origin = request.headers.get("Origin")
        return origin is None or origin in tester_origins()


OPENAI_AUTHENTICATION = (TesterKeyAuthentication,)
# The views authenticate lazily (`tester.openai.views.OpenAIView`): the page checks come
# before the key is read, then the tester's own gates, then L3's JSON.
OPENAI_GATES = (
    NotFromPageElsewhere,
    NoForeignOrigin,
    TesterActorRequired,
    TesterFence,
    NoProxyUserHeader,
    JsonBody,
)
