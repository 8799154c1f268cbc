"""The ops listener serves `/metrics`, `/healthz` and `/readyz` to loopback only; the
human and tester listeners never serve `/metrics`; requests and sends move the metrics."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from prometheus_client import REGISTRY

from broker.signals import TurnEnd, turn_ended
from human.listener import build_human_application
from mosaic.edge import metrics
from mosaic.edge.handler import WorkerPool
from mosaic.edge.listener import http_handler
from mosaic.edge.metrics import counted_sockets
from mosaic.ops import build_ops_application
from runner.backends.base import Reply
from tests.support.listeners import (
    HUMAN,
    TESTER,
    ListenerClient,
    RawAnswer,
    application,
    call,
    http_scope,
)

OPS_HOST = (b"host", b"127.0.0.1:7334")


def ops_request(
    path: str,
    *,
    method: str = "GET",
    headers: list[tuple[bytes, bytes]] | None = None,
    client: str = "127.0.0.1",
) -> RawAnswer:
    scope = http_scope(HUMAN, method, path, headers or [OPS_HOST], client=(client, 50000))
    return async_to_sync(call)(build_ops_application(), scope)


def sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_ops_metrics_answers_prometheus_text() -> None:
    answer = ops_request("/metrics")
    assert answer.status == 200
    assert dict(answer.headers)[b"content-type"].startswith(b"text/plain")
    text = answer.body.decode()
    assert "_created" not in text
    for name in (
        "mosaic_http_requests_total",
        "mosaic_http_request_duration_seconds_bucket",
        "mosaic_websockets_open",
        "mosaic_sends_total",
        "mosaic_turns_total",
        "mosaic_reply_first_token_seconds_bucket",
        "mosaic_reply_duration_seconds_bucket",
        "mosaic_tokens_total",
        "mosaic_admission_refusals_total",
        "mosaic_db_pool_waits_total",
    ):
        assert f"\n# HELP {name.removesuffix('_bucket')} " in text, name


@pytest.mark.parametrize(
    ("client", "host", "code"),
    [
        ("10.0.0.5", b"127.0.0.1:7334", "host-refused"),
        ("127.0.0.1", b"metrics.example:7334", "host-refused"),
    ],
)
def test_ops_refuses_other_clients_and_hosts(client: str, host: bytes, code: str) -> None:
    """Loopback only, and a loopback Host (DNS rebinding)."""
    answer = ops_request("/metrics", headers=[(b"host", host)], client=client)
    assert (answer.status, answer.json()["error"]) == (400, code)


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/"), ("GET", "/admin/"), ("POST", "/metrics")]
)
def test_ops_serves_nothing_else(method: str, path: str) -> None:
    answer = ops_request(path, method=method)
    assert (answer.status, answer.json()["error"]) == (404, "not-found")


def test_ops_healthz_answers_alive() -> None:
    answer = ops_request("/healthz")
    assert (answer.status, answer.json()) == (200, {"status": "alive"})


@pytest.mark.django_db(transaction=True)
def test_ops_readyz_answers_ready() -> None:
    answer = ops_request("/readyz")
    assert (answer.status, answer.json()["status"]) == (200, "ready")


@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_listeners_do_not_serve_metrics(business, listener: str) -> None:
    answer = ListenerClient(listener).get("/metrics")
    assert answer.status_code == 404
    assert "mosaic_http_requests" not in answer.text


def test_send_moves_sends_and_requests(human_client: ListenerClient, human_thread_id: int) -> None:
    route = "/api/chat/threads/<id:thread_id>/messages"
    labels = {"listener": "human", "route": route, "status": "201"}
    sends = sample("mosaic_sends_total", {"listener": "human"})
    requests = sample("mosaic_http_requests_total", labels)
    timed = sample(
        "mosaic_http_request_duration_seconds_count", {"listener": "human", "route": route}
    )

    answer = human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"})

    assert answer.status_code == 201, answer.text
    assert sample("mosaic_sends_total", {"listener": "human"}) == sends + 1
    assert sample("mosaic_http_requests_total", labels) == requests + 1
    assert (
        sample("mosaic_http_request_duration_seconds_count", {"listener": "human", "route": route})
        == timed + 1
    )


def test_refused_send_moves_no_send(tester_client: ListenerClient, human_thread_id: int) -> None:
    sends = sample("mosaic_sends_total", {"listener": "tester"})
    answer = tester_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"})
    assert answer.status_code == 403
    assert sample("mosaic_sends_total", {"listener": "tester"}) == sends


def answered_turn(instance: str, model: str) -> None:
    """A turn answered by `instance` with one prompt token, the server naming `model`."""
    turn_ended.send(
        sender=None,
        instance=instance,
        state=TurnEnd.ANSWERED,
        seconds=0.1,
        reply=Reply(text="hi", model=model, prompt_tokens=1),
    )


def model_labels(instance: str) -> dict[str, float]:
    """The tokens counted for `instance`, by model label."""
    return {
        found.labels["model"]: found.value
        for metric in REGISTRY.collect()
        if metric.name == "mosaic_tokens"
        for found in metric.samples
        if found.name == "mosaic_tokens_total" and found.labels["instance"] == instance
    }


def test_model_label_keeps_the_first_models_and_counts_the_rest_as_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model a server names is its own words: past MODEL_LABELS distinct names a process
    counts `other`, so no server (or proxy in front of one) can grow the page without end. No
    token is lost."""
    monkeypatch.setattr(
        metrics,
        "model_label",
        metrics.BoundedLabel(most=metrics.MODEL_LABELS, length=metrics.MODEL_LABEL_MAX),
    )
    names = [f"model-{index}" for index in range(metrics.MODEL_LABELS + 5)]
    for name in (*names, names[0], names[-1]):
        answered_turn("bounded-models", name)

    counted = model_labels("bounded-models")

    assert len(counted) == metrics.MODEL_LABELS + 1
    assert counted[names[0]] == 2
    assert counted["other"] == 6
    assert sum(counted.values()) == len(names) + 2


def test_model_label_is_cut_to_its_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        metrics,
        "model_label",
        metrics.BoundedLabel(most=metrics.MODEL_LABELS, length=metrics.MODEL_LABEL_MAX),
    )
    answered_turn("long-model", "m" * 10_000)
    answered_turn("long-model", "")

    assert model_labels("long-model") == {"m" * metrics.MODEL_LABEL_MAX: 1, "-": 1}


def test_busy_server_refusal_moves_admission_refusals(business) -> None:
    """Every worker busy past the wait: the 503 is counted."""
    pool = WorkerPool(size=1, wait=0.05)
    app = build_human_application(http_handler(pool))
    release = threading.Event()
    before = sample("mosaic_admission_refusals_total", {})

    async def while_busy() -> RawAnswer:
        holder = asyncio.ensure_future(pool.run(release.wait, 10))
        await asyncio.sleep(0.02)
        try:
            return await call(app, http_scope(HUMAN, "GET", "/api/chat/projects", []))
        finally:
            release.set()
            await holder

    assert async_to_sync(while_busy)().status == 503
    assert sample("mosaic_admission_refusals_total", {}) == before + 1


def test_open_sockets_counts_from_accept_to_end() -> None:
    """A WebSocket counts while open once accepted; a refused handshake never counts."""
    labels = {"listener": "tester"}
    seen: list[float] = []

    async def accepting(scope, receive, send) -> None:
        await send({"type": "websocket.accept"})
        seen.append(sample("mosaic_websockets_open", labels))

    async def refusing(scope, receive, send) -> None:
        await send({"type": "websocket.close", "code": 4403})
        seen.append(sample("mosaic_websockets_open", labels))

    async def nothing(message) -> None:
        return None

    async def receive() -> dict[str, str]:
        return {"type": "websocket.disconnect"}

    before = sample("mosaic_websockets_open", labels)
    for app in (accepting, refusing):
        counted = counted_sockets(app, listener="tester")
        async_to_sync(counted)({"type": "websocket"}, receive, nothing)
    assert seen == [before + 1, before]
    assert sample("mosaic_websockets_open", labels) == before


def test_pool_waits_are_read_at_most_once_a_second(monkeypatch) -> None:
    """The pool's waits are read as requests end, but no more than once a second (a
    read per request was a twentieth of a request's CPU); what the pool counted in between is
    added at the next read, none lost."""
    from django.db import DEFAULT_DB_ALIAS, connections

    from mosaic.edge import metrics

    reads: list[float] = []

    class Pool:
        def pop_stats(self) -> dict[str, int]:
            reads.append(1)
            return {"requests_queued": 2, "requests_wait_ms": 500}

    wrapper_class = type(connections[DEFAULT_DB_ALIAS])
    monkeypatch.setattr(
        wrapper_class, "_connection_pools", {DEFAULT_DB_ALIAS: Pool()}, raising=False
    )
    monkeypatch.setattr(metrics, "_pool_stats_due", float("-inf"))
    before = REGISTRY.get_sample_value("mosaic_db_pool_waits_total") or 0.0

    for now in (100.0, 100.5, 100.99, 101.0):
        metrics.collect_pool_stats(now=now)

    assert len(reads) == 2
    assert REGISTRY.get_sample_value("mosaic_db_pool_waits_total") == before + 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_each_listener_names_itself_in_its_metrics_and_log_lines(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture, listener: str
) -> None:
    """A request and a WebSocket are counted and logged under the listener they arrived on: an
    operator reads which listener is busy from these labels."""
    client: ListenerClient = request.getfixturevalue(f"{listener}_client")
    caplog.set_level(logging.INFO, logger="mosaic.requests")
    served = {"listener": listener, "route": "/api/chat/projects", "status": "200"}
    requests = sample("mosaic_http_requests_total", served)
    sockets = sample("mosaic_websockets_open", {"listener": listener})
    open_when_accepted: list[float] = []
    app = application(listener)

    async def observed(scope, receive, send) -> None:
        async def observed_send(message) -> None:
            if message["type"] == "websocket.accept":
                open_when_accepted.append(sample("mosaic_websockets_open", {"listener": listener}))
            await send(message)

        scope = {**scope, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", client.port)}
        await app(scope, receive, observed_send)

    async def trail_socket() -> None:
        headers = [
            (b"host", f"127.0.0.1:{client.port}".encode()),
            (b"origin", client.origin.encode()),
        ]
        if client.cookies:
            jar = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
            headers.append((b"cookie", jar.encode()))
        communicator = WebsocketCommunicator(observed, "/ws/trail/", headers=headers)
        assert (await communicator.connect())[0]
        await communicator.disconnect()

    caplog.clear()
    assert client.get("/api/chat/projects").status_code == 200
    async_to_sync(trail_socket)()

    assert sample("mosaic_http_requests_total", served) == requests + 1
    assert open_when_accepted == [sockets + 1]
    assert sample("mosaic_websockets_open", {"listener": listener}) == sockets
    lines = [r.request for r in caplog.records if r.name == "mosaic.requests"]
    assert [(line["listener"], line["method"]) for line in lines] == [
        (listener, "GET"),
        (listener, "WEBSOCKET"),
    ]
