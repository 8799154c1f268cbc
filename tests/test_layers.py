"""The embedded channel layer (`mosaic.layers`): Channels' in-memory layer, swept less often."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from channels.layers import get_channel_layer

from mosaic.layers import InMemoryChannelLayer


def run(coroutine):
    return asyncio.run(coroutine)


def test_the_embedded_default_is_this_layer() -> None:
    """Without REDIS_URL the settings choose this layer (read in a process of its own, since
    this one may run on Redis)."""
    environment = {name: value for name, value in os.environ.items() if name != "REDIS_URL"}
    environment["DJANGO_SETTINGS_MODULE"] = "mosaic.settings"
    read = "from django.conf import settings; print(settings.CHANNEL_LAYERS['default']['BACKEND'])"
    done = subprocess.run(
        [sys.executable, "-c", read],
        cwd=Path(__file__).resolve().parent.parent,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == ["mosaic.layers.InMemoryChannelLayer"], done.stderr


def test_the_layer_in_use_is_this_one_unless_redis_is_configured() -> None:
    layer = get_channel_layer()
    assert isinstance(layer, InMemoryChannelLayer) is not bool(os.environ.get("REDIS_URL"))


def test_group_send_reaches_every_member_once_each() -> None:
    layer = InMemoryChannelLayer()

    async def scenario() -> list[dict]:
        channels = [await layer.new_channel() for _ in range(3)]
        for channel in channels:
            await layer.group_add("trail.1", channel)
        await layer.group_send("trail.1", {"type": "trail.nudge", "id": 7})
        received = [await layer.receive(channel) for channel in channels]
        assert all(layer.channels.get(channel) is None for channel in channels)
        return received

    assert run(scenario()) == [{"type": "trail.nudge", "id": 7}] * 3


def test_members_get_copies_of_the_message() -> None:
    layer = InMemoryChannelLayer()

    async def scenario() -> tuple[dict, dict]:
        first, second = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("g", first)
        await layer.group_add("g", second)
        await layer.group_send("g", {"type": "x", "ids": [1]})
        one = await layer.receive(first)
        one["ids"].append(2)
        return one, await layer.receive(second)

    assert run(scenario())[1] == {"type": "x", "ids": [1]}


def test_a_full_member_loses_the_message_and_the_others_get_it() -> None:
    layer = InMemoryChannelLayer(capacity=1)

    async def scenario() -> dict:
        full, free = await layer.new_channel(), await layer.new_channel()
        await layer.send(full, {"type": "old"})
        await layer.group_add("g", full)
        await layer.group_add("g", free)
        await layer.group_send("g", {"type": "new"})
        assert await layer.receive(full) == {"type": "old"}
        return await layer.receive(free)

    assert run(scenario()) == {"type": "new"}


def test_expired_messages_are_swept_at_most_once_per_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Channels' layer swept every channel on every receive; here a receive within the period
    leaves another channel's expired message alone, and the first one after it sweeps."""
    clock = [1000.0]
    monkeypatch.setattr("mosaic.layers.monotonic", lambda: clock[0])
    layer = InMemoryChannelLayer(expiry=0, sweep_seconds=5.0)

    async def delivered(channel: str) -> None:
        # Waiting first: the receive sweeps before the message exists, then takes it at once.
        receiving = asyncio.create_task(layer.receive(channel))
        await asyncio.sleep(0)
        await layer.send(channel, {"type": "nudge"})
        await receiving

    async def scenario() -> None:
        stale, busy = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("g", stale)
        await delivered(busy)  # the period's sweep: nothing had expired
        await layer.send(stale, {"type": "expired"})
        await asyncio.sleep(0.01)  # its expiry (Channels' wall clock) passes
        await delivered(busy)
        assert stale in layer.channels, "swept again within the period"
        clock[0] += 5.0
        await delivered(busy)
        assert stale not in layer.channels
        # Channels' own rule: a channel whose message expired leaves its groups.
        assert stale not in layer.groups.get("g", {})

    run(scenario())
