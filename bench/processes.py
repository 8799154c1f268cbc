"""The processes of a benchmark run: the product's `manage.py serve`, the baseline's daphne,
runners, the fake model, and the load generator; the databases they use.

Every server is a real process on free loopback ports, started as `make run` starts the product
(`manage.py serve`: daphne, both listeners, and the in-process runner unless `--no-runner`).
SQLite databases are fresh files in the run's scratch directory; PostgreSQL databases are
created for the run, named `mosaic_bench_*`, and dropped after it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-demo-password"
START_SECONDS = 60.0
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
# The benchmarks' own Redis database, emptied before and after its phase.
REDIS_BENCH_URL = os.environ.get("MOSAIC_BENCH_REDIS_URL", "redis://127.0.0.1:6379/1")
# Scratch databases are named mosaic_bench<this>_<what>: two runs on one server need their own.
PG_BENCH_SUFFIX = os.environ.get("MOSAIC_BENCH_PG_SUFFIX", "")
# Servers on one core, load generators on another, so that neither takes the other's CPU
# (and a server's CPU per send is its own); off with MOSAIC_BENCH_PIN=0 or on one core.
PIN = os.environ.get("MOSAIC_BENCH_PIN", "1") != "0" and (os.cpu_count() or 1) >= 2
SERVER_CPUS = "0"
LOAD_CPUS = "1"
# Variables of the surrounding environment that would point a server somewhere else.
CLEARED = (
    "DATABASE_URL",
    "REDIS_URL",
    "MOSAIC_HUMAN_ORIGINS",
    "MOSAIC_PROXY_USER_HEADER",
    "MOSAIC_TRUSTED_PROXIES",
    "ALLOWED_HOSTS",
    "DJANGO_SETTINGS_MODULE",
    "MOSAIC_ASSISTANT_BACKEND",
)


def pinned(argv: list[str], cpus: str) -> list[str]:
    """`argv` run on `cpus` (taskset execs it: the pid is the program's own)."""
    taskset = shutil.which("taskset")
    return [taskset, "-c", cpus, *argv] if PIN and taskset else argv


def idle_priority(argv: list[str]) -> list[str]:
    """`argv` at the scheduler's idle priority (SCHED_IDLE, every thread it starts included):
    it runs only when nothing else on its CPUs wants to, so a soak beside the measured
    scenarios takes no time from their load generators."""
    chrt = shutil.which("chrt")
    return [chrt, "--idle", "0", *argv] if chrt else argv


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def base_environment(database_url: str, redis_url: str | None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in CLEARED}
    env.update(DATABASE_URL=database_url, PYTHONUNBUFFERED="1", MOSAIC_DEMO_PASSWORD=PASSWORD)
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


# --- databases ------------------------------------------------------------------------------


def pg_url(name: str) -> str:
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def _pg_admin() -> Any:
    import psycopg

    return psycopg.connect(PG_ADMIN, autocommit=True)


def create_pg(name: str) -> str:
    from psycopg import sql

    assert name.startswith("mosaic_bench")
    drop_pg(name)
    with _pg_admin() as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return pg_url(name)


def drop_pg(name: str) -> None:
    from psycopg import sql

    assert name.startswith("mosaic_bench")
    with _pg_admin() as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def flush_redis() -> None:
    """Empty the benchmarks' own Redis database (`MOSAIC_BENCH_REDIS_URL`), nobody else's."""
    import redis

    client = redis.Redis.from_url(REDIS_BENCH_URL)
    client.flushdb()
    client.close()


def pg_available() -> bool:
    try:
        with _pg_admin() as connection:
            connection.execute("SELECT 1")
        return True
    except Exception:
        return False


def redis_available() -> bool:
    try:
        import redis

        client = redis.Redis.from_url(REDIS_BENCH_URL, socket_timeout=2)
        ok = bool(client.ping())
        client.close()
        return ok
    except Exception:
        return False


def manage(settings: str, database_url: str, *arguments: str) -> None:
    env = base_environment(database_url, None)
    env["DJANGO_SETTINGS_MODULE"] = settings
    done = subprocess.run(
        [sys.executable, "-m", "django", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(arguments)} failed:\n{done.stderr[-4000:]}")


def prepare_product(database_url: str) -> None:
    manage("mosaic.settings", database_url, "migrate", "--noinput")
    manage("mosaic.settings", database_url, "setupdemo")


def prepare_baseline(database_url: str) -> None:
    manage("bench.baseline.settings", database_url, "migrate", "--noinput")


def seed(database: str, threads: int, messages: int, *options: str) -> dict[str, Any]:
    """`bench.seed` on `database`: what it seeded and the ids to read."""
    env = base_environment(database, None)
    env["DJANGO_SETTINGS_MODULE"] = "mosaic.settings"
    done = subprocess.run(
        [sys.executable, "-m", "bench.seed", str(threads), str(messages), *options],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.splitlines()[-1])["result"]


def copy_sqlite(template: Path, target: Path) -> str:
    shutil.copyfile(template, target)
    return f"sqlite:///{target}"


def children(pid: int) -> list[int]:
    """The child processes of `pid` (Linux: the parent is the fourth field of `stat`)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


# --- servers --------------------------------------------------------------------------------


@dataclass
class Process:
    """One child process with its log; `stop` is SIGTERM, then SIGKILL."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log: Path
    wait_ports: list[int] = field(default_factory=list)
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.popen = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_SECONDS
        while not all(answers(port) for port in self.wait_ports):
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not answer in time:\n{self.tail()}")
            time.sleep(0.05)

    def wait_for_line(self, text: str, timeout: float = START_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text(errors="replace"):
            if self.popen is None or self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not say {text!r}:\n{self.tail()}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.popen = None

    def tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def product_server(
    workdir: Path,
    database_url: str,
    *,
    redis_url: str | None = None,
    runner: bool = False,
    backend: dict[str, str] | None = None,
    label: str = "product",
    cpus: str = SERVER_CPUS,
    idle: bool = False,
) -> Process:
    human, tester = free_port(), free_port()
    while tester == human:
        tester = free_port()
    env = base_environment(database_url, redis_url)
    env.update(
        DJANGO_SETTINGS_MODULE="mosaic.settings",
        MOSAIC_HUMAN_HOST="127.0.0.1",
        MOSAIC_HUMAN_PORT=str(human),
        MOSAIC_TESTER_HOST="127.0.0.1",
        MOSAIC_TESTER_PORT=str(tester),
        # No ops listener: servers started side by side would all want its port.
        MOSAIC_OPS_PORT="0",
        MOSAIC_ASSISTANT_BACKEND="offline",
        **(backend or {}),
    )
    argv = [sys.executable, "manage.py", "serve"]
    if not runner:
        argv.append("--no-runner")
    argv = pinned(argv, cpus)
    if idle:
        argv = idle_priority(argv)
    process = Process(label, argv, env, workdir / f"{label}.log", wait_ports=[human, tester])
    process.tester_port = tester  # type: ignore[attr-defined]
    return process


def baseline_server(
    workdir: Path, database_url: str, *, redis_url: str | None = None, label: str = "baseline"
) -> Process:
    port = free_port()
    env = base_environment(database_url, redis_url)
    env["DJANGO_SETTINGS_MODULE"] = "bench.baseline.settings"
    argv = [
        sys.executable,
        "-m",
        "daphne",
        "-b",
        "127.0.0.1",
        "-p",
        str(port),
        "bench.baseline.asgi:application",
    ]
    argv = pinned(argv, SERVER_CPUS)
    process = Process(label, argv, env, workdir / f"{label}.log", wait_ports=[port])
    process.tester_port = port  # type: ignore[attr-defined]
    return process


def runner_process(
    workdir: Path, database_url: str, backend: dict[str, str], *arguments: str, label: str
) -> Process:
    env = base_environment(database_url, None)
    env.update(DJANGO_SETTINGS_MODULE="mosaic.settings", **backend)
    argv = [sys.executable, "manage.py", "runassistant", *arguments]
    return Process(label, argv, env, workdir / f"{label}.log")


def fake_model(workdir: Path, delay: float) -> Process:
    port = free_port()
    argv = [sys.executable, "-m", "bench.fakemodel", str(port), str(delay)]
    env = {name: value for name, value in os.environ.items() if name not in CLEARED}
    process = Process("fakemodel", argv, env, workdir / "fakemodel.log", wait_ports=[port])
    process.url = f"http://127.0.0.1:{port}/v1"  # type: ignore[attr-defined]
    return process


# --- the load generator ---------------------------------------------------------------------


def load_argv(config: dict[str, Any], *, idle: bool = False) -> list[str]:
    argv = pinned([sys.executable, "-m", "bench.loadgen", json.dumps(config)], LOAD_CPUS)
    return idle_priority(argv) if idle else argv


def load(config: dict[str, Any], timeout: float = 300.0) -> dict[str, Any]:
    """Run one scenario in its own process and return its result."""
    done = subprocess.run(
        load_argv(config),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"result"')]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"load generator failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])["result"]
    return result


class HeldLoad:
    """A load generator that holds its sockets open until `release` (P6)."""

    def __init__(self, config: dict[str, Any], *, idle: bool = False) -> None:
        self.popen = subprocess.Popen(
            load_argv(config, idle=idle),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self) -> dict[str, Any]:
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()
        if not line:
            raise RuntimeError(f"load generator failed:\n{self.popen.stderr.read()[-3000:]}")  # type: ignore[union-attr]
        ready: dict[str, Any] = json.loads(line)
        return ready

    def release(self) -> dict[str, Any]:
        out, err = self.popen.communicate("\n", timeout=120)
        lines = [line for line in out.splitlines() if line.startswith('{"result"')]
        if not lines:
            raise RuntimeError(f"load generator failed:\n{err[-3000:]}")
        result: dict[str, Any] = json.loads(lines[-1])["result"]
        return result
