"""The tester listener's gates as units (L3), on requests that no ASGI server handed over."""

from __future__ import annotations

import pytest
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from tester.gates import NoProxyUserHeader


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({}, True),
        ({"HTTP_X_USER": "ada"}, False),
    ],
    ids=["no-proxy-header", "x-user"],
)
def test_no_proxy_user_header_without_asgi_scope_reads_request_headers(
    headers: dict[str, str], allowed: bool
) -> None:
    """L3: without a server scope the gate reads the request's own headers, and still refuses
    a proxy user header."""
    request = Request(APIRequestFactory().post("/api/chat/projects", **headers))
    assert not hasattr(request._request, "scope")
    assert NoProxyUserHeader().has_permission(request, view=None) is allowed
