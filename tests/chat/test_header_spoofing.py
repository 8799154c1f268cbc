"""Header spoofing through raw ASGI scopes (L1, L3, L8, L9): underscore and case variants and
duplicates, which HTTP clients would normalise before they reached the listener."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from broker.models import Project
from tests.support.listeners import HUMAN, TESTER, raw_request

BODY = json.dumps({"name": "spoofed"}).encode()


def human_write_headers(client) -> list[tuple[bytes, bytes]]:
    token = client.cookies["csrftoken"]
    session = client.cookies["sessionid"]
    return [
        (b"host", b"127.0.0.1:7332"),
        (b"origin", b"http://127.0.0.1:7332"),
        (b"sec-fetch-site", b"same-origin"),
        (b"content-type", b"application/json"),
        (b"x-csrftoken", token.encode()),
        (b"cookie", f"csrftoken={token}; sessionid={session}".encode()),
    ]


TESTER_WRITE = [
    (b"host", b"127.0.0.1:7333"),
    (b"origin", b"http://127.0.0.1:7333"),
    (b"sec-fetch-site", b"same-origin"),
    (b"content-type", b"application/json"),
]


def test_raw_human_write_is_accepted(human_client) -> None:
    """The baseline the variants below start from."""
    answer = raw_request(
        HUMAN, "POST", "/api/chat/projects", human_write_headers(human_client), BODY
    )
    assert answer.status == 201


@pytest.mark.parametrize(
    "name",
    [
        b"x-mosaic-tester",
        b"X-Mosaic-Tester",
        b"x_mosaic_tester",
        b"X_MOSAIC_TESTER",
        b" x-mosaic-tester",
    ],
)
def test_tester_header_spellings_on_human_listener_are_refused(
    human_client, broker_calls, name: bytes
) -> None:
    """L1: any spelling of the tester header, any value, refuses before routing."""
    broker_calls.clear()
    headers = [*human_write_headers(human_client), (name, b"")]
    answer = raw_request(HUMAN, "POST", "/api/chat/projects", headers, BODY)
    assert (answer.status, answer.json()["error"]) == (403, "tester-listener-required")
    assert broker_calls == []
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    "extra",
    [
        [(b"origin", b"http://evil.example")],  # a second Origin
        [(b"sec-fetch-site", b"cross-site")],  # a second Fetch Metadata
    ],
    ids=["duplicate-origin", "duplicate-fetch-site"],
)
def test_duplicate_write_headers_on_human_listener_are_refused(human_client, extra) -> None:
    answer = raw_request(
        HUMAN, "POST", "/api/chat/projects", [*human_write_headers(human_client), *extra], BODY
    )
    assert answer.status == 403
    assert not Project.objects.exists()


@pytest.mark.parametrize(
    "proxy",
    [
        [(b"x-user", b"ada")],
        [(b"x_user", b"ada")],
        [(b"X-USER", b"ada")],
        [(b"x-auth-user", b"ada")],
        [(b"x_auth_user", b"ada")],
        [(b"x-mosaic-proxy-secret", b"proxy-secret")],
        [(b"X_Mosaic_Proxy_Secret", b"proxy-secret")],
    ],
    ids=[
        "x-user",
        "x_user",
        "upper",
        "configured",
        "configured-underscore",
        "proxy-secret",
        "proxy-secret-underscore",
    ],
)
@override_settings(MOSAIC_PROXY_USER_HEADER="X-Auth-User")
def test_proxy_header_spellings_on_tester_listener_are_refused(
    business, broker_calls, proxy
) -> None:
    """L3: no proxy user header, nor the proxy's secret, under any spelling, reaches a tester
    write."""
    answer = raw_request(TESTER, "POST", "/api/chat/projects", [*TESTER_WRITE, *proxy], BODY)
    assert (answer.status, answer.json()["error"]) == (403, "proxy-header-refused")
    assert broker_calls == []


@override_settings(
    MOSAIC_PROXY_USER_HEADER="X-Auth-User",
    MOSAIC_TRUSTED_PROXIES=["127.0.0.1"],
    MOSAIC_PROXY_SECRET="proxy-secret",
)
@pytest.mark.parametrize(
    ("proxy", "status"),
    [
        ([(b"x-auth-user", b"ada")], 200),
        ([(b"X-Auth-User", b"ada")], 200),  # HTTP names are case-insensitive
        ([(b"x_auth_user", b"ada")], 401),
        ([(b"x-auth_user", b"ada")], 401),
        ([(b"x-auth-user", b"ada"), (b"x-auth-user", b"ada")], 401),
        ([(b"x-auth-user", b"ada"), (b"x-auth-user", b"grace")], 401),
        ([(b"x-user", b"ada")], 401),
    ],
    ids=["exact", "case", "underscores", "mixed", "duplicate", "conflicting", "other-name"],
)
def test_proxy_header_look_alikes_authenticate_nobody(business, proxy, status: int) -> None:
    """L9: read by its exact configured name only; look-alikes and duplicates never count."""
    from django.contrib.auth.models import User

    User.objects.create_user("ada", password="x" * 12)
    headers = [(b"host", b"127.0.0.1:7332"), (b"x-mosaic-proxy-secret", b"proxy-secret"), *proxy]
    answer = raw_request(HUMAN, "GET", "/api/chat/projects", headers)
    assert answer.status == status


@pytest.mark.parametrize(
    "hosts",
    [
        [(b"host", b"127.0.0.1:7333"), (b"host", b"evil.example")],
        [(b"host", b"evil.example"), (b"host", b"127.0.0.1:7333")],
        [],
    ],
    ids=["duplicate-first-good", "duplicate-first-bad", "missing"],
)
def test_tester_listener_duplicate_or_missing_host_is_refused(business, hosts) -> None:
    """L8: exactly one Host, exactly `127.0.0.1:PORT`."""
    headers = [*hosts, *[(n, v) for n, v in TESTER_WRITE if n != b"host"]]
    answer = raw_request(TESTER, "POST", "/api/chat/projects", headers, BODY)
    assert (answer.status, answer.json()["error"]) == (400, "host-refused")
