"""`manage.py cluster`: the scale-out on one machine (SPEC §9), in the foreground.

On PostgreSQL and Redis it creates the database if it is missing, migrates it, loads the demo
business, then starts its children: one `serve --listener human --no-runner` daphne process per
human port, one `serve --listener tester --no-runner` process, one `serve --listener ops` process
on `--ops-port` (MOSAIC_OPS_PORT; 0 for none), and `--runners` processes of `runassistant`. It
prints the addresses once every listener answers `/readyz` and stops every child on SIGINT or
SIGTERM.

Every child writes its metrics to one PROMETHEUS_MULTIPROC_DIR (a directory of this run's own
unless set), and the ops listener's `/metrics` adds them up.

A child that dies while starting stops the whole cluster. A child that dies later is reported
and not replaced: the others keep serving, which is what the cluster shows.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, connections
from prometheus_client import multiprocess

from broker.boot import refuse_invalid_businesses, refuse_unguarded_database
from mosaic.management.commands.serve import OPS_HOST, is_loopback

START_SECONDS = 60.0
# Runners end their claims `runner stopped` on SIGTERM; anything still alive after this is killed.
STOP_SECONDS = 15.0
METRICS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"


@dataclass
class Child:
    label: str
    popen: subprocess.Popen[bytes]
    host: str = ""
    port: int | None = None  # a listener's; a runner has none

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/" if self.port is not None else ""


def ready(host: str, port: int) -> bool:
    """The listener answers `/readyz` 200: its database, migrations and channel layer work."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/readyz", timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def in_use(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def ports(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise CommandError(f"--human-ports: {text!r} is not a comma-separated list") from exc
    if not values or any(not 0 < port < 65536 for port in values):
        raise CommandError(f"--human-ports: {text!r} needs at least one port in 1–65535")
    return values


class Command(BaseCommand):
    help = "Run human listeners, a tester listener, an ops listener and runners as processes."
    own_metrics_directory = False
    metrics_directory = ""
    # The checks read the database, which may not exist yet; the same invariants are checked
    # once it is migrated (`refuse_invalid_businesses`), and again by every child.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--human-ports",
            default="7341,7342",
            metavar="P,P",
            help="one human-listener process per port (default 7341,7342)",
        )
        parser.add_argument("--tester-port", type=int, default=7343, metavar="P")
        parser.add_argument("--runners", type=int, default=2, metavar="N")
        parser.add_argument(
            "--ops-port",
            type=int,
            default=None,
            metavar="P",
            help="the ops listener's port (default MOSAIC_OPS_PORT; 0 for none)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        human_ports = ports(options["human_ports"])
        tester_port: int = options["tester_port"]
        ops_port: int = (
            options["ops_port"] if options["ops_port"] is not None else settings.MOSAIC_OPS_PORT
        )
        listener_ports = [*human_ports, tester_port, *([ops_port] if ops_port else [])]
        if len(set(listener_ports)) != len(listener_ports):
            raise CommandError("Every listener needs a port of its own.")
        if options["runners"] < 1:
            raise CommandError("--runners must be at least 1.")
        if connection.vendor != "postgresql" or not settings.REDIS_URL:
            # Several processes need one database with row locks and one channel layer.
            raise CommandError(
                "The cluster runs on PostgreSQL and Redis: set DATABASE_URL=postgres://… "
                "and REDIS_URL=redis://…"
            )
        human_host: str = settings.MOSAIC_HUMAN_HOST
        tester_host: str = settings.MOSAIC_TESTER_HOST
        if not is_loopback(tester_host):
            raise CommandError(f"MOSAIC_TESTER_HOST={tester_host!r} is not a loopback address.")

        taken = [
            port
            for host, port in [
                *((human_host, p) for p in human_ports),
                (tester_host, tester_port),
                *([(OPS_HOST, ops_port)] if ops_port else []),
            ]
            if in_use(host, port)
        ]
        if taken:
            # Checked before anything starts: a listener that answered on a port held by
            # another server would look ready while its own process failed to bind.
            raise CommandError(f"Port(s) already in use: {', '.join(map(str, taken))}.")
        self.prepare_database()
        environment = self.child_environment(human_host, human_ports, tester_port)
        interrupted = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            interrupted.set()

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)

        children: list[Child] = []
        try:
            for number, port in enumerate(human_ports, start=1):
                children.append(
                    self.spawn(
                        f"human listener {number}",
                        ["serve", "--listener", "human", "--no-runner"],
                        {**environment, "MOSAIC_HUMAN_PORT": str(port)},
                        host=human_host,
                        port=port,
                    )
                )
            children.append(
                self.spawn(
                    "tester listener",
                    ["serve", "--listener", "tester", "--no-runner"],
                    environment,
                    host=tester_host,
                    port=tester_port,
                )
            )
            if ops_port:
                children.append(
                    self.spawn(
                        "ops listener",
                        ["serve", "--listener", "ops", "--no-runner"],
                        {**environment, "MOSAIC_OPS_PORT": str(ops_port)},
                        host=OPS_HOST,
                        port=ops_port,
                    )
                )
            for number in range(1, options["runners"] + 1):
                children.append(self.spawn(f"runner {number}", ["runassistant"], environment))
            self.wait_until_serving(children, interrupted)
            if not interrupted.is_set():
                self.report(children)
                self.supervise(children, interrupted)
        finally:
            self.stop(children)
            if self.own_metrics_directory:
                shutil.rmtree(self.metrics_directory, ignore_errors=True)

    def prepare_database(self) -> None:
        """Create the database if missing, migrate it, load the demo business."""
        name = str(connection.settings_dict["NAME"])
        with connection._nodb_cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if cursor.fetchone() is None:
                cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")
                self.stdout.write(f"cluster: created database {name}")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("setupdemo", stdout=self.stdout)
        refuse_invalid_businesses()
        refuse_unguarded_database()
        # The children open their own connections; this process needs none while it waits.
        connections.close_all()

    def child_environment(
        self, human_host: str, human_ports: list[int], tester_port: int
    ) -> dict[str, str]:
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.own_metrics_directory = not os.environ.get(METRICS_DIRECTORY)
        if self.own_metrics_directory:
            environment[METRICS_DIRECTORY] = tempfile.mkdtemp(prefix="mosaic-metrics-")
        self.metrics_directory = environment[METRICS_DIRECTORY]
        environment["MOSAIC_TESTER_PORT"] = str(tester_port)
        environment["MOSAIC_HUMAN_HOST"] = human_host
        if "MOSAIC_HUMAN_ORIGINS" not in os.environ:
            # A page from either human listener may write through, and open sockets on, any
            # of them: the origins are every human listener's own (L2, L7).
            environment["MOSAIC_HUMAN_ORIGINS"] = ",".join(
                f"http://{host}:{port}"
                for port in human_ports
                for host in ("127.0.0.1", "localhost")
            )
        return environment

    def spawn(
        self,
        label: str,
        arguments: list[str],
        environment: dict[str, str],
        *,
        host: str = "",
        port: int | None = None,
    ) -> Child:
        manage = str(settings.BASE_DIR / "manage.py")
        popen = subprocess.Popen([sys.executable, manage, *arguments], env=environment)
        return Child(label=label, popen=popen, host=host, port=port)

    def wait_until_serving(self, children: list[Child], interrupted: threading.Event) -> None:
        deadline = time.monotonic() + START_SECONDS
        waiting = [child for child in children if child.port is not None]
        while waiting and not interrupted.is_set():
            for child in children:
                if child.popen.poll() is not None:
                    raise CommandError(
                        f"{child.label} exited while starting (status {child.popen.returncode})."
                    )
            waiting = [child for child in waiting if not ready(child.host, child.port or 0)]
            if time.monotonic() > deadline:
                late = ", ".join(child.label for child in waiting)
                raise CommandError(f"Not serving after {START_SECONDS:.0f}s: {late}.")
            interrupted.wait(0.1)

    def report(self, children: list[Child]) -> None:
        for child in children:
            where = f"{child.url}  " if child.url else ""
            self.stdout.write(f"cluster: {child.label}: {where}(pid {child.popen.pid})")
        self.stdout.write("cluster: ready; Ctrl-C stops every process")
        self.stdout.flush()

    def supervise(self, children: list[Child], interrupted: threading.Event) -> None:
        """Report each child that ends; return on a signal or when none is left."""
        alive = list(children)
        while alive and not interrupted.wait(0.5):
            for child in [child for child in alive if child.popen.poll() is not None]:
                alive.remove(child)
                # Its live gauges (open sockets) leave the sum with it.
                multiprocess.mark_process_dead(  # type: ignore[no-untyped-call]
                    child.popen.pid, self.metrics_directory
                )
                self.stderr.write(
                    f"cluster: {child.label} (pid {child.popen.pid}) exited with status "
                    f"{child.popen.returncode}; {len(alive)} process(es) still serving"
                )
                self.stderr.flush()
        if not alive:
            raise CommandError("Every process of the cluster has exited.")

    def stop(self, children: list[Child]) -> None:
        """SIGTERM every child, then wait; kill the ones still alive after STOP_SECONDS."""
        for child in children:
            if child.popen.poll() is None:
                child.popen.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        for child in children:
            try:
                child.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stderr.write(f"cluster: {child.label} did not stop; killed")
                child.popen.kill()
                child.popen.wait()
        if children:
            self.stdout.write("cluster: stopped")
