"""`manage.py runassistant`: answer pending messages (SPEC §7) until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker.boot import refuse_invalid_businesses, refuse_unguarded_database, started
from broker.checkpoints import start_checkpoints
from broker.models import Business, Instance
from runner.service import DEFAULT_CONCURRENCY, Runner


class Command(BaseCommand):
    help = "Answer pending messages as the assistant runs, until interrupted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--business", metavar="SLUG", help="only this business's threads")
        parser.add_argument("--instance", metavar="NAME", help="only this instance's threads")
        parser.add_argument(
            "--concurrency",
            type=int,
            default=DEFAULT_CONCURRENCY,
            metavar="N",
            help=f"threads answered at once (default {DEFAULT_CONCURRENCY})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # No run starts while a stored business is refused (R4, R5), as no listener does.
        refuse_invalid_businesses()
        refuse_unguarded_database()
        business_id = None
        if options["business"]:
            business = Business.objects.filter(slug=options["business"]).first()
            if business is None:
                raise CommandError(f"No business {options['business']!r}.")
            business_id = business.pk
        instance: str | None = options["instance"]
        if instance is not None:
            instances = Instance.objects.filter(name=instance)
            if business_id is not None:
                instances = instances.filter(business_id=business_id)
            if not instances.exists():
                raise CommandError(f"No instance {instance!r}.")
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be at least 1.")

        runner = Runner(
            business_id=business_id, instance=instance, concurrency=options["concurrency"]
        )
        interrupted = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            interrupted.set()

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        checkpoints = start_checkpoints()
        try:
            started()
            try:
                runner.start()
            except ImproperlyConfigured as error:
                raise CommandError(f"runassistant cannot start: {error}") from error
            self.stdout.write(f"runassistant: {runner}")
            self.stdout.flush()
            while not interrupted.wait(0.5):
                pass
            self.stdout.write("runassistant: stopping")
            lease: float = settings.MOSAIC_CLAIM_LEASE_SECONDS
            if not runner.stop(timeout=lease):
                self.stderr.write(
                    "runassistant: some turns did not finish; their leases will expire"
                )
            self.stdout.write("runassistant: stopped")
        finally:
            # The command may be called in a process that goes on (call_command).
            if checkpoints is not None:
                checkpoints.stop()
