"""`manage.py purgetesterdata --older-than DAYS [--dry-run]`: delete old tester data."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from broker.actions.tester_purge import purge_tester_data


class Command(BaseCommand):
    help = (
        "Delete tester-owned threads with their messages, opens, claims, turns and trail rows, "
        "and suite runs, older than DAYS days; never a row of the human's."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=int,
            required=True,
            metavar="DAYS",
            help="purge what is older than this many days (0: all tester data up to now)",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would go, delete nothing"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days: int = options["older_than"]
        if days < 0:
            raise CommandError("--older-than takes a number of days, 0 or more.")
        dry_run: bool = options["dry_run"]
        cut = timezone.now() - timedelta(days=days)
        verb = "would delete" if dry_run else "deleted"
        for slug, counts in purge_tester_data(cut=cut, dry_run=dry_run).items():
            self.stdout.write(f"{slug}: {verb} {counts.sentence()}")
