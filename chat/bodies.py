"""Request bodies Django cannot parse: a malformed multipart body, a form with too many fields
or files, a multipart parse that stalls, a body past Django's own size limit.

Django parses a form body only when something reads `request.POST`: the CSRF check does, on
admin's sign-in, on a page's POST, and on a chat write of a signed-in human (L2). What it
raises is the client's mistake, or a probe's, and is answered as one: 400 `invalid` (413
`too-large` for the size), logged as one line without a traceback (`mosaic.logs`). This module
imports nothing but Django's exceptions, so the logging configuration can name it before the
apps are loaded.
"""

from __future__ import annotations

from django.core.exceptions import (
    RequestDataTooBig,
    SuspiciousMultipartForm,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http.multipartparser import MultiPartParserError

from broker import refusals

# Each is raised by Django's body parse. Django logs a MultiPartParserError on `django.request`
# and the others, suspicious operations, on `django.security.<class name>`.
UNREADABLE_BODY: tuple[type[Exception], ...] = (
    MultiPartParserError,
    SuspiciousMultipartForm,
    TooManyFieldsSent,
    TooManyFilesSent,
    RequestDataTooBig,
)

UNREADABLE = "The request body could not be parsed; writes are JSON."
TOO_LARGE = "The request body is too large."


def unreadable_body_refusal(exc: BaseException | None) -> tuple[str, str] | None:
    """The refusal code and sentence of a body Django could not parse; None for any other
    exception."""
    if isinstance(exc, RequestDataTooBig):
        return refusals.TOO_LARGE, TOO_LARGE
    if isinstance(exc, UNREADABLE_BODY):
        return refusals.INVALID, UNREADABLE
    return None
