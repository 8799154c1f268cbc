"""The channel layers (`mosaic.layers`): Channels' in-memory layer, swept less often, and
channels-redis's layer with a group send of two round trips."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer

from mosaic.layers import InMemoryChannelLayer, RedisChannelLayer


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
        cwd=Path(__file__).resolve().parents[2],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == ["mosaic.layers.InMemoryChannelLayer"], done.stderr


def test_the_layer_in_use_is_this_one_unless_redis_is_configured() -> None:
    layer = get_channel_layer()
    expected = RedisChannelLayer if os.environ.get("REDIS_URL") else InMemoryChannelLayer
    assert type(layer) is expected


# Every layer the product runs on keeps one contract for a group send; Redis's when the suite
# runs on Redis.
Layer = Callable[..., Any]


def _redis_layer(**config: Any) -> RedisChannelLayer:
    # A prefix of its own: the suite's layer shares the database.
    return RedisChannelLayer(
        hosts=[{"address": os.environ["REDIS_URL"], "socket_timeout": None}],
        prefix=f"layer-test-{uuid.uuid4().hex[:8]}",
        **config,
    )


LAYERS = [pytest.param(InMemoryChannelLayer, id="in-memory")]
if os.environ.get("REDIS_URL"):
    LAYERS.append(pytest.param(_redis_layer, id="redis"))


async def _flushed(layer: Any, scenario: Any) -> Any:
    try:
        return await scenario
    finally:
        await layer.flush()


async def _age(layer: Any, group: str, channel: str, seconds: float) -> None:
    """Make `channel`'s membership of `group` `seconds` old."""
    joined = time.time() - seconds
    if isinstance(layer, InMemoryChannelLayer):
        layer.groups[group][channel] = joined
        return
    connection = layer.connection(layer.consistent_hash(group))
    await connection.zadd(layer._group_key(group), {channel: joined})


@pytest.mark.parametrize("make", LAYERS)
def test_a_group_send_reaches_each_member_once_and_an_empty_group_is_no_error(make: Layer) -> None:
    layer = make()

    async def scenario() -> list[dict]:
        await layer.group_send("nobody", {"type": "lost"})
        channels = [await layer.new_channel() for _ in range(3)]
        for channel in channels:
            await layer.group_add("g", channel)
        await layer.group_send("g", {"type": "trail.nudge", "id": 7})
        received = [await layer.receive(channel) for channel in channels]
        for channel in channels:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(layer.receive(channel), 0.05)
        return received

    assert run(_flushed(layer, scenario())) == [{"type": "trail.nudge", "id": 7}] * 3


@pytest.mark.parametrize("make", LAYERS)
def test_a_group_send_skips_a_member_at_capacity_and_reaches_the_others(make: Layer) -> None:
    layer = make(capacity=1)

    async def scenario() -> tuple[dict, dict]:
        # Named channels: on Redis a process's own channels share one queue and one capacity.
        full, free = "test.full", "test.free"
        await layer.send(full, {"type": "old"})
        await layer.group_add("g", full)
        await layer.group_add("g", free)
        await layer.group_send("g", {"type": "new"})
        return await layer.receive(full), await layer.receive(free)

    assert run(_flushed(layer, scenario())) == ({"type": "old"}, {"type": "new"})


@pytest.mark.parametrize("make", LAYERS)
def test_a_group_send_leaves_out_a_membership_older_than_the_group_expiry(make: Layer) -> None:
    layer = make(group_expiry=60)

    async def scenario() -> dict:
        lapsed, current = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("g", lapsed)
        await layer.group_add("g", current)
        await _age(layer, "g", lapsed, 120)
        await layer.group_send("g", {"type": "nudge"})
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(layer.receive(lapsed), 0.05)
        return await layer.receive(current)

    assert run(_flushed(layer, scenario())) == {"type": "nudge"}


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


@pytest.mark.parametrize("make", LAYERS)
def test_several_group_sends_at_once_reach_each_member_in_order(make: Layer) -> None:
    """`group_send_many` (a committed turn's nudges) keeps `group_send`'s contract for each of
    its sends, in their order; an empty group among them is no error."""
    layer = make()

    async def scenario() -> tuple[list[dict], list[dict]]:
        first, second = await layer.new_channel(), await layer.new_channel()
        await layer.group_add("trail", first)
        await layer.group_add("trail", second)
        await layer.group_add("thread", second)
        await layer.group_send_many(
            [
                ("trail", {"type": "trail.nudge", "id": 1}),
                ("runs", {"type": "runs.nudge"}),
                ("thread", {"type": "thread.nudge", "id": 2}),
                ("trail", {"type": "trail.nudge", "id": 3}),
            ]
        )
        heard = [[await layer.receive(first) for _ in range(2)]]
        heard.append([await layer.receive(second) for _ in range(3)])
        for channel in (first, second):
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(layer.receive(channel), 0.05)
        return heard[0], heard[1]

    first, second = run(_flushed(layer, scenario()))
    assert [message["id"] for message in first] == [1, 3]
    assert [message.get("id") for message in second] == [1, 2, 3]


@pytest.mark.redis
def test_redis_reads_the_members_of_several_group_sends_in_one_round_trip() -> None:
    """A turn's three nudges to groups nobody follows are one script call, not three; a group
    with members adds its delivery."""
    layer = _redis_layer()
    calls: list[int] = []

    async def scenario() -> list[int]:
        listener = await layer.new_channel()
        await layer.group_add("trail", listener)
        client = layer.connection(0)
        asked = client.eval

        async def counted(script: str, keys: int, *args: Any) -> Any:
            calls.append(keys)
            return await asked(script, keys, *args)

        client.eval = counted
        await layer.group_send_many([("thread", {"type": "a"}), ("runs", {"type": "b"})])
        await layer.group_send_many(
            [("thread", {"type": "a"}), ("runs", {"type": "b"}), ("trail", {"type": "c"})]
        )
        sent = calls[:]
        assert await layer.receive(listener) == {"type": "c"}
        return sent

    # Members of both groups at once; then of all three, and the delivery to `trail`'s one
    # (each call by the number of keys it names).
    assert run(_flushed(layer, scenario())) == [2, 3, 1]
