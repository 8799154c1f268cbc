"""The embedded channel layer: Channels' in-memory layer, with a delivery cost that does not grow
with the number of sockets.

Channels' own layer sweeps every channel and every group membership for expired entries on each
`receive` and each `group_send`. Every socket of the process waits in `receive`, so a row nudged
to N sockets swept N times over N channels: with 500 open Consoles one row took about a second
to reach the last of them, nearly all of it in the sweep. Here the sweep runs at most once per
`sweep_seconds`; `group_send` puts the message on each member's queue in turn instead of
starting a task per member; and `receive` makes a channel's queue only when it has none
(Channels' made one on every call, and threw it away when the channel had one). What expires,
and when, is Channels' own (`expiry`, `group_expiry`): an expired entry lingers until the next
sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
from time import monotonic
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):  # type: ignore[misc]
    def __init__(self, *, sweep_seconds: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sweep_seconds = sweep_seconds
        self._next_sweep = 0.0

    def _clean_expired(self) -> None:
        now = monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_seconds
        super()._clean_expired()

    async def receive(self, channel: str) -> dict[str, Any]:
        self.require_valid_channel_name(channel)
        self._clean_expired()
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            _, message = await queue.get()
        finally:
            if queue.empty():
                self.channels.pop(channel, None)
        return message  # type: ignore[no-any-return]

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        # `send` only puts on a queue (it never waits), so one pass delivers to every member;
        # a full queue drops the message for that member, as Channels' layer does.
        for channel in list(self.groups.get(group, ())):
            with contextlib.suppress(ChannelFull):
                await self.send(channel, message)
