"""`manage.py testassistant FILE_OR_DIR... [--url URL] [--junit PATH] [--json] [--jobs N]
[-k SUBSTRING]`: conversation tests for the assistant, run as the tester.

Every file is checked before anything is sent. The cases then run through the tester listener
(`--url`, this configuration's by default) over HTTP and WebSocket, as the tester Console does:
never as the human, never through the broker, so what passes is what the listener serves.
Status 0 when every case passed, 1 when any failed, 2 for a usage error, a refused file, a
refusal from the listener or a listener that does not answer.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tester.suites import reports
from tester.suites.client import ListenerError, TesterClient
from tester.suites.files import SuiteFileRefused, load_suites
from tester.suites.runner import CaseResult, run_suites, selected

FAILED_STATUS = 1
REFUSED_STATUS = 2


def jobs_argument(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = "Run conversation tests (suite files) against the assistant, as the tester."
    # It reads no database: what it checks is what the listener at --url answers.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="FILE_OR_DIR", help="suite files")
        parser.add_argument(
            "--url",
            metavar="URL",
            help="the tester listener (default: this configuration's, http://127.0.0.1:PORT)",
        )
        parser.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here")
        parser.add_argument(
            "--json", action="store_true", help="print one JSON object per case instead"
        )
        parser.add_argument(
            "--jobs", type=jobs_argument, default=1, metavar="N", help="cases run at once"
        )
        parser.add_argument(
            "-k", dest="keyword", metavar="SUBSTRING", help="only cases whose name contains it"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            suites = load_suites(options["paths"])
        except SuiteFileRefused as refusal:
            raise CommandError(f"refused: {refusal}", returncode=REFUSED_STATUS) from refusal
        keyword: str | None = options["keyword"]
        if not selected(suites, keyword):
            raise CommandError(f"no case matches -k {keyword!r}", returncode=REFUSED_STATUS)
        url = options["url"] or f"http://127.0.0.1:{settings.MOSAIC_TESTER_PORT}"
        try:
            client = TesterClient(url)
        except ListenerError as refusal:
            raise CommandError(str(refusal), returncode=REFUSED_STATUS) from refusal

        def tell(result: CaseResult) -> None:
            shown = reports.json_line(result) if options["json"] else reports.line(result)
            self.stdout.write(shown)
            self.stdout.flush()

        started = time.monotonic()
        run = run_suites(suites, client, jobs=options["jobs"], keyword=keyword, on_result=tell)
        if options["junit"]:
            reports.write_junit(run.results, options["junit"])
        if not options["json"]:
            self.stdout.write(reports.summary(run, time.monotonic() - started))
        if run.refusal is not None:
            raise CommandError(str(run.refusal), returncode=REFUSED_STATUS)
        if run.failed:
            raise CommandError(
                f"{run.failed} of {len(run.results)} cases failed", returncode=FAILED_STATUS
            )
