"""Against a real `manage.py serve`: the probes on every listener, `/metrics` on the
ops listener alone and moving after a send and after its turn, and JSON log lines carrying the
request id the response returns."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.console.api import LiveApi
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving

REPLY_SECONDS = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    settings = {"MOSAIC_LOG_FORMAT": "json", "MOSAIC_TRUSTED_PROXIES": "127.0.0.1"}
    with serving(tmp_path, "ops_live", settings=settings) as live:
        yield live


def metric(server: LiveServer, name: str, labels: dict[str, str]) -> float:
    text = httpx.get(f"{server.ops_url}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def json_lines(server: LiveServer) -> list[dict[str, object]]:
    lines = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def test_probes_answer_on_every_listener_and_metrics_only_on_ops(server: LiveServer) -> None:
    for base in (server.human_url, server.tester_url, server.ops_url):
        assert httpx.get(f"{base}/healthz", timeout=10).json() == {"status": "alive"}
        ready = httpx.get(f"{base}/readyz", timeout=10)
        assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    for base in (server.human_url, server.tester_url):
        answer = httpx.get(f"{base}/metrics", timeout=10)
        assert answer.status_code == 404 and "mosaic_" not in answer.text
    assert "mosaic_http_requests_total" in httpx.get(f"{server.ops_url}/metrics").text


def test_send_and_its_turn_move_the_metrics_and_log_json_with_request_id(
    server: LiveServer,
) -> None:
    answered = {"state": "answered"}
    assert metric(server, "mosaic_sends_total", {"listener": "human"}) == 0
    turns_before = metric(server, "mosaic_turns_total", answered)
    api = LiveApi(server.human_url)
    try:
        api.sign_in(HUMAN_USERNAME, PASSWORD)
        project = api.create_project("ops")
        thread = api.post("/api/chat/threads", {"project": project, "name": "metrics"})
        thread_id = thread["thread"]["id"]
        sent = api.client.post(
            f"/api/chat/threads/{thread_id}/messages",
            json={"body": "hello"},
            headers={**api.write_headers(), "X-Request-ID": "edge-7.send"},
        )
        assert sent.status_code == 201, sent.text
        assert sent.headers["x-request-id"] == "edge-7.send"
        deadline = time.monotonic() + REPLY_SECONDS
        while len(api.get(f"/api/chat/threads/{thread_id}/messages")["messages"]) < 2:
            assert time.monotonic() < deadline, "no reply"
            time.sleep(0.1)
    finally:
        api.close()

    assert metric(server, "mosaic_sends_total", {"listener": "human"}) == 1
    assert metric(server, "mosaic_turns_total", answered) == turns_before + 1
    assert metric(server, "mosaic_reply_duration_seconds_count", {}) >= 1
    route = {"listener": "human", "route": "/api/chat/threads/<id:thread_id>/messages"}
    assert metric(server, "mosaic_http_requests_total", {**route, "status": "201"}) == 1

    (line,) = [line for line in json_lines(server) if line.get("request_id") == "edge-7.send"]
    assert {k: line[k] for k in ("listener", "method", "route", "status", "actor")} == {
        **{k: v for k, v in route.items() if k != "status"},
        "method": "POST",
        "status": 201,
        "actor": "human",
    }
    assert isinstance(line["ms"], float) and "time" in line
    generated = [line["request_id"] for line in json_lines(server) if "request_id" in line]
    assert len(generated) == len(set(generated)), "each request is logged once"
