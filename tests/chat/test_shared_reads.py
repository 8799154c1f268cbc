"""Sockets of one stream share each read, and sharing never costs a socket a row (P3)."""

from __future__ import annotations

import asyncio
import threading

from asgiref.sync import async_to_sync

from chat.shared_reads import SharedReads, tick


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


def test_frames_nudged_before_a_read_began_joins_it() -> None:
    async def scenario() -> tuple[list, list, int]:
        reads, read = SharedReads(), GatedRead([(1, "one")])
        nudged = tick()
        first = asyncio.ensure_future(reads.frames("k", nudged=nudged, read=read))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(reads.frames("k", nudged=nudged, read=read))
        await asyncio.sleep(0.05)
        read.gate.set()
        return await first, await second, read.runs

    first, second, reads_made = async_to_sync(scenario)()
    assert first == second == [(1, "one")]
    assert reads_made == 1


def test_frames_nudged_after_a_read_began_starts_its_own() -> None:
    """The earlier read may predate the nudged row: joining it could lose that row."""

    async def scenario() -> int:
        reads, read = SharedReads(), GatedRead([])
        first = asyncio.ensure_future(reads.frames("k", nudged=tick(), read=read))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(reads.frames("k", nudged=tick(), read=read))
        await asyncio.sleep(0.05)
        read.gate.set()
        await asyncio.gather(first, second)
        return read.runs

    assert async_to_sync(scenario)() == 2


def test_frames_waiter_cancelled_leaves_the_read_to_the_others() -> None:
    async def scenario() -> list:
        reads, read = SharedReads(), GatedRead([(7, "seven")])
        nudged = tick()
        leaving = asyncio.ensure_future(reads.frames("k", nudged=nudged, read=read))
        staying = asyncio.ensure_future(reads.frames("k", nudged=nudged, read=read))
        await asyncio.sleep(0.05)
        leaving.cancel()
        read.gate.set()
        result = await staying
        assert len(reads) == 0
        return result

    assert async_to_sync(scenario)() == [(7, "seven")]
