"""The HTTP request path on a bounded pool of long-lived workers (mosaic.edge.handler).

These tests run the real pool, so the request path runs on the pool's own threads with their own
database connections: they need committed data (`transactional_db`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.signals import request_started
from django.db import connection

from broker import refusals
from broker.models import Instance, Message, Project, Thread
from human.listener import build_human_application
from mosaic.edge.handler import Overloaded, WorkerPool
from mosaic.edge.listener import http_handler
from tests.support.businesses import make_business
from tests.support.listener_fixtures import PASSWORD
from tests.support.listeners import HUMAN, RawAnswer, call, http_scope, write_headers
from tests.support.waits import wait_for_async

ORIGIN = "http://127.0.0.1:7332"
ROOT = Path(__file__).resolve().parents[2]


def headers_for(method: str, cookies: str) -> list[tuple[bytes, bytes]]:
    """What the human's own page sends: its write headers, with the cookies it holds."""
    headers = [(b"host", b"127.0.0.1:7332")]
    if method != "GET":
        csrf = next(
            (
                part.split("=", 1)[1]
                for part in cookies.split("; ")
                if part.startswith("csrftoken=")
            ),
            None,
        )
        headers += [
            (k.lower().encode(), v.encode()) for k, v in write_headers(ORIGIN, csrf).items()
        ]
    if cookies:
        headers.append((b"cookie", cookies.encode()))
    return headers


async def acall(
    app: Any, method: str, path: str, body: bytes = b"", cookies: str = ""
) -> RawAnswer:
    scope = http_scope(HUMAN, method, path, headers_for(method, cookies), body)
    return await call(app, scope, body)


def sync_call(app: Any, method: str, path: str, body: bytes = b"", cookies: str = "") -> RawAnswer:
    answer: RawAnswer = async_to_sync(acall)(app, method, path, body, cookies)
    return answer


def header(answer: RawAnswer, name: str) -> str | None:
    return next((v.decode() for k, v in answer.headers if k.decode().lower() == name), None)


def cookies_of(answer: RawAnswer) -> str:
    """The cookies an answer set, as a Cookie header."""
    return "; ".join(
        v.decode().split(";", 1)[0] for k, v in answer.headers if k.lower() == b"set-cookie"
    )


def test_pool_runs_on_its_own_threads_and_bounds_them() -> None:
    """Work runs on at most `size` long-lived threads, reused from one call to the next."""
    pool = WorkerPool(size=2, wait=5)
    seen: set[str] = set()

    def work() -> str:
        seen.add(threading.current_thread().name)
        return threading.current_thread().name

    async def many() -> list[str]:
        return list(await asyncio.gather(*(pool.run(work) for _ in range(40))))

    names = async_to_sync(many)()
    assert len(names) == 40
    assert threading.current_thread().name not in seen
    assert 1 <= len(seen) <= 2
    assert all(name.startswith("mosaic-http") for name in seen)


def test_pool_held_past_its_wait_refuses_at_once_and_frees_the_worker_after() -> None:
    """A worker held longer than the wait is not expected back within it: a call is refused
    while the worker is still held (not after waiting), and runs once the work has ended."""
    pool = WorkerPool(size=1, wait=0.1)
    release = threading.Event()

    async def scenario() -> tuple[bool, bool, str]:
        holder = asyncio.ensure_future(pool.run(release.wait, 5))
        await asyncio.sleep(0.3)
        try:
            await pool.run(lambda: "ran")
            refused = False
        except Overloaded:
            refused = True
        still_held = not holder.done()
        release.set()
        await holder
        return refused, still_held, await pool.run(lambda: "ran")

    refused, still_held, after = async_to_sync(scenario)()
    assert refused and still_held
    assert after == "ran"


async def queued_behind_a_held_worker(
    pool: WorkerPool, ran: list[str], *, held: float, cancel: bool = False
) -> str:
    """How a call queued behind the pool's one worker, held for `held` seconds, ended: "ran",
    "refused" or "cancelled" (its client went away while it was queued, if `cancel`)."""
    release = threading.Event()
    holder = asyncio.ensure_future(pool.run(release.wait, 5))
    await asyncio.sleep(0)
    queued = asyncio.ensure_future(pool.run(ran.append, "queued"))
    await asyncio.sleep(held)
    if cancel:
        queued.cancel()
        await asyncio.sleep(0)
    release.set()
    await holder
    try:
        await queued
    except Overloaded:
        return "refused"
    except asyncio.CancelledError:
        return "cancelled"
    return "ran"


def test_pool_queued_call_that_waited_past_its_wait_is_refused_and_never_runs() -> None:
    """The bound on every answer: a call queued behind a stall that outlasts the wait."""
    pool, ran = WorkerPool(size=1, wait=0.1), []
    assert async_to_sync(queued_behind_a_held_worker)(pool, ran, held=0.3) == "refused"
    assert ran == []


def test_pool_queued_call_behind_a_stall_within_its_wait_runs() -> None:
    pool, ran = WorkerPool(size=1, wait=5), []
    assert async_to_sync(queued_behind_a_held_worker)(pool, ran, held=0.05) == "ran"
    assert ran == ["queued"]


def test_pool_cancelled_call_still_queued_never_runs() -> None:
    """A client that goes away before its call reached a worker takes the call with it, and
    the queue is free of it."""
    pool, ran = WorkerPool(size=1, wait=5), []
    ended = async_to_sync(queued_behind_a_held_worker)(pool, ran, held=0.05, cancel=True)
    assert ended == "cancelled"
    assert ran == []
    assert async_to_sync(pool.run)(lambda: "after") == "after"


async def waited(pool: WorkerPool) -> tuple[bool, float]:
    """Whether a call was refused `Overloaded`, and how long it took to find out."""
    began = time.monotonic()
    try:
        await pool.run(lambda: None)
    except Overloaded:
        return True, time.monotonic() - began
    return False, time.monotonic() - began


def test_pool_through_a_stall_shorter_than_the_wait_refuses_no_one() -> None:
    """Busy workers alone are a stall, not an overload (a slow commit at half capacity, P7):
    calls arriving well into a stall shorter than the wait still get a worker."""
    pool = WorkerPool(size=1, wait=2.0)
    release = threading.Event()

    async def scenario() -> list[tuple[bool, float]]:
        holder = asyncio.ensure_future(pool.run(release.wait, 5))
        calls = []
        for pause in (0.1, 1.0, 0.1):  # the last two arrive over a second into the stall
            await asyncio.sleep(pause)
            calls.append(asyncio.ensure_future(waited(pool)))
        await asyncio.sleep(0.1)
        release.set()
        await holder
        return [await call for call in calls]

    assert [refused for refused, _ in async_to_sync(scenario)()] == [False, False, False]


def test_pool_worker_stays_taken_while_cancelled_work_still_runs() -> None:
    """A client that goes away cancels the waiting coroutine, not the worker's work: the
    worker is busy until that work ends, so the bound holds."""
    pool = WorkerPool(size=1, wait=0.1)
    started, release = threading.Event(), threading.Event()

    def held() -> None:
        started.set()
        release.wait(5)

    async def scenario() -> bool:
        holder = asyncio.ensure_future(pool.run(held))
        await wait_for_async(started.is_set, what="the held work starting on the worker")
        holder.cancel()
        await asyncio.sleep(0.25)
        try:
            await pool.run(lambda: None)
            refused = False
        except Overloaded:
            refused = True
        release.set()
        await asyncio.sleep(0.05)
        return refused

    assert async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_request_path_runs_on_workers_that_keep_their_connection() -> None:
    """Each request runs on a pool thread, and a worker's database connection outlives its
    request (SQLite: persistent; PostgreSQL: the pool's)."""
    make_business("acme", human="ada")
    pool = WorkerPool(size=2, wait=5)
    app = build_human_application(http_handler(pool))
    served: list[tuple[str, int | None]] = []

    def record(**_: object) -> None:
        served.append((threading.current_thread().name, id(connection.connection)))

    request_started.connect(record)
    try:
        for _ in range(12):
            answer = sync_call(app, "GET", "/api/chat/projects")
            assert answer.status == 401
    finally:
        request_started.disconnect(record)
    threads = {name for name, _ in served}
    assert len(served) == 12
    assert 1 <= len(threads) <= 2
    assert all(name.startswith("mosaic-http") for name in threads)
    if connection.vendor == "sqlite":
        # From the second request of each worker on, it finds its connection still open.
        connections_per_thread = {
            name: {conn for who, conn in served[i + 1 :] if who == name}
            for i, (name, _) in enumerate(served)
        }
        assert all(len(kept) <= 1 for kept in connections_per_thread.values())


@pytest.mark.django_db(transaction=True)
def test_send_while_every_worker_is_busy_answers_503_retry_after_and_stores_nothing() -> None:
    """Bounded load: a send that finds every worker held past the wait is answered 503
    `unavailable` with Retry-After, at once and having stored nothing; once a worker is free
    it goes through."""
    business = make_business("acme", human="ada")
    User.objects.create_user("ada", password=PASSWORD)
    project = Project.objects.create(business=business, name="p", created_by="ada")
    instance = Instance.objects.get(business=business)
    thread = Thread.objects.create(project=project, name="t", owner="ada", instance=instance)
    pool = WorkerPool(size=1, wait=0.2)
    app = build_human_application(http_handler(pool))
    credentials = f'{{"username": "ada", "password": "{PASSWORD}"}}'.encode()
    login = sync_call(app, "POST", "/api/auth/login", credentials)
    assert login.status == 200, login.body
    cookies = cookies_of(login)
    path = f"/api/chat/threads/{thread.pk}/messages"
    release = threading.Event()

    async def while_busy() -> RawAnswer:
        holder = asyncio.ensure_future(pool.run(release.wait, 10))
        await asyncio.sleep(0.3)
        try:
            return await acall(app, "POST", path, b'{"body": "hello"}', cookies)
        finally:
            release.set()
            await holder

    busy: RawAnswer = async_to_sync(while_busy)()
    assert busy.status == 503
    assert header(busy, "retry-after") == "1"
    assert busy.json()["error"] == refusals.UNAVAILABLE
    assert Message.objects.count() == 0
    sent = sync_call(app, "POST", path, b'{"body": "hello"}', cookies)
    assert sent.status == 201, sent.body
    assert Message.objects.count() == 1


def test_pool_logs_an_overload_once_when_it_begins_and_once_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not a line per refused request: each has its access-log line already (L6)."""
    pool = WorkerPool(size=1, wait=0.1)
    release = threading.Event()

    async def scenario() -> list[bool]:
        holder = asyncio.ensure_future(pool.run(release.wait, 5))
        await asyncio.sleep(0.3)
        refused = [(await waited(pool))[0] for _ in range(3)]
        release.set()
        await holder
        await pool.run(lambda: None)
        return refused

    with caplog.at_level(logging.WARNING, logger="mosaic.chat"):
        assert async_to_sync(scenario)() == [True, True, True]
    assert [r.getMessage() for r in caplog.records if r.name == "mosaic.chat"] == [
        "overload began: refusing",
        "overload ended",
    ]


@pytest.mark.parametrize(
    ("database_url", "workers"),
    [("sqlite:///unused.sqlite3", "2"), ("postgres://nobody@127.0.0.1:1/unused", "4")],
)
def test_the_default_number_of_workers_follows_the_database(
    database_url: str, workers: str
) -> None:
    """Two on SQLite; four on PostgreSQL, whose round trips a worker waits through
    (docs/decisions/speed-and-load.md). Read from the settings alone: nothing connects."""
    environment = {
        name: value for name, value in os.environ.items() if name != "MOSAIC_HTTP_WORKERS"
    }
    environment |= {"DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "mosaic.settings"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; print(settings.MOSAIC_HTTP_WORKERS)",
        ],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout.strip()) == (0, workers), done.stderr
