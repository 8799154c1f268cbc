"""The raw database commit floor of P1: one connection committing one-row inserts.

`python -m bench.floor sqlite PATH SECONDS` uses the product's own journal settings (WAL,
synchronous=NORMAL); `python -m bench.floor postgres URL SECONDS` commits with
`synchronous_commit` on (PostgreSQL's default, checked). Prints commits/s as JSON.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time


def sqlite_floor(path: str, seconds: float) -> dict[str, object]:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, body TEXT)")
    commits = 0
    end = time.perf_counter() + seconds
    began = time.perf_counter()
    while time.perf_counter() < end:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO floor (body) VALUES (?)", ("floor",))
        connection.execute("COMMIT")
        commits += 1
    elapsed = time.perf_counter() - began
    connection.close()
    return {"commits_per_s": commits / elapsed, "settings": "WAL, synchronous=NORMAL"}


def postgres_floor(url: str, seconds: float) -> dict[str, object]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        setting = connection.execute("SHOW synchronous_commit").fetchone()[0]  # type: ignore[index]
        connection.execute("CREATE TABLE IF NOT EXISTS floor (id bigserial PRIMARY KEY, body text)")
        commits = 0
        end = time.perf_counter() + seconds
        began = time.perf_counter()
        while time.perf_counter() < end:
            # Autocommit: each INSERT is its own transaction and its own commit.
            connection.execute("INSERT INTO floor (body) VALUES (%s)", ("floor",))
            commits += 1
        elapsed = time.perf_counter() - began
    return {"commits_per_s": commits / elapsed, "settings": f"synchronous_commit={setting}"}


def main() -> None:
    kind, where, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    result = sqlite_floor(where, seconds) if kind == "sqlite" else postgres_floor(where, seconds)
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    main()
