"""The real server for the browser tests: `manage.py serve` (daphne, the human, tester and ops
listeners and the assistant runner) on free ports, over a database of its own, restartable on
the same ports.

On SQLite the database is a fresh file; on a PostgreSQL run (DATABASE_URL starts with
`postgres`) it is a scratch database made for the test session and dropped after it. Either is a
copy of one prepared database (migrated, the demo business loaded) that each test process makes
once: `migrate` and `setupdemo` cost seconds of CPU a server, and the suite starts dozens.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import environ
import pytest

from tests.console.assistant import assistant_settings

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "console-demo-password"
HUMAN_USERNAME = "ada"
START_SECONDS = 60.0
STOP_SECONDS = 10.0
# Variables of the surrounding environment that would point the server somewhere else.
CLEARED = (
    "MOSAIC_HUMAN_ORIGINS",
    "MOSAIC_PROXY_USER_HEADER",
    "MOSAIC_TRUSTED_PROXIES",
    "MOSAIC_PROXY_SECRET",
    "ALLOWED_HOSTS",
)


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


def is_postgres(url: str) -> bool:
    return url.startswith("postgres")


def _admin_connection(url: str):  # type: ignore[no-untyped-def]
    import psycopg

    config = environ.Env.db_url_config(url)
    return psycopg.connect(
        host=config.get("HOST") or None,
        port=config.get("PORT") or None,
        user=config.get("USER") or None,
        password=config.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )


def create_scratch_database(url: str, name: str) -> str:
    """A new, empty PostgreSQL database beside the one `url` names; its URL."""
    from psycopg import sql

    drop_scratch_database(url, name)
    with _admin_connection(url) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def copy_database(url: str, name: str, template: str) -> str:
    """A new PostgreSQL database beside the one `url` names, a copy of `template`; its URL."""
    from psycopg import sql

    drop_scratch_database(url, name)
    with _admin_connection(url) as connection:
        connection.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def drop_scratch_database(url: str, name: str) -> None:
    from psycopg import sql

    with _admin_connection(url) as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


@dataclass
class LiveServer:
    """One `manage.py serve` process; `restart` keeps its ports and its database."""

    database_url: str
    workdir: Path
    human_port: int = field(default_factory=free_port)
    tester_port: int = field(default_factory=free_port)
    ops_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    # Settings of this server over the defaults below (a model server of the tests' own, …).
    settings: dict[str, str] = field(default_factory=dict)
    # More arguments of `serve`, such as `--no-runner` for a server whose turns stay unanswered.
    serve_arguments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        while self.tester_port == self.human_port:
            self.tester_port = free_port()
        while self.ops_port in (self.human_port, self.tester_port):
            self.ops_port = free_port()

    @property
    def human_url(self) -> str:
        return f"http://127.0.0.1:{self.human_port}"

    @property
    def tester_url(self) -> str:
        return f"http://127.0.0.1:{self.tester_port}"

    @property
    def ops_url(self) -> str:
        return f"http://127.0.0.1:{self.ops_port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "serve.log"

    def environment(self) -> dict[str, str]:
        env = {name: value for name, value in os.environ.items() if name not in CLEARED}
        env.update(
            DJANGO_SETTINGS_MODULE="tests.support.live_settings",
            DATABASE_URL=self.database_url,
            MOSAIC_HUMAN_HOST="127.0.0.1",
            MOSAIC_HUMAN_PORT=str(self.human_port),
            MOSAIC_TESTER_HOST="127.0.0.1",
            MOSAIC_TESTER_PORT=str(self.tester_port),
            MOSAIC_OPS_PORT=str(self.ops_port),
            MOSAIC_DEMO_PASSWORD=PASSWORD,
            MOSAIC_CONSOLE_SEND="true",
            MOSAIC_ASSISTANT_BACKEND="offline",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.settings)
        return env

    def manage(self, *arguments: str) -> None:
        done = subprocess.run(
            [sys.executable, "manage.py", *arguments],
            cwd=ROOT,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(arguments)} failed:\n{done.stderr[-4000:]}")

    def prepare(self) -> None:
        """Migrate the empty database and load the demo business and its users."""
        self.manage("migrate", "--noinput")
        self.manage("setupdemo")

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "serve", *self.serve_arguments],
                cwd=ROOT,
                env=self.environment(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_SECONDS
        while not (answers(self.human_port) and answers(self.tester_port)):
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited ({self.process.returncode}):\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve did not answer in time:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server; every open WebSocket is closed with it."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


# This process's prepared database: a SQLite file's path, or a PostgreSQL database's name.
_prepared: dict[str, str] = {}


def prepared_database(test_url: str) -> str:
    """This process's prepared database for `test_url`'s engine, made on first use and removed
    when the process ends: a SQLite file (its path) or a PostgreSQL database (its name)."""
    if test_url in _prepared:
        return _prepared[test_url]
    workdir = Path(tempfile.mkdtemp(prefix="mosaic-prepared-"))
    atexit.register(shutil.rmtree, workdir, True)
    if is_postgres(test_url):
        name = f"mosaic_prepared_{os.getpid()}"
        template = LiveServer(create_scratch_database(test_url, name), workdir)
        atexit.register(drop_scratch_database, test_url, name)
    else:
        name = str(workdir / "prepared.sqlite3")
        template = LiveServer(f"sqlite:///{name}", workdir)
    template.prepare()
    _prepared[test_url] = name
    return name


def fresh_database(test_url: str, workdir: Path, scratch: str) -> str:
    """A copy of the prepared database for a server: the file `scratch`.sqlite3 in `workdir`, or
    the PostgreSQL database `scratch` (drop it with `drop_scratch_database`); its URL."""
    prepared = prepared_database(test_url)
    if is_postgres(test_url):
        return copy_database(test_url, scratch, prepared)
    path = workdir / f"{scratch}.sqlite3"
    with closing(sqlite3.connect(prepared)) as source, closing(sqlite3.connect(path)) as target:
        source.backup(target)
    return f"sqlite:///{path}"


@contextmanager
def serving(
    workdir: Path,
    scratch: str,
    *,
    settings: dict[str, str] | None = None,
    serve_arguments: tuple[str, ...] = (),
    business_file: str | None = None,
) -> Iterator[LiveServer]:
    """`manage.py serve` on free ports over a database of its own — a file in `workdir`, or the
    scratch PostgreSQL database `scratch` on a PostgreSQL run, dropped after — migrated, with the
    demo business (reloaded from `business_file`'s text when given), until the block ends."""
    test_url = os.environ.get("DATABASE_URL", "")
    database_url = fresh_database(test_url, workdir, scratch)
    server = LiveServer(
        database_url=database_url,
        workdir=workdir,
        settings=dict(settings or {}),
        serve_arguments=serve_arguments,
    )
    try:
        if business_file is not None:
            path = workdir / "business.toml"
            path.write_text(business_file)
            server.manage("loadbusiness", str(path))
        server.start()
        yield server
    finally:
        server.stop()
        if is_postgres(test_url):
            drop_scratch_database(test_url, scratch)


def business_server(prefix: str, business_file: str) -> Any:
    """A module's `console_server` fixture: `serving` the business of `business_file` (more
    than the demo's one instance), its instances answered by the tests' model server."""

    @pytest.fixture(scope="module")
    def console_server(
        chromium: str, model_server: Any, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[LiveServer]:
        with serving(
            tmp_path_factory.mktemp(prefix),
            f"mosaic_{prefix}_{os.getpid()}",
            settings=assistant_settings(model_server.url),
            business_file=business_file,
        ) as server:
            yield server

    return console_server
