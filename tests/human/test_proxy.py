"""L9 over both transports: the trusted proxy's user header, with its shared secret, decided by
one function for HTTP and WebSocket alike; CSRF for proxied writes; the settings and the system
check that refuse a proxy header without a secret."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.checks import run_checks
from django.test import override_settings

from broker import actions
from broker.actors import Actor
from broker.models import Business, Project
from chat.errors import close_code
from tests.broker import factories
from tests.chat.test_consumers import frames, socket
from tests.support.listeners import HUMAN, ListenerClient, raw_request

ROOT = Path(__file__).resolve().parents[2]
SECRET = "proxy-secret-of-the-deployment"
PROXIED = {
    "MOSAIC_PROXY_USER_HEADER": "X-Auth-User",
    "MOSAIC_TRUSTED_PROXIES": ["127.0.0.1"],
    "MOSAIC_PROXY_SECRET": SECRET,
}
NAMED = [(b"x-auth-user", b"ada"), (b"x-mosaic-proxy-secret", SECRET.encode())]

# (headers the request carries beyond Host/Origin, whether the proxy's user is believed)
CASES = [
    (NAMED, True),
    ([(b"x-auth-user", b"ada")], False),
    ([(b"x-auth-user", b"ada"), (b"x-mosaic-proxy-secret", b"guessed")], False),
    ([(b"x-auth-user", b"ada"), (b"x-mosaic-proxy-secret", b"")], False),
    ([*NAMED, (b"x-mosaic-proxy-secret", SECRET.encode())], False),
    ([(b"x_mosaic_proxy_secret", SECRET.encode()), (b"x-auth-user", b"ada")], False),
    ([*NAMED, (b"x-auth-user", b"ada")], False),
    ([(b"x_auth_user", b"ada"), (b"x-mosaic-proxy-secret", SECRET.encode())], False),
]
CASE_IDS = [
    "user-and-secret",
    "no-secret",
    "wrong-secret",
    "empty-secret",
    "duplicate-secret",
    "secret-underscores",
    "duplicate-user",
    "user-underscores",
]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ada(business: Business) -> User:
    return User.objects.create_user("ada", password="correct horse battery")


def http_status(headers: list[tuple[bytes, bytes]]) -> int:
    return raw_request(
        HUMAN, "GET", "/api/chat/projects", [(b"host", b"127.0.0.1:7332"), *headers]
    ).status


def socket_answer(headers: list[tuple[bytes, bytes]]) -> tuple[bool, int | None]:
    async def scenario() -> tuple[bool, int | None]:
        communicator = socket(HUMAN, "/ws/trail/", extra=headers)
        connected = await communicator.connect()
        if connected[0]:
            await communicator.disconnect()
        return connected

    return async_to_sync(scenario)()


@override_settings(**PROXIED)
@pytest.mark.parametrize(("headers", "believed"), CASES, ids=CASE_IDS)
def test_proxy_header_on_http_and_socket_decides_alike(ada: User, headers, believed) -> None:
    """L9, SPEC STYLE "every HTTP guard needs its ASGI twin": HTTP and the WebSocket believe
    the proxy under exactly the same conditions, the shared secret among them (item 9, 10)."""
    expected_http = 200 if believed else 401
    expected_socket = (True, None) if believed else (False, close_code("not-authenticated"))
    assert (http_status(headers), socket_answer(headers)) == (expected_http, expected_socket)


@override_settings(**{**PROXIED, "MOSAIC_TRUSTED_PROXIES": ["10.0.0.1"]})
def test_proxy_header_from_untrusted_address_opens_no_socket(ada: User) -> None:
    """L9: the secret does not make an untrusted address a proxy, on either transport."""
    assert (http_status(NAMED), socket_answer(NAMED)) == (
        401,
        (False, close_code("not-authenticated")),
    )


@override_settings(**{**PROXIED, "MOSAIC_PROXY_SECRET": ""})
def test_proxy_header_with_no_secret_configured_authenticates_nobody(ada: User) -> None:
    """L9 fails closed at runtime: without a configured secret, nobody is the proxy's user,
    whatever the request sends (settings and the system check refuse this configuration)."""
    headers = [(b"x-auth-user", b"ada"), (b"x-mosaic-proxy-secret", b"")]
    assert (http_status(headers), socket_answer(headers)) == (
        401,
        (False, close_code("not-authenticated")),
    )


@override_settings(**PROXIED)
def test_proxied_human_socket_streams_the_humans_trail(ada: User, business: Business) -> None:
    """L9 on WebSockets: the Console under a proxy goes live, as the named human (item 9)."""
    human = Actor.human(business_id=business.pk, username="ada")
    thread = factories.thread(human, factories.project(human), "h")
    actions.send_to_thread(human, thread_id=thread.pk, body="through the proxy")

    async def scenario() -> list[dict[str, Any]]:
        communicator = socket(HUMAN, "/ws/trail/", extra=NAMED)
        assert (await communicator.connect())[0]
        got = await frames(communicator, 1)
        await communicator.disconnect()
        return got

    [frame] = async_to_sync(scenario)()
    assert frame["row"]["text"] == "human to assistant: through the proxy"


def proxied_client() -> ListenerClient:
    """The Console's browser behind the proxy: the page gave it the CSRF cookie."""
    client = ListenerClient(HUMAN)
    page = client.get("/", headers={"X-Auth-User": "ada", "X-Mosaic-Proxy-Secret": SECRET})
    assert page.status_code == 200
    assert client.cookies.get("csrftoken")
    return client


@override_settings(**PROXIED)
def test_proxied_write_without_csrf_token_is_refused(ada: User) -> None:
    """L2 for proxied writes: Django's CSRF token is required, as for a session (item 10)."""
    client = proxied_client()
    headers = {"X-Auth-User": "ada", "X-Mosaic-Proxy-Secret": SECRET, "X-CSRFToken": None}
    response = client.post("/api/chat/projects", {"name": "p"}, headers=headers)
    assert (response.status_code, response.json()["error"]) == (403, "csrf-failed")
    assert not Project.objects.exists()


@override_settings(**PROXIED)
def test_proxied_write_with_csrf_token_is_accepted(ada: User) -> None:
    client = proxied_client()
    headers = {"X-Auth-User": "ada", "X-Mosaic-Proxy-Secret": SECRET}
    response = client.post("/api/chat/projects", {"name": "p"}, headers=headers)
    assert response.status_code == 201, response.text


@override_settings(MOSAIC_PROXY_USER_HEADER="X-Auth-User", MOSAIC_PROXY_SECRET="")
def test_check_proxy_header_without_secret_reports_e010() -> None:
    """`mosaic.E010`: a proxy user header needs the proxy's shared secret."""
    assert [message.id for message in run_checks() if message.id.startswith("mosaic.")] == [
        "mosaic.E010"
    ]


@override_settings(MOSAIC_PROXY_USER_HEADER="X-Auth-User", MOSAIC_PROXY_SECRET=SECRET)
def test_check_proxy_header_with_secret_reports_nothing() -> None:
    assert [message.id for message in run_checks() if message.id.startswith("mosaic.")] == []


def test_settings_with_proxy_header_and_no_secret_refuse_to_start(tmp_path: Path) -> None:
    """L9: the settings themselves refuse to start (`ImproperlyConfigured`), as no check runs
    under the ASGI server."""
    import os

    environment = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "MOSAIC_PROXY_USER_HEADER": "X-Auth-User",
        "MOSAIC_TRUSTED_PROXIES": "127.0.0.1",
    }
    environment.pop("MOSAIC_PROXY_SECRET", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "mosaic.E010" in result.stderr
