"""A PostgreSQL server sampled from a thread of its own while a scenario runs: P5's stream-lock
waiters, P7's connections."""

from __future__ import annotations

import threading
from typing import Any, Self


class PostgresSampler:
    """Queries a PostgreSQL server from a thread of its own while its `with` block runs: `begin`
    once, then `look` every `every` seconds. On SQLite (a URL that is not PostgreSQL's) it
    samples nothing."""

    every = 0.25

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def __enter__(self) -> Self:
        if self.url.startswith("postgres"):
            self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)

    def sample(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            self.begin(connection)
            while not self.stop.wait(self.every):
                self.look(connection)

    def begin(self, connection: Any) -> None:
        """Once, before the first look."""

    def look(self, connection: Any) -> None:
        raise NotImplementedError
