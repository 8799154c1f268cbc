"""`manage.py serve`: both listeners and an assistant runner in one process, in the foreground.

The human listener on MOSAIC_HUMAN_HOST:MOSAIC_HUMAN_PORT and the tester listener on
MOSAIC_TESTER_HOST:MOSAIC_TESTER_PORT, which must be a loopback address, under one daphne, with
the ops listener (metrics, health, readiness) on 127.0.0.1:MOSAIC_OPS_PORT unless that is 0; the
runner works beside them in threads, so the in-memory channel layer serves both. `--listener`
serves one listener alone and `--no-runner` leaves runs to `runassistant` processes.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from daphne.cli import CommandLineInterface  # type: ignore[import-untyped]
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.boot import (
    refuse_invalid_businesses,
    refuse_unguarded_database,
    stored_name_warnings,
)
from mosaic.edge.body_limit import BoundedServer
from runner.service import Runner

APPLICATIONS = {
    "both": "mosaic.asgi:application",
    "human": "mosaic.asgi:human_application",
    "tester": "mosaic.asgi:tester_application",
    "ops": "mosaic.asgi:ops_application",
}
# The ops listener's address: loopback, always (docs/operations.md, Metrics).
OPS_HOST = "127.0.0.1"


class OneLineServer(BoundedServer):
    """daphne refusing oversized bodies as they arrive (`mosaic.edge.body_limit`), without its
    access log. Each request's one line is the listeners' own (docs/operations.md, Logs): the chat
    API's L6 line naming its user, a line for every other request; daphne's line for the same
    request made two."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["action_logger"] = None
        super().__init__(*args, **kwargs)


class OneLineCommandLine(CommandLineInterface):  # type: ignore[misc]
    server_class = OneLineServer


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Command(BaseCommand):
    help = "Serve the human and tester listeners until interrupted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--listener", choices=sorted(APPLICATIONS), default="both")
        parser.add_argument(
            "--no-runner",
            action="store_true",
            help="Start no assistant runner here (runs come from runassistant processes).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        listener: str = options["listener"]
        tester_host: str = settings.MOSAIC_TESTER_HOST
        if listener in ("both", "tester") and not is_loopback(tester_host):
            raise CommandError(
                f"The tester listener is loopback only; MOSAIC_TESTER_HOST={tester_host!r} "
                "is not a loopback address."
            )
        # Refuse before printing a URL nobody could use; the ASGI module refuses again on
        # import, for servers started without this command.
        refuse_invalid_businesses()
        refuse_unguarded_database()
        for warning in stored_name_warnings():
            self.stderr.write(warning)
        endpoints = []
        if listener in ("both", "human"):
            endpoints.append((settings.MOSAIC_HUMAN_HOST, settings.MOSAIC_HUMAN_PORT))
            human = f"http://{settings.MOSAIC_HUMAN_HOST}:{settings.MOSAIC_HUMAN_PORT}"
            self.stdout.write(
                f"human Console:   {human}/  (sign in as the business's human; demo: ada)\n"
                f"admin:           {human}/admin/  (sign in as staff; demo: staff)"
            )
        if listener in ("both", "tester"):
            endpoints.append((tester_host, settings.MOSAIC_TESTER_PORT))
            tester = f"http://{tester_host}:{settings.MOSAIC_TESTER_PORT}"
            self.stdout.write(
                f"tester Console:  {tester}/"
                "  (no sign-in; every change there is recorded as tester)\n"
                f"OpenAI API:      {tester}/v1  (the tester's; key: MOSAIC_TESTER_API_KEY)"
            )
        ops_port: int = settings.MOSAIC_OPS_PORT
        if listener == "ops" or (listener == "both" and ops_port):
            if not ops_port:
                raise CommandError("The ops listener needs a port: set MOSAIC_OPS_PORT.")
            endpoints.append((OPS_HOST, ops_port))
            self.stdout.write(f"metrics:         http://{OPS_HOST}:{ops_port}/metrics")
        arguments = []
        for host, port in endpoints:
            interface = host.replace(":", r"\:")
            arguments += ["--endpoint", f"tcp:port={port}:interface={interface}"]
        runner = None if options["no_runner"] else Runner()
        if runner is not None:
            try:
                runner.start()
            except ImproperlyConfigured as error:
                raise CommandError(f"The assistant runner cannot start: {error}") from error
            self.stdout.write(f"assistant runner: {runner}")
        self.stdout.flush()
        try:
            OneLineCommandLine().run(
                [*arguments, "--verbosity", str(options["verbosity"]), APPLICATIONS[listener]]
            )
        finally:
            if runner is not None:
                # Its claims end `runner stopped`, so another runner may take them at once.
                runner.stop(timeout=settings.MOSAIC_CLAIM_LEASE_SECONDS)
