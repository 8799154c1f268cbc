"""One log line per request, with a request id; JSON lines; a quiet refused Host; a body Django
cannot parse refused in one line, without a traceback."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import SuspiciousOperation

from chat.bodies import UNREADABLE, UNREADABLE_BODY
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


# Bodies Django's parse refuses (docs/decisions/hostile-inputs.md): a multipart part whose
# headers never end (the parser gives up past 8 KiB), a multipart type without its boundary,
# and a form of more fields than Django reads.
UNREADABLE_BODIES = {
    "multipart-garbage": ("multipart/form-data; boundary=x", b"--x\r\n" + b"A" * 9000),
    "multipart-no-boundary": ("multipart/form-data", b"not a multipart body"),
    "too-many-fields": (
        "application/x-www-form-urlencoded",
        b"&".join(b"f%d=1" % index for index in range(1200)),
    ),
}


def post_unreadable(client: ListenerClient, path: str, body: str) -> Any:
    content_type, content = UNREADABLE_BODIES[body]
    return client.request("POST", path, content=content, headers={"Content-Type": content_type})


def assert_one_line_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """The request's refusal is one WARNING line, beside the request's own line, and no record
    carries a traceback."""
    assert [r.exc_info for r in caplog.records if r.exc_info] == []
    assert "Traceback" not in caplog.text
    refusals = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.levelno, "\n" in r.getMessage()) for r in refusals] == [(logging.WARNING, False)]
    assert len(request_records(caplog)) == 1


@pytest.mark.parametrize("body", UNREADABLE_BODIES)
@pytest.mark.parametrize("path", ["/signin", "/admin/login/"])
def test_unreadable_body_from_anyone_is_one_line_without_traceback(
    business, caplog: pytest.LogCaptureFixture, path: str, body: str
) -> None:
    """An anonymous client with the CSRF cookie any page hands out: Django parses the body for
    the CSRF check, and its refusal was a 25-line traceback per request. Now the 400 says why,
    and the log says it in one line."""
    client = ListenerClient(HUMAN)
    client.get("/admin/login/")
    assert "csrftoken" in client.cookies
    caplog.set_level(logging.INFO)
    caplog.clear()

    answer = post_unreadable(client, path, body)

    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid", "detail": UNREADABLE}
    assert_one_line_without_traceback(caplog)
    (line,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert path in line.getMessage()


@pytest.mark.parametrize("body", UNREADABLE_BODIES)
def test_unreadable_body_to_a_chat_write_is_invalid_in_one_line(
    human_client: ListenerClient,
    human_thread_id: int,
    caplog: pytest.LogCaptureFixture,
    body: str,
) -> None:
    """SPEC §6: a signed-in human's chat write whose body Django cannot parse (the CSRF check
    reads it, L2) is 400 `invalid` in the API's shape, not a traceback; its line names the
    user (L6)."""
    caplog.set_level(logging.INFO)
    for path in ("/api/chat/projects", f"/api/chat/threads/{human_thread_id}/messages"):
        caplog.clear()

        answer = post_unreadable(human_client, path, body)

        assert (answer.status_code, answer.json()) == (
            400,
            {"error": "invalid", "detail": UNREADABLE},
        )
        assert_one_line_without_traceback(caplog)
        assert request_records(caplog)[0].getMessage() == f'chat POST {path} 400 user="ada"'


@pytest.mark.parametrize("kind", UNREADABLE_BODY, ids=lambda kind: kind.__name__)
def test_each_unreadable_body_is_quiet_where_django_logs_it(
    caplog: pytest.LogCaptureFixture, kind: type[Exception]
) -> None:
    """Each body error is quieted on the logger Django writes it to: `django.request` for a
    malformed multipart body, `django.security.<class>` for the others, at ERROR there."""
    logger = (
        f"django.security.{kind.__name__}"
        if issubclass(kind, SuspiciousOperation)
        else "django.request"
    )
    try:
        raise kind("the parser's reason\nsecond line")
    except kind as error:
        logging.getLogger(logger).error("Bad request: %s", "/signin", exc_info=error)

    (record,) = caplog.records
    assert (record.levelno, record.exc_info, record.exc_text) == (logging.WARNING, None, None)
    assert record.getMessage() == "Bad request: /signin (the parser's reason\\nsecond line)"


def test_server_error_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Only unreadable bodies are quieted: an error of ours keeps its traceback."""
    try:
        raise RuntimeError("ours")
    except RuntimeError:
        logging.getLogger("django.request").exception("Internal Server Error: %s", "/")

    (record,) = caplog.records
    assert (record.levelno, record.exc_info is not None) == (logging.ERROR, True)
    assert "Traceback" in caplog.text
