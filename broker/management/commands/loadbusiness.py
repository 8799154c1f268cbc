"""`manage.py loadbusiness FILE [FILE...]`: store businesses described by business files."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from broker import refusals
from broker.business_file import BusinessSpec, load_business, parse_business_file
from broker.refusals import Refusal


class Command(BaseCommand):
    help = "Create or update businesses from business files (TOML); all or nothing."

    # The loader is how a refused stored business gets repaired, so the checks that refuse
    # it must not keep the loader from running.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE", help="business file (TOML)")

    def handle(self, *args: Any, **options: Any) -> None:
        files: list[str] = options["files"]
        try:
            specs = [parse_business_file(path) for path in files]
            _refuse_repeated_slugs(specs, files)
            # Every file or none: a refusal in the last file leaves the first ones unstored.
            with transaction.atomic():
                businesses = [load_business(spec) for spec in specs]
        except Refusal as refusal:
            raise CommandError(f"{refusal.code}: {refusal.detail}", returncode=2) from refusal
        for spec, business in zip(specs, businesses, strict=True):
            self.stdout.write(
                f"loaded business '{business.slug}': human '{business.human}', "
                f"{len(spec.roles)} role(s), {len(spec.instances)} instance(s), "
                f"tester {'on' if business.tester_enabled else 'off'}"
            )


def _refuse_repeated_slugs(specs: list[BusinessSpec], files: list[str]) -> None:
    seen: dict[str, str] = {}
    for spec, path in zip(specs, files, strict=True):
        if spec.slug in seen:
            raise Refusal(
                refusals.INVALID,
                f"{path}: business.slug: '{spec.slug}' is also the slug in {seen[spec.slug]}",
            )
        seen[spec.slug] = path
