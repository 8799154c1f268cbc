"""`manage.py testassistant FILE_OR_DIR... [options]`: the `mosaic-test` runner
(`tester/suites/cli.py`), with this configuration's tester listener as its default `--url`.

The runner reads no database: what it checks is what the listener at `--url` answers.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from tester.suites import cli


class Command(BaseCommand):
    help = "Run conversation tests (suite files) against the assistant, as the tester."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        status = cli.run(
            argparse.Namespace(**options),
            out=self.stdout,
            err=self.stderr,
            url=f"http://127.0.0.1:{settings.MOSAIC_TESTER_PORT}",
        )
        if status:
            # The status and nothing else: the run has already said why.
            raise SystemExit(status)
