"""The load generator: its own process, open-loop on a fixed schedule (closed-loop for P1).

`python -m bench.loadgen '<json config>'` runs one scenario against one server and prints its
result as one JSON line. Open loop: send `i` is due at its scheduled time whatever happened to
the sends before it, and every latency is measured from that time, so a stalled server shows as
latency instead of as fewer requests (no coordinated omission). P1's closed loop keeps a fixed
number of sends in flight instead, each sent as soon as the one before it was answered.

The same scenarios drive the product (tester listener: no sign-in) and the baseline; only the
paths and the frame format differ (`Target`).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import websockets.exceptions
from websockets.asyncio.client import ClientConnection, connect

from bench.cpu import tree_cpu_seconds
from bench.httpclient import Pool
from bench.stats import summary

TAG = re.compile(r"bench (\w+) (\d+)")
# The row's own id: the first "id" of a frame, product and baseline alike.
ROW_ID = re.compile(r'"id": (\d+)')
CONNECT_AT_ONCE = 10
CONNECT_ATTEMPTS = 5


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


@dataclass
class Target:
    kind: str  # "product" or "baseline"
    port: int
    thread_ids: list[int] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pool(self, size: int) -> Pool:
        headers = {
            "Origin": self.origin,
            "Sec-Fetch-Site": "same-origin",
            "Content-Type": "application/json",
        }
        return Pool("127.0.0.1", self.port, size, headers)

    def send_path(self, index: int) -> str:
        if self.kind == "baseline":
            return "/send"
        thread = self.thread_ids[index % len(self.thread_ids)]
        return f"/api/chat/threads/{thread}/messages"

    async def console_url(self, pool: Pool, quiet_thread: int | None = None) -> str:
        if self.kind == "baseline":
            return f"ws://127.0.0.1:{self.port}/ws/chat/"
        if quiet_thread is not None:
            return f"ws://127.0.0.1:{self.port}/ws/chat/threads/{quiet_thread}/?batch=1"
        # Start after the newest row: a Console opened now, not a replay of earlier runs.
        rows = (await pool.get("/api/trail?limit=1")).json()["rows"]
        after = rows[-1]["id"] if rows else 0
        return f"ws://127.0.0.1:{self.port}/ws/trail/?after={after}&batch=1"


# The product's Consoles ask for the rows of one read in one frame (`batch=1`), as its own
# Console page does; the baseline sends one frame per row.
SEVERAL_ROWS = {"trail.rows": ("trail.row", "row"), "messages": ("message", "message")}


def row_frames(text: str) -> list[str]:
    """A frame as one-row frames: a frame of several rows is split, in order."""
    if not text.startswith('{"type": "trail.rows"') and not text.startswith('{"type": "messages"'):
        return [text]
    frame = json.loads(text)
    single, field = SEVERAL_ROWS[frame["type"]]
    return [json.dumps({"type": single, field: row}) for row in frame["rows"]]


class Console:
    """One open socket, recording when each tagged row arrived."""

    def __init__(self, run: str) -> None:
        self.run = run
        self.arrivals: dict[int, float] = {}
        self.duplicates = 0
        self.out_of_order = 0
        self.highest_id = -1
        self.retries = 0
        self.frames: list[tuple[float, str]] = []
        self.keep_frames = False
        self.socket: ClientConnection | None = None
        self.task: asyncio.Task[None] | None = None
        self.closed_code: int | None = None

    async def open(self, url: str, origin: str) -> None:
        # A server that cannot accept in time closes the handshake (daphne's connect timeout);
        # a browser would retry, and so does this, counting the retries.
        for attempt in range(CONNECT_ATTEMPTS):
            try:
                self.socket = await connect(
                    url, origin=origin, max_queue=None, ping_interval=None, open_timeout=60
                )
                break
            except (OSError, EOFError, TimeoutError, websockets.exceptions.InvalidMessage):
                if attempt == CONNECT_ATTEMPTS - 1:
                    raise
                self.retries += 1
                await asyncio.sleep(0.5 * 2**attempt)
        self.task = asyncio.create_task(self.listen())

    async def listen(self) -> None:
        assert self.socket is not None
        try:
            async for frame in self.socket:
                now = time.perf_counter()
                for text in row_frames(frame if isinstance(frame, str) else frame.decode()):
                    self.arrived(now, text)
        except Exception:
            pass
        finally:
            self.closed_code = self.socket.close_code

    def arrived(self, now: float, text: str) -> None:
        """One row's frame arrived at `now`."""
        if self.keep_frames:
            self.frames.append((now, text))
        found = TAG.search(text)
        if found is None or found.group(1) != self.run:
            return
        seq = int(found.group(2))
        if seq in self.arrivals:
            self.duplicates += 1
            return
        # Out of order: a row arriving after one with a greater id (the order of commits,
        # which is not the order the sends were due in).
        row_id = ROW_ID.search(text)
        if row_id is not None:
            if int(row_id.group(1)) < self.highest_id:
                self.out_of_order += 1
            self.highest_id = max(self.highest_id, int(row_id.group(1)))
        self.arrivals[seq] = now

    async def close(self) -> None:
        if self.socket is not None:
            await self.socket.close()
        if self.task is not None:
            await asyncio.wait([self.task], timeout=5)


async def open_consoles(
    target: Target, pool: Pool, count: int, run: str, quiet_thread: int | None = None
) -> list[Console]:
    url = await target.console_url(pool, quiet_thread)
    consoles = [Console(run) for _ in range(count)]
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)

    async def one(console: Console) -> None:
        async with gate:
            await console.open(url, target.origin)

    await asyncio.gather(*(one(console) for console in consoles))
    return consoles


async def open_loop(
    rate: float, count: int, action: Any, window: float | None = None
) -> tuple[float, list[tuple[int, float, float, Any]]]:
    """Start `action(i)` at `start + i / rate`; each answer is (i, scheduled, done, status).

    With `window`, whatever has not answered `window` seconds after the start is cancelled:
    a server offered more than it can take is measured by what it completed in the window.
    """
    return await open_loop_at([index / rate for index in range(count)], action, window)


async def open_loop_at(
    offsets: list[float], action: Any, window: float | None = None
) -> tuple[float, list[tuple[int, float, float, Any]]]:
    """Start `action(i)` at `start + offsets[i]`, whatever became of the earlier ones."""
    start = time.perf_counter() + 0.05
    results: list[tuple[int, float, float, Any]] = []

    async def one(index: int, due: float) -> None:
        try:
            status = await action(index)
        except asyncio.CancelledError:
            raise
        except Exception:
            status = -1
        results.append((index, due, time.perf_counter(), status))

    async def schedule() -> None:
        for index, offset in enumerate(offsets):
            due = start + offset
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(index, due)))

    tasks: list[asyncio.Task[None]] = []
    scheduler = asyncio.create_task(schedule())
    if window is None:
        await scheduler
        await asyncio.gather(*tasks)
    else:
        await asyncio.sleep(start + window - time.perf_counter())
        scheduler.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(scheduler, *tasks, return_exceptions=True)
    return start, results


def send_figures(
    start: float, results: list[tuple[int, float, float, int]], window: float | None = None
) -> dict[str, Any]:
    ok = [r for r in results if 200 <= r[3] < 300]
    statuses = Counter(str(r[3]) for r in results)
    end = start + window if window else max((r[2] for r in results), default=start)
    return {
        "sent": len(results),
        "ok": len(ok),
        "statuses": dict(statuses),
        "elapsed": end - start,
        "throughput": len(ok) / (end - start) if end > start else 0.0,
        "latency": summary([ms(r[2] - r[1]) for r in ok]),
    }


# --- scenarios ------------------------------------------------------------------------------


async def sends(config: dict[str, Any], target: Target) -> dict[str, Any]:
    """P1: POST sends at a fixed rate; throughput and latency of the answers."""
    pool = target.pool(config.get("connections", 32))
    run = config["run"]

    async def action(index: int) -> int:
        answer = await pool.post(target.send_path(index), {"body": f"bench {run} {index}"})
        return answer.status

    await pool.warm()
    window = config.get("window")
    count = int(config["rate"] * (window or config["duration"]))
    start, results = await open_loop(config["rate"], count, action, window)
    pool.close()
    return send_figures(start, results, window)


async def closed(config: dict[str, Any], target: Target) -> dict[str, Any]:
    """P1: `concurrency` senders, each sending again as soon as its answer came, for `window`
    seconds; sends/s is what was answered 2xx within the window (the rest is cancelled). With
    `consoles`, that many trail Consoles are open throughout (P7's capacity, as P7 runs)."""
    concurrency = config.get("concurrency", 8)
    pool = target.pool(concurrency)
    run = config["run"]
    window = config["window"]
    await pool.warm()
    count = config.get("consoles", 0)
    consoles = await open_consoles(target, pool, count, run) if count else []
    results: list[tuple[int, float, float, int]] = []
    counter = iter(range(10**9))

    async def sender() -> None:
        while True:
            index = next(counter)
            began = time.perf_counter()
            try:
                answer = await pool.post(target.send_path(index), {"body": f"bench {run} {index}"})
                status = answer.status
            except asyncio.CancelledError:
                raise
            except Exception:
                status = -1
            results.append((index, began, time.perf_counter(), status))

    start = time.perf_counter()
    senders = [asyncio.create_task(sender()) for _ in range(concurrency)]
    await asyncio.sleep(window)
    for task in senders:
        task.cancel()
    await asyncio.gather(*senders, return_exceptions=True)
    for console in consoles:
        await console.close()
    pool.close()
    figures = send_figures(start, results, window)
    figures["concurrency"] = concurrency
    return figures


async def stream(config: dict[str, Any], target: Target) -> list[dict[str, Any]]:
    """P2, P3 and the soak: sends at a fixed rate, read back at `consoles` open sockets.

    The sockets open once; each of `bursts` windows is then measured on its own.
    """
    pool = target.pool(config.get("connections", 16))
    run = config["run"]
    consoles = await open_consoles(target, pool, config["consoles"], run)
    await asyncio.sleep(config.get("settle", 0.5))
    results = []
    for burst in range(config.get("bursts", 1)):
        results.append(await one_burst(config, target, pool, consoles, burst))
    for console in consoles:
        await console.close()
    pool.close()
    return results


async def one_burst(
    config: dict[str, Any], target: Target, pool: Pool, consoles: list[Console], burst: int
) -> dict[str, Any]:
    run = config["run"]
    offset = burst * 1_000_000  # each burst's rows are its own

    async def action(index: int) -> int:
        body = {"body": f"bench {run} {offset + index}"}
        return (await pool.post(target.send_path(index), body)).status

    count = int(config["rate"] * config["duration"])
    cpu_pid = config.get("cpu_pid")
    cpu_before = tree_cpu_seconds(cpu_pid) if cpu_pid else None
    start, results = await open_loop(config["rate"], count, action)
    due_at = {offset + r[0]: r[1] for r in results}
    sent_ok = {offset + r[0] for r in results if 200 <= r[3] < 300}
    # Wait for stragglers: until every Console has every row, or the drain time is up.
    deadline = time.perf_counter() + config.get("drain", 3.0)
    while time.perf_counter() < deadline:
        if all(sent_ok <= c.arrivals.keys() for c in consoles):
            break
        await asyncio.sleep(0.05)
    # P1c: the server's CPU over the burst, until its rows had reached every Console.
    cpu = tree_cpu_seconds(cpu_pid) - cpu_before if cpu_pid and cpu_before is not None else None
    delivery: list[float] = []
    last: list[float] = []
    for index in sent_ok:
        times = [c.arrivals[index] for c in consoles if index in c.arrivals]
        delivery += [ms(t - due_at[index]) for t in times]
        if len(times) == len(consoles):
            last.append(ms(max(times) - due_at[index]))
    expected = len(sent_ok) * len(consoles)
    received = sum(len(sent_ok & c.arrivals.keys()) for c in consoles)
    figures = {
        "sends": send_figures(start, results),
        "consoles": len(consoles),
        "rows": len(sent_ok),
        "delivery": summary(delivery),
        "last_console": summary(last),
        "lost": expected - received,
        "duplicates": sum(c.duplicates for c in consoles),
        "out_of_order": sum(c.out_of_order for c in consoles),
        "closed_early": sum(1 for c in consoles if c.closed_code is not None),
        "connect_retries": sum(c.retries for c in consoles),
        "cpu_seconds": cpu,
        "cpu_per_send": cpu / len(sent_ok) if cpu is not None and sent_ok else None,
    }
    for console in consoles:
        console.duplicates = console.out_of_order = 0
    return figures


async def overload(config: dict[str, Any], target: Target) -> dict[str, Any]:
    """P7: open-loop at `low` sends/s for `calm_seconds` (the nominal), then at `high` for
    `high_seconds`, then at `low` again for `low_seconds`, with one trail Console open
    throughout. Every send gets `deadline` seconds to be answered; the result is one record per
    send (see `bench.overload`), times relative to the start."""
    deadline = config.get("deadline", 5.0)
    high, low = config["high"], config["low"]
    calm = config["calm_seconds"]
    offsets = [i / low for i in range(int(low * calm))]
    offsets += [calm + i / high for i in range(int(high * config["high_seconds"]))]
    drop = calm + config["high_seconds"]
    offsets += [drop + i / low for i in range(int(low * config["low_seconds"]))]
    # Enough connections that the client never holds a send back: every send may wait out
    # its deadline, so as many as can be in flight at the high rate.
    pool = target.pool(min(2000, int(high * deadline) + 16))
    run = config["run"]
    (console,) = await open_consoles(target, pool, 1, run)
    await asyncio.sleep(0.5)

    async def action(index: int) -> tuple[int, bool, str | None]:
        body = {"body": f"bench {run} {index}"}
        try:
            async with asyncio.timeout(deadline):
                answer = await pool.post(target.send_path(index), body)
        except TimeoutError:
            return -2, False, None
        error = None
        if answer.status >= 400:
            try:
                error = answer.json().get("error")
            except ValueError:
                error = None
        return answer.status, "retry-after" in answer.headers, error

    start, results = await open_loop_at(offsets, action)
    ok = {r[0] for r in results if isinstance(r[3], tuple) and 200 <= r[3][0] < 300}
    drain_until = time.perf_counter() + config.get("drain", 5.0)
    while time.perf_counter() < drain_until and not ok <= console.arrivals.keys():
        await asyncio.sleep(0.05)
    closed_early = console.closed_code
    await console.close()
    pool.close()
    records = []
    for index, due, done, answer in sorted(results):
        status, retry_after, error = answer if isinstance(answer, tuple) else (-1, False, None)
        arrived = console.arrivals.get(index)
        records.append(
            (
                due - start,
                None if status == -2 else done - start,
                status,
                retry_after,
                error,
                None if arrived is None else arrived - start,
            )
        )
    return {
        "records": records,
        "calm_end": calm,
        "drop_at": drop,
        "end": drop + config["low_seconds"],
        "console_closed": closed_early,
        "duplicates": console.duplicates,
        "connect_retries": console.retries,
    }


async def reads(config: dict[str, Any], target: Target) -> dict[str, Any]:
    """P4: GETs of each path at a fixed rate."""
    pool = target.pool(config.get("connections", 8))
    figures = {}
    for name, path in config["paths"].items():
        await pool.get(path)  # warm: first-use costs are not what P4 measures

        async def action(index: int, path: str = path) -> int:
            return (await pool.get(path)).status

        count = int(config["rate"] * config["duration"])
        start, results = await open_loop(config["rate"], count, action)
        figures[name] = send_figures(start, results)
    pool.close()
    return figures


async def replies(config: dict[str, Any], target: Target) -> dict[str, Any]:
    """P5: a turn to each of `thread_ids` at a fixed rate; latency until its reply's trail row."""
    pool = target.pool(config.get("connections", 8))
    run = config["run"]
    (console,) = await open_consoles(target, pool, 1, run)
    console.keep_frames = True
    await asyncio.sleep(0.3)
    threads = target.thread_ids

    async def action(index: int) -> int:
        path = f"/api/chat/threads/{threads[index]}/messages"
        return (await pool.post(path, {"body": f"bench {run} {index}"})).status

    start, results = await open_loop(config["rate"], len(threads), action)
    sent = {r[0]: r[1] for r in results if 200 <= r[3] < 300}
    deadline = time.perf_counter() + config.get("drain", 5.0)
    replied: dict[int, float] = {}
    index_of = {thread: index for index, thread in enumerate(threads)}
    while time.perf_counter() < deadline:
        for arrived, text in console.frames:
            row = json.loads(text).get("row") or {}
            if row.get("from_role") == "assistant" and row.get("thread") in index_of:
                replied.setdefault(index_of[row["thread"]], arrived)
        console.frames.clear()
        if all(index in replied for index in sent):
            break
        await asyncio.sleep(0.05)
    await console.close()
    pool.close()
    latency = [ms(replied[i] - due) for i, due in sent.items() if i in replied]
    return {
        "sends": send_figures(start, results),
        "reply": summary(latency),
        "lost": len(sent) - len([i for i in sent if i in replied]),
    }


async def idle(config: dict[str, Any], target: Target) -> dict[str, Any]:
    """P6: open `consoles` sockets, say so, hold them until told to close."""
    pool = target.pool(2)
    began = time.perf_counter()
    consoles = await open_consoles(
        target, pool, config["consoles"], config["run"], config.get("quiet_thread")
    )
    opened = time.perf_counter() - began
    print(json.dumps({"ready": len(consoles), "seconds": opened}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    alive = sum(1 for c in consoles if c.closed_code is None)
    await asyncio.gather(*(c.close() for c in consoles))
    pool.close()
    return {
        "consoles": len(consoles),
        "open_seconds": opened,
        "alive_at_end": alive,
        "connect_retries": sum(c.retries for c in consoles),
    }


SCENARIOS = {
    "sends": sends,
    "closed": closed,
    "overload": overload,
    "stream": stream,
    "reads": reads,
    "replies": replies,
    "idle": idle,
}


def main() -> None:
    config = json.loads(sys.argv[1])
    target = Target(**config["target"])
    result = asyncio.run(SCENARIOS[config["scenario"]](config, target))
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    main()
