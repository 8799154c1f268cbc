"""Fixtures for assistant runs: short leases, real runners, slow backends, a fake model server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from broker.runner.backends import Draft, Reply, TurnCancelled, TurnTools
from broker.runner.backends.offline import OfflineBackend
from broker.runner.service import Runner
from broker.runner.turns import Turn

LEASE = 1.0


def wait_for(predicate: Callable[[], Any], *, timeout: float = 10.0, every: float = 0.02) -> Any:
    """Poll until `predicate()` is truthy and return it; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout}s")
        time.sleep(every)


@pytest.fixture
def short_lease(settings) -> float:
    """Leases of one second, so dead runs and stops show within a test's patience."""
    settings.MOSAIC_CLAIM_LEASE_SECONDS = LEASE
    return LEASE


@pytest.fixture
def start_runner(short_lease: float) -> Iterator[Callable[..., Runner]]:
    """Start real runners (threads in this process); every one is stopped at teardown."""
    runners: list[Runner] = []

    def start(**options: Any) -> Runner:
        options.setdefault("backend", OfflineBackend())
        options.setdefault("poll_interval", 0.02)
        runner = Runner(**options)
        runner.start()
        runners.append(runner)
        return runner

    yield start
    for runner in runners:
        assert runner.stop(timeout=10), "a runner's threads did not end"


@dataclass
class GatedBackend:
    """Holds every turn until released, like a slow model; honours cancellation."""

    name: str = "gated"
    release: threading.Event = field(default_factory=threading.Event)
    started: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        self.started.append(turn.message_id)
        while not self.release.wait(0.01):
            if cancel.is_set():
                self.cancelled.append(turn.message_id)
                raise TurnCancelled
        self.answered.append(turn.message_id)
        return Reply(text=f"answer to {turn.message_id}")


@pytest.fixture
def gated() -> Iterator[GatedBackend]:
    backend = GatedBackend()
    yield backend
    backend.release.set()


# --- a fake OpenAI-compatible server on loopback ----------------------------------------


@dataclass
class FakeModel:
    """What the fake server answers, and what it was asked."""

    url: str = ""
    delay: float = 0.0
    status: int = 200
    content: str | None = "model reply"
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)

    def completion(self, model: str) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }


def fake_handler(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            model.requests.append(body)
            model.headers.append({k.lower(): v for k, v in self.headers.items()})
            model.arrived.set()
            if model.closing.wait(model.delay):
                return
            if model.status != 200:
                payload = {"error": {"message": "the model is down", "type": "server_error"}}
            else:
                payload = model.completion(body["model"])
            data = json.dumps(payload).encode()
            try:
                self.send_response(model.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (a cancelled turn, a killed runner)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """An OpenAI-compatible `/v1/chat/completions` on 127.0.0.1: the tests never leave loopback."""
    model = FakeModel()
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake_handler(model))
    server.daemon_threads = True
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield model
    model.closing.set()
    server.shutdown()
    server.server_close()
