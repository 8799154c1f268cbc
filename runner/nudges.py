"""Turns stored by other processes wake this runner at once, through the channel layer.

A runner polls for pending threads in any case; this only cuts the wait. A turn stored in this
process wakes its runners directly (`events.wake_runners_here`). An in-memory channel layer
reaches no other process, so with one there is nothing to listen to.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import BaseChannelLayer, channel_layers

from broker import events

logger = logging.getLogger("mosaic.runner")

# A group membership lapses after the layer's group expiry (a day by default): renew it.
REJOIN_INTERVAL = 600.0
# After the layer failed (Redis restarting), wait this long before listening again.
RETRY_INTERVAL = 1.0


class LayerNudges:
    """A thread listening to the `runs` group of a shared channel layer; calls `wake` per nudge."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self.wake = wake
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()

    def start(self) -> bool:
        """Start listening when the layer is shared between processes; False when it is not."""
        if events.shared_layer() is None:
            return False
        # A layer instance of its own: one instance receives on one event loop only, and in the
        # one-process run the server's consumers receive on theirs.
        layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        self._thread = threading.Thread(
            target=self._serve, args=(layer,), name="runner-nudges", daemon=True
        )
        self._thread.start()
        self._started.wait(5)
        return True

    def stop(self, timeout: float | None = None) -> None:
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)
        if self._thread is not None:
            self._thread.join(timeout)

    def _serve(self, layer: BaseChannelLayer) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._task = loop.create_task(self._listen(layer))
        self._started.set()
        try:
            loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        finally:
            loop.close()

    async def _listen(self, layer: BaseChannelLayer) -> None:
        channel: str | None = None
        try:
            while True:
                try:
                    if channel is None:
                        channel = await layer.new_channel()
                    # Joins the group, or renews the membership before the layer expires it.
                    await layer.group_add(events.RUNS_GROUP, channel)
                    await self._wake_on_nudges(layer, channel)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.warning("runner nudges: channel layer unavailable; polling meanwhile")
                    await asyncio.sleep(RETRY_INTERVAL)
        finally:
            if channel is not None:
                await _leave(layer, channel)

    async def _wake_on_nudges(self, layer: BaseChannelLayer, channel: str) -> None:
        """Wake the runner on every nudge, until the membership is due for renewal."""
        loop = asyncio.get_running_loop()
        renew_at = loop.time() + REJOIN_INTERVAL
        while (left := renew_at - loop.time()) > 0:
            try:
                await asyncio.wait_for(layer.receive(channel), timeout=left)
            except TimeoutError:
                return
            self.wake()


async def _leave(layer: BaseChannelLayer, channel: str) -> None:
    try:
        await layer.group_discard(events.RUNS_GROUP, channel)
    except Exception:
        logger.debug("runner nudges: could not leave the group", exc_info=True)
