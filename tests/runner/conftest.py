"""Fixtures for assistant runs: short leases, real runners, slow backends, a fake model server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from runner.backends.offline import OfflineBackend
from tests.support.model_servers import FakeModel, serve_fake_model
from tests.support.runners import LEASE, GatedBackend, WatchedRunner


@pytest.fixture
def short_lease(settings) -> float:
    """Leases of one second, so dead runs and stops show within a test's patience."""
    settings.MOSAIC_CLAIM_LEASE_SECONDS = LEASE
    return LEASE


@pytest.fixture
def start_runner(short_lease: float) -> Iterator[Callable[..., WatchedRunner]]:
    """Start real runners (threads in this process); every one is stopped at teardown."""
    runners: list[WatchedRunner] = []

    def start(**options: Any) -> WatchedRunner:
        options.setdefault("backend", OfflineBackend())
        options.setdefault("poll_interval", 0.02)
        runner = WatchedRunner(**options)
        runner.start()
        runners.append(runner)
        return runner

    yield start
    for runner in runners:
        assert runner.stop(timeout=10), "a runner's threads did not end"


@pytest.fixture
def gated() -> Iterator[GatedBackend]:
    backend = GatedBackend()
    yield backend
    backend.release.set()


# --- a fake OpenAI-compatible server on loopback ----------------------------------------


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    """An OpenAI-compatible `/v1/chat/completions` on 127.0.0.1: the tests never leave loopback."""
    with serve_fake_model() as model:
        yield model
