"""One channel-layer membership per stream and process, however many of its sockets follow it.

A row nudges its stream's group (`broker.events`). Were every socket a member, a row to five
hundred Consoles of one process would be five hundred layer messages — on Redis five hundred
round trips of the process's receive loop — before any socket read a row. Here the process
joins each group once, with a channel of its own, and hands each nudge to its sockets on the
loop: one layer message per row and process.

A nudge carries the name of its group, so one channel serves every group. Membership is
renewed (`renew`) before the sockets' periodic read (`chat.consumers.Resync`), so a layer that
forgot it costs no row. A group whose last socket left keeps its membership until the next
renewal drops it: a socket that joins in between finds it in place, and one that joins while the
renewal drops it joins after the drop, so an add and a discard of one group never race.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

from channels.layers import BaseChannelLayer

logger = logging.getLogger("mosaic.chat")

# How long the receive loop waits after the layer failed before it asks again.
RETRY_SECONDS = 1.0


class Follower(Protocol):
    def hear(self, message: Mapping[str, Any]) -> None:
        """A nudge to the group the socket follows (runs on the loop; must not block)."""


class FanOut:
    """The stream groups the sockets of one event loop follow, through one channel."""

    def __init__(self, layer: BaseChannelLayer) -> None:
        self.layer = layer
        self.channel = ""
        self.followers: dict[str, set[Follower]] = {}
        # Each group's membership: added, or being added.
        self.memberships: dict[str, asyncio.Future[None]] = {}
        # The groups a renewal is dropping this moment; a socket that follows one joins after.
        self.dropping: dict[str, asyncio.Future[None]] = {}
        self.listening: asyncio.Task[None] | None = None

    async def follow(self, group: str, follower: Follower) -> None:
        """Hear every nudge to `group` sent from the moment this returns (and some sent while
        it runs: the follower takes nudges from its first await on)."""
        if not self.channel:
            channel = await self.layer.new_channel()
            self.channel = self.channel or channel
        self.followers.setdefault(group, set()).add(follower)
        if self.listening is None or self.listening.done():
            self.listening = asyncio.get_running_loop().create_task(self.listen())
        try:
            dropping = self.dropping.get(group)
            if dropping is not None:
                # A renewal is dropping the group: join once it has, or the drop would undo
                # the join.
                await asyncio.wait([dropping])
            membership = self.memberships.get(group)
            if membership is None:
                membership = self.memberships[group] = asyncio.ensure_future(
                    self.layer.group_add(group, self.channel)
                )
                membership.add_done_callback(lambda done: self._forget_failed(group, done))
            # Shielded: one socket closing mid-join must not cancel the join for the others.
            await asyncio.shield(membership)
        except BaseException:
            self.unfollow(group, follower)
            raise

    def unfollow(self, group: str, follower: Follower) -> None:
        followers = self.followers.get(group)
        if followers is not None:
            followers.discard(follower)
        if not any(self.followers.values()) and self.listening is not None:
            self.listening.cancel()
            self.listening = None

    async def renew(self) -> None:
        """Add every followed group again (a layer may have forgotten it) and drop the groups
        nobody follows. Raises when the layer fails."""
        for group, followers in list(self.followers.items()):
            if followers:
                await self.layer.group_add(group, self.channel)
                continue
            del self.followers[group]
            self.memberships.pop(group, None)
            dropping = self.dropping[group] = asyncio.ensure_future(
                self.layer.group_discard(group, self.channel)
            )
            try:
                await dropping
            finally:
                if self.dropping.get(group) is dropping:
                    del self.dropping[group]

    async def listen(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The sockets' own channels fail too and close them `unavailable`; those that
                # stay catch up at their next periodic read.
                logger.warning("channel layer receive failed", exc_info=True)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            for follower in list(self.followers.get(message.get("group", ""), ())):
                try:
                    follower.hear(message)
                except Exception:
                    # One socket's fault must not leave the process's others deaf.
                    logger.exception("a socket failed to take a nudge")

    def _forget_failed(self, group: str, membership: asyncio.Future[None]) -> None:
        failed = membership.cancelled() or membership.exception() is not None
        if failed and self.memberships.get(group) is membership:
            del self.memberships[group]


_fan_outs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[BaseChannelLayer, FanOut]] = (
    weakref.WeakKeyDictionary()
)


def fan_out_of_this_loop(layer: BaseChannelLayer) -> FanOut:
    by_layer = _fan_outs.setdefault(asyncio.get_running_loop(), {})
    if layer not in by_layer:
        by_layer[layer] = FanOut(layer)
    return by_layer[layer]


def fan_outs_of_this_loop() -> list[FanOut]:
    return list(_fan_outs.get(asyncio.get_running_loop(), {}).values())
