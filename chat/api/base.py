"""The base of every chat API view: parse, call one broker function, serialise.

Views are shared by both listeners; each listener's urlconf binds its own authentication and
gates (`as_view(authentication_classes=…, permission_classes=…)`). A view bound to neither
refuses everything. Every request logs one line naming its user (L6), and every chat write
honours an Idempotency-Key (R21).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker import refusals
from broker.actors import Actor
from broker.idempotency import remember_answer
from broker.models import Via
from broker.refusals import Refusal
from chat.gates import DenyAll

# The Console marks its own sends with this header (`console`); any other client is `api`.
VIA_HEADER = "X-Mosaic-Via"


class ChatView(APIView):
    authentication_classes: Any = ()
    permission_classes: Any = (DenyAll,)

    def actor(self) -> Actor:
        actor = self.request.auth
        if not isinstance(actor, Actor):
            raise Refusal(refusals.NOT_AUTHENTICATED, "Sign in first.")
        return actor

    def via(self) -> Via:
        """The channel of this request's writes, as the client says: a label, never a right."""
        return Via.CONSOLE if self.request.headers.get(VIA_HEADER) == Via.CONSOLE else Via.API

    def answer_once(self, request: Request, write: Callable[[], Response]) -> Response:
        """R21: with an Idempotency-Key, a repeated write returns its first answer."""
        key = request.headers.get("Idempotency-Key")
        if key is None:
            return write()
        asked = json.dumps([request.path, request.data], sort_keys=True, separators=(",", ":"))
        answer = remember_answer(
            self.actor(),
            key=key,
            fingerprint=hashlib.sha256(asked.encode()).hexdigest(),
            produce=lambda: _as_answer(write()),
        )
        return Response(answer["body"], status=answer["status"])

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        # L6: the request's one line names its user. The view names it on the request; the
        # site's middleware notes it for the listener's edge, which writes the line once the
        # answer is sent.
        request._request.chat_user = _user_of(request)  # type: ignore[attr-defined]
        return response


def _as_answer(response: Response) -> dict[str, Any]:
    # The serialised data round-trips through JSON so the stored answer equals the sent one.
    return {
        "status": response.status_code,
        "body": json.loads(json.dumps(response.data, default=str)),
    }


def _user_of(request: Request) -> str:
    """L6: the username, `tester`, or empty when nobody was authenticated."""
    if getattr(request._request, "listener", "human") == "tester":
        return "tester"
    try:
        actor = request.auth
    except (Refusal, DatabaseError):
        # Authentication failed and the view has answered (a refusal, or 503 `unavailable`);
        # the log line must not fail the answer by authenticating again.
        return ""
    return actor.username if isinstance(actor, Actor) and actor.is_human else ""
