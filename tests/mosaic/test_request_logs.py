"""One log line per request, with a request id; JSON lines; a quiet refused Host."""

from __future__ import annotations

import json
import logging

import pytest
from django.contrib.auth.models import User

from mosaic.logs import JsonFormatter
from tests.support.listeners import HUMAN, TESTER, ListenerClient


def request_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "mosaic.requests"]


@pytest.fixture
def requests_logged(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="mosaic.requests")
    return caplog


def test_chat_request_json_line_has_every_field(
    human_client: ListenerClient, requests_logged: pytest.LogCaptureFixture
) -> None:
    requests_logged.clear()
    answer = human_client.get("/api/chat/projects")
    (record,) = request_records(requests_logged)
    line = json.loads(JsonFormatter().format(record))

    assert line["time"].endswith("+00:00")
    assert {key: line[key] for key in ("level", "logger", "listener", "method", "status")} == {
        "level": "INFO",
        "logger": "mosaic.requests",
        "listener": "human",
        "method": "GET",
        "status": 200,
    }
    assert (line["route"], line["actor"], line["client"]) == (
        "/api/chat/projects",
        "human",
        "127.0.0.1",
    )
    assert line["ms"] >= 0
    assert line["message"] == 'chat GET /api/chat/projects 200 user="ada"'
    assert line["request_id"] == answer.headers["x-request-id"]
    assert len(line["request_id"]) == 32


def test_route_names_the_pattern_not_the_ids(
    human_client: ListenerClient,
    human_thread_id: int,
    requests_logged: pytest.LogCaptureFixture,
) -> None:
    requests_logged.clear()
    human_client.get(f"/api/chat/threads/{human_thread_id}/messages")
    (record,) = request_records(requests_logged)
    assert "<" in record.request["route"] and str(human_thread_id) not in record.request["route"]


@pytest.mark.parametrize(
    ("listener", "path", "headers", "status"),
    [
        (HUMAN, "/", {}, 200),
        (HUMAN, "/static/console/favicon.svg", {}, 200),
        (HUMAN, "/api/chat/projects", {"X-Mosaic-Tester": "1"}, 403),
        (TESTER, "/api/chat/projects", {}, 200),
        (HUMAN, "/healthz", {}, 200),
        (HUMAN, "/no/such/page", {}, 404),
    ],
)
def test_every_request_is_logged_once(
    business,
    ada: User,
    requests_logged: pytest.LogCaptureFixture,
    listener: str,
    path: str,
    headers: dict[str, str],
    status: int,
) -> None:
    client = ListenerClient(listener)
    if listener == HUMAN and path == "/":
        client.sign_in("ada", "correct horse battery")
    requests_logged.clear()
    answer = client.get(path, headers=headers)
    assert answer.status_code == status
    (record,) = request_records(requests_logged)
    assert record.request["status"] == status
    assert record.request["request_id"] == answer.headers["x-request-id"]


def test_request_id_from_trusted_proxy_is_kept(
    business, settings, requests_logged: pytest.LogCaptureFixture
) -> None:
    settings.MOSAIC_TRUSTED_PROXIES = ["127.0.0.1"]
    answer = ListenerClient(HUMAN).get("/healthz", headers={"X-Request-ID": "edge-42.a"})
    assert answer.headers["x-request-id"] == "edge-42.a"
    assert request_records(requests_logged)[-1].request["request_id"] == "edge-42.a"


@pytest.mark.parametrize(
    ("trusted", "sent"),
    [
        ([], "edge-42"),  # from a client, not the proxy
        (["127.0.0.1"], "two words"),  # from the proxy, but not a plain token
        (["127.0.0.1"], "x" * 129),
    ],
)
def test_request_id_otherwise_is_generated(
    business, settings, trusted: list[str], sent: str
) -> None:
    settings.MOSAIC_TRUSTED_PROXIES = trusted
    answer = ListenerClient(HUMAN).get("/healthz", headers={"X-Request-ID": sent})
    assert answer.headers["x-request-id"] != sent
    assert len(answer.headers["x-request-id"]) == 32


def test_refused_host_is_one_warning_without_traceback(
    business, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    answer = ListenerClient(HUMAN).get("/", headers={"Host": "evil.example"})
    assert answer.status_code == 400
    refused = [r for r in caplog.records if r.name.startswith("django.security")]
    assert [(r.levelno, r.exc_info, r.exc_text) for r in refused] == [(logging.WARNING, None, None)]
    assert "evil.example" in refused[0].getMessage()
    assert "Traceback" not in caplog.text
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1
    assert len(request_records(caplog)) == 1
