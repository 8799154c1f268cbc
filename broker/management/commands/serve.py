"""`manage.py serve`: the human listener under daphne, in the foreground until interrupted."""

from __future__ import annotations

from typing import Any

from daphne.cli import CommandLineInterface  # type: ignore[import-untyped]
from django.conf import settings
from django.core.management.base import BaseCommand

from broker.boot import refuse_invalid_businesses

HOST = "127.0.0.1"


class Command(BaseCommand):
    help = "Serve the human listener on 127.0.0.1:MOSAIC_HUMAN_PORT until interrupted."

    def handle(self, *args: Any, **options: Any) -> None:
        # Refuse before printing a URL nobody could use; the ASGI module refuses again on
        # import, for servers started without this command.
        refuse_invalid_businesses()
        port: int = settings.MOSAIC_HUMAN_PORT
        self.stdout.write(f"human listener: http://{HOST}:{port}/admin/")
        self.stdout.flush()
        CommandLineInterface().run(
            [
                "--bind",
                HOST,
                "--port",
                str(port),
                "--verbosity",
                str(options["verbosity"]),
                "mosaic.asgi:application",
            ]
        )
