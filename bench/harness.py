"""The harness of a benchmark run: its scratch directory, the servers, load generators and
databases it starts and ends, the product set up over HTTP as the tester, and the sections of the
report the scenarios add to it."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench import processes as proc
from bench.plans import Plan


class Harness:
    """One benchmark run: its scratch directory, its processes, its results."""

    def __init__(self, plan: Plan, workdir: Path, only: set[str] | None = None) -> None:
        self.plan = plan
        self.workdir = workdir
        self.only = only
        self.started: list[proc.Process] = []
        self.loads: list[subprocess.Popen[str]] = []
        self.databases: list[str] = []
        self.sections: list[dict[str, Any]] = []
        self.raw: dict[str, Any] = {}
        self.serial = 0
        self.began = time.monotonic()
        # Per configuration: where a profile of the product can be replayed.
        self.profile_targets: dict[str, dict[str, Any]] = {}

    # --- plumbing ------------------------------------------------------------------------

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.began:6.1f}s] {text}", flush=True)

    def tag(self) -> str:
        self.serial += 1
        return f"r{self.serial}x{int(time.time()) % 100000}"

    def wants(self, *scenarios: str) -> bool:
        return self.only is None or any(s in self.only for s in scenarios)

    @contextmanager
    def running(self, *servers: proc.Process) -> Iterator[None]:
        try:
            for server in servers:
                self.started.append(server)
                server.start()
            yield
        finally:
            for server in servers:
                server.stop()

    def cleanup(self) -> None:
        for load in self.loads:
            if load.poll() is None:
                load.kill()
                load.wait()
        for server in self.started:
            server.stop(timeout=5)
        for name in self.databases:
            try:
                proc.drop_pg(name)
            except Exception as error:  # the report matters more than a leftover scratch db
                self.log(f"could not drop {name}: {error}")

    def sqlite_copy(self, template: Path, label: str) -> str:
        return proc.copy_sqlite(template, self.workdir / f"{label}-{self.tag()}.sqlite3")

    def pg(self, suffix: str) -> str:
        name = f"mosaic_bench{proc.PG_BENCH_SUFFIX}_{suffix}"
        self.databases.append(name)
        return proc.create_pg(name)

    def target(self, server: proc.Process, threads: list[int] | None = None) -> dict[str, Any]:
        kind = "baseline" if server.name.startswith("baseline") else "product"
        port = server.tester_port  # type: ignore[attr-defined]
        return {"kind": kind, "port": port, "thread_ids": threads or []}

    def order(self, repeat: int, pair: list[Any]) -> list[Any]:
        """Alternate who goes first, so a drifting machine favours neither."""
        return pair if repeat % 2 == 0 else list(reversed(pair))

    # --- product set-up over HTTP, as the tester ---------------------------------------------

    def tester_post(self, server: proc.Process, path: str, payload: dict[str, Any]) -> Any:
        port = server.tester_port  # type: ignore[attr-defined]
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            data=json.dumps(payload).encode(),
            headers={
                "Origin": f"http://127.0.0.1:{port}",
                "Sec-Fetch-Site": "same-origin",
                "Content-Type": "application/json",
            },
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def threads(self, server: proc.Process, count: int) -> list[int]:
        project = self.tester_post(server, "/api/chat/projects", {"name": f"bench {self.tag()}"})
        project_id = project["project"]["id"]
        return [
            self.tester_post(server, "/api/chat/threads", {"project": project_id, "name": f"t{i}"})[
                "thread"
            ]["id"]
            for i in range(count)
        ]

    # --- figures ---------------------------------------------------------------------------

    def section(self, key: str, title: str, target: str, **content: Any) -> dict[str, Any]:
        section = {"key": key, "title": title, "target": target, "rows": [], "verdicts": []}
        section.update(content)
        self.sections.append(section)
        return section
