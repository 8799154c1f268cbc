"""Refusal codes to HTTP statuses, in one table, and the one error body: {"error", "detail"}.

Every failure of the chat API leaves through `exception_handler` or `error_response`: broker
refusals, the listener gates' refusals, DRF's own (parse errors, media types, methods), a body
Django could not parse (`chat.bodies`), a database that is down. Nothing is answered with a
bare 500.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from broker import refusals
from broker.refusals import Refusal
from chat.bodies import unreadable_body_refusal

logger = logging.getLogger("mosaic.chat")

METHOD_NOT_ALLOWED = "method-not-allowed"

STATUS: dict[str, int] = {
    refusals.INVALID: 400,
    refusals.HOST_REFUSED: 400,
    refusals.NOT_AUTHENTICATED: 401,
    refusals.THREAD_NOT_OWNED: 403,
    refusals.TESTER_OFF: 403,
    refusals.TESTER_REQUIRED: 403,
    refusals.TESTER_REFUSED: 403,
    refusals.TESTER_LISTENER_REQUIRED: 403,
    refusals.ORIGIN_REFUSED: 403,
    refusals.FETCH_METADATA_REFUSED: 403,
    refusals.CSRF_FAILED: 403,
    refusals.PROXY_HEADER_REFUSED: 403,
    refusals.MESSAGE_SENDER_REFUSED: 403,
    refusals.MESSAGE_RECIPIENT_REFUSED: 403,
    refusals.TESTER_THREAD_HUMAN: 403,
    refusals.TESTER_REPLY_REQUIRED: 403,
    refusals.SEND_DISABLED: 403,
    refusals.NOT_FOUND: 404,
    METHOD_NOT_ALLOWED: 405,
    refusals.THREAD_EXISTS: 409,
    refusals.PROJECT_EXISTS: 409,
    refusals.NOT_HELD: 409,
    refusals.CLAIM_ENDED: 409,
    # A run's verb (R23): only a model is ever told it, as a step's result.
    refusals.CONSULT_TOO_DEEP: 409,
    # R24: a turn is versioned in place only once its reply has ended.
    refusals.TURN_IN_PROGRESS: 409,
    refusals.TOO_LARGE: 413,
    refusals.UNSUPPORTED_MEDIA_TYPE: 415,
    refusals.IDEMPOTENCY_KEY_REUSED: 422,
    refusals.TOO_MANY_REQUESTS: 429,
    refusals.UNAVAILABLE: 503,
    # Configuration refusals never reach a request (no listener starts on them); listed so
    # the table stays total over the broker's codes.
    refusals.INVALID_BUSINESS: 500,
    refusals.INVALID_MESSAGING: 500,
}

# DRF's own exceptions, by class, to our codes.
_DRF_CODES: tuple[tuple[type[exceptions.APIException], str], ...] = (
    (exceptions.NotAuthenticated, refusals.NOT_AUTHENTICATED),
    (exceptions.AuthenticationFailed, refusals.NOT_AUTHENTICATED),
    (exceptions.ParseError, refusals.INVALID),
    (exceptions.ValidationError, refusals.INVALID),
    (exceptions.UnsupportedMediaType, refusals.UNSUPPORTED_MEDIA_TYPE),
    (exceptions.MethodNotAllowed, METHOD_NOT_ALLOWED),
    (exceptions.NotFound, refusals.NOT_FOUND),
    (exceptions.NotAcceptable, refusals.INVALID),
    (exceptions.Throttled, refusals.TOO_MANY_REQUESTS),
)


def close_code(code: str) -> int:
    """The WebSocket close code of a refusal: 4000 plus its HTTP status (4403, 4404, …)."""
    return 4000 + STATUS[code]


def body(code: str, detail: str) -> dict[str, str]:
    return {"error": code, "detail": detail}


# Seconds a client answered `unavailable` waits before retrying: an outage's 503 and an
# overloaded server's alike (a queue that stayed full drains within about a second).
UNAVAILABLE_RETRY_AFTER = "1"


def error_response(code: str, detail: str) -> JsonResponse:
    """The error answer outside DRF (ASGI gates, Django's 404 and 500 handlers)."""
    return JsonResponse(body(code, detail), status=STATUS[code])


def _code_and_detail(exc: Exception) -> tuple[str, str] | None:
    if isinstance(exc, Refusal):
        return exc.code, exc.detail
    if isinstance(exc, Http404):
        return refusals.NOT_FOUND, "Not found."
    if isinstance(exc, exceptions.PermissionDenied):
        # Every gate carries its own code (a test holds each one to this table); a denial
        # without one is a bug, left to surface rather than dressed as some refusal.
        code = exc.get_codes()
        if isinstance(code, str) and code in STATUS:
            return code, str(exc.detail)
        return None
    for kind, code in _DRF_CODES:
        if isinstance(exc, kind):
            return code, _sentence(exc)
    unreadable = unreadable_body_refusal(exc)
    if unreadable is not None:
        return unreadable
    if isinstance(exc, (OperationalError, InterfaceError)):
        logger.warning("database unavailable: %s", exc.__class__.__name__)
        return refusals.UNAVAILABLE, "The service is unavailable; retry shortly."
    if isinstance(exc, DatabaseError):
        logger.exception("database error")
        return refusals.UNAVAILABLE, "The service is unavailable; retry shortly."
    return None


def _sentence(exc: exceptions.APIException) -> str:
    detail: Any = exc.detail
    if isinstance(detail, dict):
        field, problems = next(iter(detail.items()), ("body", ["is invalid"]))
        problem = problems[0] if isinstance(problems, list) and problems else problems
        return f"{field}: {problem}"
    if isinstance(detail, list):
        return str(detail[0]) if detail else "Invalid request."
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler: every failure becomes {"error", "detail"} with its status."""
    found = _code_and_detail(exc)
    if found is None:
        return None
    code, detail = found
    request = context.get("request")
    if request is not None and unreadable_body_refusal(exc) is not None:
        # As Django's own handler does: the body reads as empty from now on instead of failing
        # again, so that the request's line can still name its user (L6).
        request._request._mark_post_parse_error()
    set_rollback()
    headers = {}
    if code == refusals.UNAVAILABLE:
        headers["Retry-After"] = UNAVAILABLE_RETRY_AFTER
    if isinstance(exc, exceptions.Throttled):
        headers["Retry-After"] = retry_after(exc)
    return Response(body(code, detail), status=STATUS[code], headers=headers)


def retry_after(throttled: exceptions.Throttled) -> str:
    """The Retry-After of a throttled request: whole seconds, at least one."""
    # DRF sets `wait` on Throttled; its type stubs do not declare it.
    wait = getattr(throttled, "wait", None) or 1
    return str(max(1, math.ceil(wait)))
