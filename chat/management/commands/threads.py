"""`manage.py threads [--tester] [--project P] [--json]`: the actor's own threads (R3)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from broker import selectors
from broker.actors import Actor
from chat.management.cli_command import BrokerCommand
from chat.management.cli_format import thread_json, thread_line
from chat.management.cli_pages import every_row
from chat.management.cli_project import project_named


class Command(BrokerCommand):
    help = (
        "List your own threads: the human's, or with --tester the tester's. "
        "Neither side ever lists the other's (R3)."
    )

    def add_command_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", metavar="P", help="only this project (name or id)")

    def handle_as(self, actor: Actor, **options: Any) -> None:
        project_id = None
        if options["project"] is not None:
            project_id = project_named(actor, options["project"]).pk
        threads = every_row(
            lambda cursor, limit: selectors.list_threads(
                actor, project_id=project_id, after=cursor, limit=limit
            )
        )
        if options["json"]:
            self.emit_json({"threads": [thread_json(thread) for thread in threads]})
            return
        for thread in threads:
            self.emit(thread_line(thread))
