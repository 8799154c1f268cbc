"""One database read per stream and cursor, however many sockets of this process wait on it.

A row nudges every socket of its group at once: five hundred Consoles of one business would make
five hundred identical reads, one after another on the database thread. Sockets that show the
same stream to the same actor from the same cursor share one read and one encoding instead.

Sharing must not cost a row. A read that began before a socket's nudge may predate the nudged
row; the socket knows from the result (`Read.began`, and whether the row came) and then asks for
a read that began after its nudge (`not_before`), which sees the row: the nudge is sent only
after the row commits.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from channels.db import database_sync_to_async

# One clock for nudges and reads, in the order the event loop saw them.
_ticks = itertools.count(1)

Frames = list[tuple[int, str]]


def tick() -> int:
    """The moment, in the event loop's order, that a nudge arrived or a read began."""
    return next(_ticks)


@dataclass
class Read:
    began: int
    frames: asyncio.Future[Frames]


class SharedReads:
    """Reads in flight, by key: (stream, actor, cursor)."""

    def __init__(self) -> None:
        self._in_flight: dict[Hashable, Read] = {}

    async def frames(
        self, key: Hashable, *, read: Callable[[], Frames], not_before: int = 0
    ) -> tuple[int, Frames]:
        """The frames after the key's cursor, and the tick their read began: the read in
        flight for the key when it began after `not_before`, else a new one."""
        current = self._in_flight.get(key)
        if current is None or current.began < not_before:
            current = Read(
                began=tick(), frames=asyncio.ensure_future(database_sync_to_async(read)())
            )
            self._in_flight[key] = current
            current.frames.add_done_callback(lambda _: self._forget(key, current))
        # Shielded: one socket closing mid-read must not cancel the read for the others.
        return current.began, await asyncio.shield(current.frames)

    def _forget(self, key: Hashable, read: Read) -> None:
        if self._in_flight.get(key) is read:
            del self._in_flight[key]
        if not read.frames.cancelled():
            # Every waiter has seen the outcome, or has gone; either way it is not news.
            read.frames.exception()

    def __len__(self) -> int:
        return len(self._in_flight)
