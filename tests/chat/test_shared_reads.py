"""Sockets of one stream share each read, and sharing never costs a socket a row (P3)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync

from chat.shared_reads import SharedReads, tick

# The reads run through Channels' `database_sync_to_async`, which checks the thread's database
# connection first (`close_old_connections`): a connection an earlier test left open in that
# thread is touched, so the database is declared rather than left to the order tests run in.
pytestmark = pytest.mark.django_db


class GatedRead:
    """A database read stand-in that waits for its gate, counting how often it runs."""

    def __init__(self, frames: list[tuple[int, str]]) -> None:
        self.frames = frames
        self.gate = threading.Event()
        self.runs = 0

    def __call__(self) -> list[tuple[int, str]]:
        self.runs += 1
        self.gate.wait(5)
        return self.frames


def test_frames_of_one_key_share_the_read_in_flight() -> None:
    async def scenario() -> tuple[tuple, tuple, int]:
        reads, read = SharedReads(), GatedRead([(1, "one")])
        first = asyncio.ensure_future(reads.frames("k", read=read))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(reads.frames("k", read=read))
        await asyncio.sleep(0.05)
        read.gate.set()
        return await first, await second, read.runs

    first, second, reads_made = async_to_sync(scenario)()
    assert first == second
    assert first[1] == [(1, "one")]
    assert reads_made == 1


def test_frames_of_other_keys_are_read_apart() -> None:
    async def scenario() -> int:
        reads, read = SharedReads(), GatedRead([])
        first = asyncio.ensure_future(reads.frames(("trail", 1), read=read))
        second = asyncio.ensure_future(reads.frames(("trail", 2), read=read))
        await asyncio.sleep(0.05)
        read.gate.set()
        await asyncio.gather(first, second)
        return read.runs

    assert async_to_sync(scenario)() == 2


def test_frames_not_before_a_later_nudge_starts_a_read_of_its_own() -> None:
    """The read in flight may predate the nudged row: a socket that must see the row asks for a
    read that began after its nudge."""

    async def scenario() -> tuple[int, bool]:
        reads, read = SharedReads(), GatedRead([])
        first = asyncio.ensure_future(reads.frames("k", read=read))
        await asyncio.sleep(0.05)
        nudged = tick()
        second = asyncio.ensure_future(reads.frames("k", read=read, not_before=nudged))
        await asyncio.sleep(0.05)
        read.gate.set()
        (_, _), (began, _) = await asyncio.gather(first, second)
        return read.runs, began > nudged

    assert async_to_sync(scenario)() == (2, True)


def test_frames_waiter_cancelled_leaves_the_read_to_the_others() -> None:
    async def scenario() -> list:
        reads, read = SharedReads(), GatedRead([(7, "seven")])
        leaving = asyncio.ensure_future(reads.frames("k", read=read))
        staying = asyncio.ensure_future(reads.frames("k", read=read))
        await asyncio.sleep(0.05)
        leaving.cancel()
        read.gate.set()
        _, result = await staying
        assert len(reads) == 0
        return result

    assert async_to_sync(scenario)() == [(7, "seven")]
