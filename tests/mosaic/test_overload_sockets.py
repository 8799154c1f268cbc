"""Overload over real sockets: `manage.py serve` with one HTTP worker, held by the test.

The worker is held by construction — a send blocked on a database lock the test holds — so
whether a request is refused does not depend on the machine's speed. Once the worker has been
held for longer than the queue wait, a new request is answered 503 `unavailable` with
`Retry-After` at once: the wait it is refused within is shorter than the queue wait, which an
admission that waited before refusing could not answer within.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.console.api import LiveApi
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, is_postgres, serving

# The queue wait of the server under test: a refusal that waited it out would take this long.
QUEUE_SECONDS = 2.0


@contextmanager
def holding_thread(server: LiveServer, thread_id: int) -> Iterator[None]:
    """Hold what a send to the thread must lock first: the thread's row (PostgreSQL), the
    database's write lock (SQLite)."""
    url = server.database_url
    if is_postgres(url):
        import psycopg

        with psycopg.connect(url) as connection:
            connection.execute("SELECT id FROM broker_thread WHERE id = %s FOR UPDATE", [thread_id])
            yield
            connection.rollback()
        return
    connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def test_request_while_the_only_worker_is_held_past_the_wait_is_refused_at_once(
    tmp_path: Path,
) -> None:
    settings = {"MOSAIC_HTTP_WORKERS": "1", "MOSAIC_HTTP_QUEUE_SECONDS": str(QUEUE_SECONDS)}
    with serving(
        tmp_path, "overload_sockets", settings=settings, serve_arguments=("--no-runner",)
    ) as server:
        api = LiveApi(server.human_url)
        api.sign_in(HUMAN_USERNAME, PASSWORD)
        thread = api.create_thread(api.create_project("overload"), "held")
        held: dict[str, Any] = {}

        def send_held() -> None:
            with httpx.Client(base_url=server.human_url, cookies=api.client.cookies) as client:
                held["answer"] = client.post(
                    f"/api/chat/threads/{thread}/messages",
                    json={"body": "held"},
                    headers=api.write_headers(),
                    timeout=30,
                )

        sender = threading.Thread(target=send_held)
        with holding_thread(server, thread):
            sender.start()
            # The send takes the one worker at once and blocks there on the held lock; it has
            # held it for longer than the queue wait when the probe arrives.
            time.sleep(QUEUE_SECONDS + 0.5)
            began = time.monotonic()
            refused = api.client.get("/api/chat/projects")
            took = time.monotonic() - began
            still_held = sender.is_alive()
        sender.join(30)
        after = api.client.get("/api/chat/projects")
        api.close()

    assert refused.status_code == 503, refused.text
    assert refused.json()["error"] == "unavailable"
    assert refused.headers["Retry-After"] == "1"
    assert still_held  # refused while the worker was still held, not once it came free
    assert took < QUEUE_SECONDS  # the feature: told at once, not after the queue wait
    assert held["answer"].status_code == 201, held["answer"].text
    assert after.status_code == 200
