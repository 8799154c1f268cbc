"""Persona fixtures shared by the whole suite: a business, its human, the tester, a run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from broker.actors import Actor
from broker.models import Business
from tests.support.businesses import make_business
from tests.support.model_servers import LiteLLMPeer, litellm_peer

pytest_plugins = ["tests.support.listener_fixtures", "tests.support.page_variants", "pytester"]


@pytest.fixture(scope="session", autouse=True)
def no_stray_database_sessions(django_db_setup, django_db_blocker):
    """Connections that servers' worker threads opened must not keep PostgreSQL from dropping
    the test database at the end of the run."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def fast_password_hashing(settings) -> None:
    """Tests sign users in by the hundred; the production hasher is slow on purpose."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fresh_cache(settings) -> None:
    """Each test starts with no sign-in failures counted: the suite signs in by the hundred
    from one address, and the throttle's counters live in the cache. The cache is one of the
    test's own, in memory: clearing the Redis cache would flush the database that the channel
    layer, and the Console servers' live sockets, share."""
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "test"}
    }
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def channel_layer_of_its_own() -> Iterator[None]:
    """Each test gets a channel layer instance of its own. A server process receives on one
    instance from one event loop all its life; a test runs a new loop per `async_to_sync`, and
    channels-redis keeps its receive lock per instance, so a receive one test's finished loop
    left behind would lock every later test's sockets out of their messages."""
    from channels import DEFAULT_CHANNEL_LAYER
    from channels.layers import channel_layers

    from broker import events

    channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)
    yield
    # The pushes' own loop holds connections of this test's layer: closed with it.
    events.close_own_loop()
    channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)


@pytest.fixture(autouse=True)
def default_listener_addresses(settings) -> None:
    """In-process tests speak to the listeners at their documented addresses, whatever the
    environment running the suite says (servers the tests start choose their own ports)."""
    settings.MOSAIC_HUMAN_PORT = 7332
    settings.MOSAIC_TESTER_PORT = 7333
    settings.MOSAIC_HUMAN_ORIGINS = ["http://127.0.0.1:7332", "http://localhost:7332"]


@pytest.fixture
def business(db: None) -> Business:
    return make_business("demo", human="ada")


@pytest.fixture
def human(business: Business) -> Actor:
    return Actor.human(business_id=business.pk, username="ada")


@pytest.fixture
def tester(business: Business) -> Actor:
    return Actor.tester(business_id=business.pk)


@pytest.fixture
def other_business(db: None) -> Business:
    return make_business("other", human="grace")


@pytest.fixture
def other_human(other_business: Business) -> Actor:
    return Actor.human(business_id=other_business.pk, username="grace")


@pytest.fixture
def assistant_run(business: Business) -> Actor:
    return Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-1")


# --- where the suite runs ----------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `postgres` or `redis` prove what only that service can show; each runs in
    the pass configured with it (CI's second pass, where no test may skip)."""
    from django.conf import settings

    passes = {
        "postgres": (
            "postgresql" in settings.DATABASES["default"]["ENGINE"],
            "runs in the PostgreSQL pass (DATABASE_URL=postgres://…)",
        ),
        "redis": (bool(settings.REDIS_URL), "runs in the Redis pass (REDIS_URL=redis://…)"),
    }
    for marker, (configured, reason) in passes.items():
        if configured:
            continue
        for item in items:
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With MOSAIC_NO_SKIPS=1 (the full-services pass of CI) a skipped test fails the run."""
    if os.environ.get("MOSAIC_NO_SKIPS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped:
        print(f"\nMOSAIC_NO_SKIPS=1: {skipped} test(s) skipped; every part must be present.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On SQLite the suite runs on a WAL file, as the product does, not in memory.

    Tests where runner threads write beside the test need it: an in-memory database shares
    one cache between connections and refuses concurrent access ("table is locked") instead
    of waiting on the busy timeout. Each session gets its own file.
    """
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        database.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("db") / "test.db")


# --- the LiteLLM proxy, one for the whole session ----------------------------------------


@pytest.fixture(scope="session")
def litellm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiteLLMPeer]:
    """The LiteLLM proxy (tests/support/model_servers.py), shared by the runner's tests and the
    end to end ones; it fails (never skips) when it cannot start."""
    with ExitStack() as stack:
        try:
            peer = stack.enter_context(litellm_peer(tmp_path_factory.mktemp("litellm")))
        except RuntimeError as error:
            pytest.fail(str(error), pytrace=False)
        print(f"\nLiteLLM proxy answered {peer.proxy.started_in:.1f} s after its start")
        yield peer
