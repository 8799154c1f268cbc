"""`/healthz` and `/readyz` on both listeners, without sign-in, revealing nothing."""

from __future__ import annotations

import asyncio

import pytest
from django.db.migrations.executor import MigrationExecutor

import mosaic.edge.health
import mosaic.edge.readiness
from tests.mosaic.test_layers import LAYERS
from tests.support.listeners import HUMAN, TESTER, ListenerClient

LISTENERS = [HUMAN, TESTER]


@pytest.fixture(autouse=True)
def migrations_checked_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mosaic.edge.readiness, "_migrated", False)


@pytest.mark.parametrize("listener", LISTENERS)
def test_healthz_answers_alive_without_database(
    listener: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alive, signed out, with a Host no listener accepts, and without touching the database
    (no `django_db` mark: any query fails the test)."""
    monkeypatch.setattr(mosaic.edge.health, "readiness", None)  # /healthz must not call it
    answer = ListenerClient(listener).get("/healthz", headers={"Host": "10.1.2.3:80"})
    assert (answer.status_code, answer.json()) == (200, {"status": "alive"})
    assert answer.headers["cache-control"] == "no-store"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("listener", LISTENERS)
def test_readyz_answers_ready_when_every_check_passes(listener: str) -> None:
    answer = ListenerClient(listener).get("/readyz")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "status": "ready",
        "checks": {"database": "ok", "migrations": "ok", "channel-layer": "ok"},
    }


@pytest.mark.django_db(transaction=True)
def test_readyz_pending_migration_answers_503_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(MigrationExecutor, "migration_plan", lambda self, targets: [("x", False)])
    answer = ListenerClient(HUMAN).get("/readyz")
    assert (answer.status_code, answer.json()["error"]) == (503, "unavailable")
    assert answer.json()["checks"]["migrations"] == "failed"
    assert answer.json()["detail"] == "Not ready: migrations."
    assert answer.headers["retry-after"] == "1"


@pytest.mark.django_db(transaction=True)
def test_readyz_database_down_answers_503_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused() -> None:
        raise mosaic.edge.readiness.connections["default"].Database.OperationalError("refused")

    monkeypatch.setattr(mosaic.edge.readiness, "_database_answers", refused)
    answer = ListenerClient(TESTER).get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["checks"] == {
        "database": "failed",
        "migrations": "ok",
        "channel-layer": "ok",
    }


@pytest.mark.django_db(transaction=True)
def test_readyz_channel_layer_down_answers_503_without_its_address(settings) -> None:
    """A Redis nobody listens on: the layer fails, and the answer names no host or port."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "mosaic.layers.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:9/0"]},
        }
    }
    answer = ListenerClient(HUMAN).get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["checks"]["channel-layer"] == "failed"
    assert "127.0.0.1" not in answer.text and ":9" not in answer.text


def test_probes_other_methods_go_on_to_the_listener() -> None:
    """Only GET is a probe: a POST meets the listener's own guards, which refuse it."""
    answer = ListenerClient(HUMAN).post("/healthz", {}, write_headers=False)
    assert answer.status_code != 200


@pytest.mark.parametrize("make", LAYERS)
def test_readyz_channel_check_needs_no_process_receive_loop(make, monkeypatch) -> None:
    """The round trip uses a channel of the check's own: on channels-redis a receive cancelled
    in the process's shared receive loop (a socket closing) leaves that loop's next receivers
    waiting, and the check must neither wait there nor, timing out, cancel a receive there."""
    layer = make()
    monkeypatch.setattr(mosaic.edge.readiness, "get_channel_layer", lambda: layer)

    async def scenario() -> str:
        channels = [await layer.new_channel() for _ in range(3)]
        receivers = [asyncio.ensure_future(layer.receive(name)) for name in channels]
        await asyncio.sleep(0.2)
        receivers[0].cancel()
        await asyncio.sleep(0.1)
        try:
            return (await mosaic.edge.readiness.readiness())["channel-layer"]
        finally:
            for receiver in receivers:
                receiver.cancel()
            await asyncio.gather(*receivers, return_exceptions=True)

    assert asyncio.run(scenario()) == "ok"
