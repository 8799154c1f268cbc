"""The human listener through its real ASGI application: W4, L1, L2, L6, L9, sign-in."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import override_settings

from broker.models import Message, Project
from tests.support.listener_fixtures import PASSWORD
from tests.support.listeners import HUMAN, ListenerClient, application


@pytest.mark.parametrize("value", ["", "1", "tester"])
def test_w4_human_listener_refuses_tester_header_on_chat_routes(
    human_client: ListenerClient, human_thread_id: int, broker_calls: list[str], value: str
) -> None:
    """W4 (L1): GET and POST chat routes with `X-Mosaic-Tester` answer 403, no broker call."""
    broker_calls.clear()
    for method, path, body in (
        ("GET", "/api/chat/threads", None),
        ("GET", f"/api/chat/threads/{human_thread_id}/messages", None),
        ("POST", f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"}),
        ("POST", "/api/chat/projects", {"name": "x"}),
    ):
        response = human_client.request(method, path, json=body, headers={"X-Mosaic-Tester": value})
        assert (response.status_code, response.json()["error"]) == (
            403,
            "tester-listener-required",
        )
    assert broker_calls == []
    assert not Message.objects.exists()


@pytest.mark.parametrize("path", ["/ws/trail/", "/ws/chat/threads/1/", "/ws/anything/"])
def test_w4_human_listener_closes_websocket_with_tester_header(business, path: str) -> None:
    """W4 (L1): a WebSocket carrying `X-Mosaic-Tester` is closed before it is accepted."""

    async def connect() -> tuple[bool, int | None]:
        communicator = WebsocketCommunicator(
            application(HUMAN),
            path,
            headers=[
                (b"origin", b"http://127.0.0.1:7332"),
                (b"host", b"127.0.0.1:7332"),
                (b"x-mosaic-tester", b""),
            ],
        )
        connected, code = await communicator.connect()
        await communicator.disconnect()
        return connected, code

    connected, code = async_to_sync(connect)()
    assert (connected, code) == (False, 4403)


def test_human_listener_without_sign_in_is_not_authenticated(
    anonymous_client: ListenerClient, broker_calls: list[str]
) -> None:
    """L2: every chat route needs a signed-in human (401 `not-authenticated`)."""
    for method, path in (
        ("GET", "/api/chat/projects"),
        ("GET", "/api/chat/threads"),
        ("GET", "/api/messages"),
        ("GET", "/api/trail"),
        ("GET", "/api/inbox"),
        ("POST", "/api/chat/projects"),
        ("POST", "/api/chat/stop"),
    ):
        response = anonymous_client.request(method, path, json={} if method == "POST" else None)
        assert (response.status_code, response.json()["error"]) == (401, "not-authenticated")
    assert broker_calls == []


def test_sign_in_wrong_password_is_not_authenticated(ada: User) -> None:
    client = ListenerClient(HUMAN)
    response = client.post("/api/auth/login", {"username": "ada", "password": "wrong"})
    assert (response.status_code, response.json()["error"]) == (401, "not-authenticated")
    assert "sessionid" not in client.cookies


def test_sign_in_as_user_who_is_no_business_human_is_refused(business) -> None:
    """Staff and other users sign in to admin, not to the chat."""
    User.objects.create_superuser("staff", password=PASSWORD)
    client = ListenerClient(HUMAN)
    response = client.post("/api/auth/login", {"username": "staff", "password": PASSWORD})
    assert (response.status_code, response.json()["error"]) == (401, "not-authenticated")


def test_sign_in_sets_session_and_csrf_cookies(ada: User) -> None:
    client = ListenerClient(HUMAN)
    response = client.post("/api/auth/login", {"username": "ada", "password": PASSWORD})
    assert response.json() == {"user": "ada"}
    assert {"sessionid", "csrftoken"} <= set(client.cookies.keys())


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"Origin": "http://evil.example"}, "origin-refused"),
        ({"Sec-Fetch-Site": "cross-site"}, "fetch-metadata-refused"),
        ({"Content-Type": "text/plain"}, "unsupported-media-type"),
    ],
)
def test_sign_in_needs_origin_and_fetch_metadata(ada: User, headers, code: str) -> None:
    """SPEC §6: sign-in needs no CSRF token but does need L2's Origin and Fetch Metadata."""
    client = ListenerClient(HUMAN)
    response = client.post(
        "/api/auth/login", {"username": "ada", "password": PASSWORD}, headers=headers
    )
    assert response.json()["error"] == code
    assert "sessionid" not in client.cookies


def test_sign_out_ends_access(human_client: ListenerClient) -> None:
    assert human_client.post("/api/auth/logout", {}).status_code == 200
    response = human_client.get("/api/chat/projects")
    assert (response.status_code, response.json()["error"]) == (401, "not-authenticated")


@override_settings(MOSAIC_CONSOLE_SEND=False)
def test_console_send_off_refuses_writes_but_not_stop(human_client: ListenerClient) -> None:
    """L2: with Console send off, writes are `send-disabled`; the stop still works."""
    response = human_client.post("/api/chat/projects", {"name": "x"})
    assert (response.status_code, response.json()["error"]) == (403, "send-disabled")
    assert not Project.objects.exists()
    stop = human_client.post("/api/chat/stop", {})
    assert stop.json()["error"] == "not-held"


def test_every_chat_request_logs_one_line_with_user(
    human_client: ListenerClient, caplog: pytest.LogCaptureFixture
) -> None:
    """L6: one line per chat request, naming the human."""
    caplog.set_level(logging.INFO, logger="mosaic.requests")
    human_client.get("/api/chat/projects")
    human_client.post("/api/chat/projects", {"name": "x"})
    lines = [r.getMessage() for r in caplog.records if r.name == "mosaic.requests"]
    assert lines == [
        'chat GET /api/chat/projects 200 user="ada"',
        'chat POST /api/chat/projects 201 user="ada"',
    ]


@override_settings(
    MOSAIC_PROXY_USER_HEADER="X-Auth-User",
    MOSAIC_TRUSTED_PROXIES=["127.0.0.1"],
    MOSAIC_PROXY_SECRET="proxy-secret",
)
def test_proxy_header_authenticates_when_configured(ada: User) -> None:
    """L9: a trusted proxy's configured header names the human."""
    client = ListenerClient(HUMAN)
    response = client.get(
        "/api/chat/projects",
        headers={"X-Auth-User": "ada", "X-Mosaic-Proxy-Secret": "proxy-secret"},
    )
    assert response.status_code == 200


@override_settings(
    MOSAIC_PROXY_USER_HEADER="X-Auth-User",
    MOSAIC_TRUSTED_PROXIES=["10.0.0.1"],
    MOSAIC_PROXY_SECRET="proxy-secret",
)
def test_proxy_header_from_untrusted_address_is_ignored(ada: User) -> None:
    client = ListenerClient(HUMAN)
    response = client.get(
        "/api/chat/projects",
        headers={"X-Auth-User": "ada", "X-Mosaic-Proxy-Secret": "proxy-secret"},
    )
    assert response.status_code == 401


def test_proxy_header_when_not_configured_is_ignored(ada: User) -> None:
    """L9: off by default; `X-User` authenticates nobody."""
    client = ListenerClient(HUMAN)
    for name in ("X-User", "X-Auth-User", "Remote-User"):
        assert client.get("/api/chat/projects", headers={name: "ada"}).status_code == 401
