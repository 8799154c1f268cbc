"""Pushes to the channel layer, sent only after the transaction that stored the row commits.

A push is a nudge naming the new row's id, never its content: each consumer reads the rows
after its own last id from the database, through the broker's scoping, so a dropped or
reordered push loses nothing and shows nobody a row outside their view.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
from collections.abc import Callable
from functools import partial

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from django.db import transaction

logger = logging.getLogger("mosaic.events")

TRAIL_NUDGE = "trail.nudge"
THREAD_NUDGE = "thread.nudge"
# A turn's reply state or draft changed (SPEC §7.1); the id is the turn's.
TURN_NUDGE = "turn.nudge"
# Runners of every process listen here for turns waiting; the nudge carries nothing.
RUNS_GROUP = "runs"
RUNS_NUDGE = "runs.nudge"


def trail_group(business_id: int) -> str:
    return f"trail.{business_id}"


def thread_group(thread_id: int) -> str:
    return f"thread.{thread_id}"


_server_loop: asyncio.AbstractEventLoop | None = None


def deliver_on(loop: asyncio.AbstractEventLoop) -> None:
    """Send pushes on the server's event loop, whichever thread commits.

    The in-memory channel layer's queues belong to the loop the consumers wait on; a push
    from a thread with no tie to it (a runner's worker) would sit unnoticed until that loop
    woke for something else. The listeners call this once they run.
    """
    global _server_loop
    _server_loop = loop


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def shared_layer() -> BaseChannelLayer | None:
    """The channel layer when it reaches other processes (Redis); None for an in-memory one."""
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None
    return layer


# Pushes handed to the server's loop and not yet sent, in the order they were committed.
_outbox: list[tuple[BaseChannelLayer, str, dict[str, object]]] = []
_outbox_lock = threading.Lock()


def _send(group: str, message: dict[str, object], *, layer: BaseChannelLayer | None) -> None:
    if layer is None:
        return
    loop = _server_loop
    if loop is not None and loop.is_running():
        # The committing thread hands the push to the loop and goes on: it need not wait. A
        # turn's three pushes wake the loop once: while a drain is on its way, the next push
        # only joins the outbox.
        with _outbox_lock:
            _outbox.append((layer, group, message))
            if len(_outbox) > 1:
                return
        if _running_loop() is loop:
            loop.call_soon(_drain, loop)
        else:
            loop.call_soon_threadsafe(_drain, loop)
        return
    # No loop serves here (a runner, a command): the push goes out on this process's own loop,
    # and the committing thread waits for it, so a command that ends next loses none.
    with _own_lock:
        sent = asyncio.run_coroutine_threadsafe(_deliver(layer, group, message), _own_loop())
    sent.result()


# The loop that sends the pushes of a process no loop serves, in a thread of its own, kept while
# the process sends. A new loop per push, as `async_to_sync` makes, has channels-redis connect
# anew each time: about 3 ms of CPU a push, against 0.2 ms on a kept loop.
_own: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None
_own_lock = threading.Lock()


def _own_loop() -> asyncio.AbstractEventLoop:
    """This process's push loop, started at its first push (call with `_own_lock` held)."""
    global _own
    if _own is None:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="pushes", daemon=True)
        thread.start()
        _own = (loop, thread)
    return _own[0]


def close_own_loop() -> None:
    """Let the pushes on their way finish, then stop and close this process's push loop and
    its connections; a later push starts another."""
    global _own
    with _own_lock:
        own, _own = _own, None
    if own is None:
        return
    loop, thread = own

    async def settle() -> None:
        current = asyncio.current_task()
        await asyncio.gather(*(task for task in asyncio.all_tasks() if task is not current))

    asyncio.run_coroutine_threadsafe(settle(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()


def _forget_own_loop() -> None:
    """In a forked child: the push loop's thread did not come along."""
    global _own, _own_lock
    _own, _own_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_own_loop)


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    with _outbox_lock:
        pushes = _outbox[:]
        _outbox.clear()
    loop.create_task(_deliver_in_order(pushes))


async def _deliver_in_order(pushes: list[tuple[BaseChannelLayer, str, dict[str, object]]]) -> None:
    """The pushes, in order; those of one layer (in practice all) handed to it at once, so a
    layer that can (`mosaic.layers`) reads the members of all their groups in one round trip."""
    for layer, run in itertools.groupby(pushes, key=lambda push: push[0]):
        sends = [(group, message) for _, group, message in run]
        send_many = getattr(layer, "group_send_many", None)
        if send_many is None:
            for group, message in sends:
                await _deliver(layer, group, message)
            continue
        try:
            await send_many(sends)
        except Exception:
            # The rows are committed and are the record; lost nudges are recovered by the
            # next read.
            logger.warning("pushes to %s failed", [group for group, _ in sends], exc_info=True)


async def _deliver(layer: BaseChannelLayer, group: str, message: dict[str, object]) -> None:
    try:
        await layer.group_send(group, message)
    except Exception:
        # The row is committed and is the record; a lost nudge is recovered by the next read.
        logger.warning("push to %s failed", group, exc_info=True)


def push_after_commit(group: str, *, type: str, row_id: int) -> None:
    """Nudge `group` about row `row_id` once the current transaction commits."""
    send_after_commit(group, {"type": type, "id": row_id})


def send_after_commit(group: str, message: dict[str, object]) -> None:
    """Send `message` to `group` once the current transaction commits, in commit order with
    every other push of this process."""
    # The group's name rides along: one channel of each process follows many groups
    # (`chat.fan_out`).
    transaction.on_commit(
        lambda: _send(group, {**message, "group": group}, layer=get_channel_layer())
    )


_runners_here: set[Callable[[], None]] = set()


def wake_runners_here(wake: Callable[[], None]) -> Callable[[], None]:
    """Call `wake` whenever this process commits a turn; returns the call that stops it."""
    _runners_here.add(wake)
    return partial(_runners_here.discard, wake)


def wake_runners_after_commit() -> None:
    """Once the current transaction commits, tell runners a turn waits: runners of this
    process directly, the others through the channel layer. Runners poll as well, so a lost
    nudge only delays a reply."""
    transaction.on_commit(_wake_runners)


def _wake_runners() -> None:
    for wake in list(_runners_here):
        wake()
    # An in-memory layer reaches no runner but this process's, woken just now.
    _send(RUNS_GROUP, {"type": RUNS_NUDGE}, layer=shared_layer())
