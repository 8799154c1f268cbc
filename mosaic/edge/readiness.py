"""Readiness: can this process serve? Three checks, each bounded in time.

- `database`: the database answers `SELECT 1`.
- `migrations`: no migration is left to apply (once all are applied, a process keeps knowing it:
  migrations are only ever added by a deploy, which starts new processes).
- `channel-layer`: a message makes the round trip through the channel layer, to a fresh
  channel of the check's own and back.

A check that raises or outlasts `CHECK_SECONDS` fails; its exception is logged (class only) and
never answered, so the endpoint reveals no configuration.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

logger = logging.getLogger("mosaic.edge.readiness")

# Longer than the database pool's wait (MOSAIC_DB_POOL_TIMEOUT, 2 s): a pool that cannot hand
# out a connection fails the check on its own terms first.
CHECK_SECONDS = 3.0
OK = "ok"
FAILED = "failed"

_migrated = False


def _database_answers() -> None:
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        # The check's thread serves no request: its connection goes back (to the pool).
        connection.close()


def _migrations_applied() -> None:
    global _migrated
    if _migrated:
        return
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    finally:
        connection.close()
    if plan:
        raise RuntimeError(f"{len(plan)} migrations to apply")
    _migrated = True


async def _database() -> None:
    await sync_to_async(_database_answers, thread_sensitive=False)()


async def _migrations() -> None:
    await sync_to_async(_migrations_applied, thread_sensitive=False)()


async def _channel_layer() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    # A channel of the check's own, not a process-local one (`new_channel`): channels-redis
    # receives every process-local channel through one shared loop, and a receive cancelled
    # there (this check's own timeout) can leave the process's other receivers deaf.
    channel = f"mosaic.ready.{uuid.uuid4().hex}"
    await layer.send(channel, {"type": "mosaic.ready"})
    message = await layer.receive(channel)
    if message.get("type") != "mosaic.ready":
        raise RuntimeError("the channel layer returned another message")


CHECKS: dict[str, Callable[[], Awaitable[None]]] = {
    "database": _database,
    "migrations": _migrations,
    "channel-layer": _channel_layer,
}


async def _outcome(name: str, check: Callable[[], Awaitable[None]]) -> str:
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            await check()
    except Exception as error:  # any failure is the check's answer, never the endpoint's 500
        logger.warning("readiness check failed: %s (%s)", name, type(error).__name__)
        return FAILED
    return OK


async def readiness() -> dict[str, str]:
    """Each check's outcome, `ok` or `failed`, run side by side."""
    outcomes = await asyncio.gather(*(_outcome(name, check) for name, check in CHECKS.items()))
    return dict(zip(CHECKS, outcomes, strict=True))
