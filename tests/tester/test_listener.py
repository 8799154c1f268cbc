"""The tester listener end to end through its real ASGI application: W1–W3, L3, L5, L8."""

from __future__ import annotations

import logging

import pytest

from broker.models import Business, Message, Thread
from tests.support.listeners import ListenerClient


def test_w1_tester_chat_end_to_end_is_recorded_as_tester(
    tester_client: ListenerClient, human_client: ListenerClient, caplog: pytest.LogCaptureFixture
) -> None:
    """W1: create project and thread, send, open, read — each 2xx, owner tester, logged."""
    caplog.set_level(logging.INFO, logger="mosaic.requests")
    project = tester_client.post("/api/chat/projects", {"name": "tester's"})
    assert project.status_code == 201
    thread = tester_client.post(
        "/api/chat/threads", {"project": project.json()["project"]["id"], "name": "probe"}
    )
    assert thread.status_code == 201
    assert thread.json()["thread"]["owner"] == "tester"
    thread_id = thread.json()["thread"]["id"]
    sent = tester_client.post(f"/api/chat/threads/{thread_id}/messages", {"body": "hello"})
    assert sent.status_code == 201
    assert sent.json()["request"] is None
    assert (sent.json()["message"]["from_role"], sent.json()["message"]["from_run"]) == (
        "tester",
        "tester-cli",
    )
    opened = tester_client.post(f"/api/chat/threads/{thread_id}/open", {})
    assert opened.status_code == 200
    assert opened.json()["open"]["by"] == "tester"
    read = tester_client.get(f"/api/chat/threads/{thread_id}/messages")
    assert read.status_code == 200
    assert [m["body"] for m in read.json()["messages"]] == ["hello"]
    tester_lines = [r.getMessage() for r in caplog.records if r.name == "mosaic.requests"]
    assert len(tester_lines) == 5
    assert all(line.endswith('user="tester"') for line in tester_lines)
    assert human_client.get("/api/chat/threads").json()["threads"] == []


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"Origin": "http://evil.example"}, "origin-refused"),
        ({"Sec-Fetch-Site": "cross-site"}, "fetch-metadata-refused"),
        ({"Content-Type": "text/plain"}, "unsupported-media-type"),
        ({"X-User": "ada"}, "proxy-header-refused"),
    ],
    ids=["origin", "fetch-metadata", "text-plain", "proxy-header"],
)
def test_w2_tester_write_refusals_never_call_broker(
    tester_client: ListenerClient,
    tester_thread_id: int,
    broker_calls: list[str],
    headers: dict[str, str],
    code: str,
) -> None:
    """W2: each refused, 403/415 with its code, and the broker never called."""
    broker_calls.clear()
    response = tester_client.post(
        f"/api/chat/threads/{tester_thread_id}/messages", {"body": "hi"}, headers=headers
    )
    assert response.json()["error"] == code
    assert response.status_code in (403, 415)
    assert broker_calls == []
    assert not Message.objects.exists()


def test_w3_human_thread_through_tester_chat_is_not_owned(
    tester_client: ListenerClient, human_thread_id: int
) -> None:
    """W3: the human's thread id on the tester listener: 403 `thread-not-owned`, every verb."""
    for method, path, body in (
        ("GET", f"/api/chat/threads/{human_thread_id}/messages", None),
        ("POST", f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"}),
        ("POST", f"/api/chat/threads/{human_thread_id}/open", {}),
    ):
        response = tester_client.request(method, path, json=body)
        assert (response.status_code, response.json()["error"]) == (403, "thread-not-owned")


def test_w3_tester_off_refuses_every_chat_route(
    business: Business, tester_client: ListenerClient, broker_calls: list[str]
) -> None:
    """W3: while the business has the tester off, the chat answers 403 `tester-off`."""
    business.tester_enabled = False
    business.save()
    for method, path, body in (
        ("GET", "/api/chat/projects", None),
        ("POST", "/api/chat/projects", {"name": "x"}),
        ("GET", "/api/chat/threads", None),
        ("GET", "/api/trail", None),
    ):
        response = tester_client.request(method, path, json=body)
        assert (response.status_code, response.json()["error"]) == (403, "tester-off")
    assert broker_calls == []


def test_tester_listener_ignores_human_session_cookie(
    human_client: ListenerClient, tester_client: ListenerClient, human_thread_id: int
) -> None:
    """L5: cookies are not port-bound; with the human's session the tester port is the tester."""
    tester_client.cookies.update(human_client.cookies)
    threads = tester_client.get("/api/chat/threads")
    assert threads.json()["threads"] == []
    created = tester_client.post(
        "/api/chat/threads",
        {"project": Thread.objects.get().project_id, "name": "with cookie"},
    )
    assert created.json()["thread"]["owner"] == "tester"


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:7333", 200),
        ("localhost:7333", 302),
        ("evil.example:7333", 400),
        ("127.0.0.1:7332", 400),
        ("127.0.0.1", 400),
        ("rebind.example", 400),
    ],
)
def test_tester_listener_host_allow_list(tester_client: ListenerClient, host: str, status: int):
    """L8: only `Host: 127.0.0.1:PORT`; `localhost` pages are redirected; the rest refused."""
    response = tester_client.get("/api/chat/projects", headers={"Host": host})
    assert response.status_code == status
    if status == 302:
        assert response.headers["location"] == "http://127.0.0.1:7333/api/chat/projects"
    if status == 400:
        assert response.json()["error"] == "host-refused"


def test_tester_listener_refuses_non_loopback_client(business) -> None:
    """L8: the tester listener answers loopback clients only, whatever the Host says."""
    client = ListenerClient("tester", client_host="10.1.2.3")
    response = client.get("/api/chat/projects")
    assert (response.status_code, response.json()["error"]) == (400, "host-refused")


@pytest.mark.parametrize("path", ["/admin/", "/api/auth/login", "/signin", "/api/inbox"])
def test_tester_listener_has_no_admin_or_sign_in(tester_client: ListenerClient, path: str):
    """L8: admin, sign-in and the human's inbox are not served on the tester listener."""
    for response in (tester_client.get(path), tester_client.post(path, {})):
        assert (response.status_code, response.json()["error"]) == (404, "not-found")
