"""The cluster under test as its tests see it (`manage.py cluster`, started by the `cluster`
fixture of tests/cluster/conftest.py): its process, log, listeners' addresses, process ids and
runners, and the services it runs on; the demo password it signs in with, and the marks of its
tests."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.services import FakeModel, RedisServer, TcpProxy

PASSWORD = "cluster-demo-password"

# Every test of tests/cluster/ needs PostgreSQL and Redis: each module carries both marks.
SERVICES = [pytest.mark.postgres, pytest.mark.redis]


@dataclass
class Cluster:
    process: subprocess.Popen[bytes]
    log: Path
    human_urls: list[str]
    tester_url: str
    ops_url: str
    pids: dict[str, int]
    runner_names: list[str]
    redis: RedisServer
    database: TcpProxy
    model: FakeModel

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self, label: str) -> bool:
        try:
            os.kill(self.pids[label], 0)
        except ProcessLookupError:
            return False
        # A zombie child of the supervisor has exited too.
        state = Path(f"/proc/{self.pids[label]}/stat")
        return not state.exists() or state.read_text().split()[2] != "Z"
