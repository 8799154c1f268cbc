"""Shared pieces of the OpenAPI description: list parameters and the error answers."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse

from chat.api.shapes import ErrorOut

LIST_PARAMETERS = [
    OpenApiParameter("limit", int, description="Page size: 1–500, default 100."),
    OpenApiParameter("after", int, description="The first rows with a greater id."),
    OpenApiParameter("before", int, description="The last rows with a smaller id."),
]

_ERROR = OpenApiResponse(ErrorOut, description='{"error": code, "detail": sentence}')

ERRORS = {
    400: _ERROR,
    401: _ERROR,
    403: _ERROR,
    404: _ERROR,
    405: _ERROR,
    409: _ERROR,
    413: _ERROR,
    415: _ERROR,
    422: _ERROR,
    429: _ERROR,
    503: _ERROR,
}
