"""`manage.py projects [--tester] [--json]`: the business's projects (both sides see them all)."""

from __future__ import annotations

from typing import Any

from broker.actors import Actor
from chat.management.cli_command import BrokerCommand
from chat.management.cli_format import project_json, project_line
from chat.management.cli_project import all_projects


class Command(BrokerCommand):
    help = "List the business's projects, as the human or with --tester as the tester."

    def handle_as(self, actor: Actor, **options: Any) -> None:
        projects = all_projects(actor)
        if options["json"]:
            self.emit_json({"projects": [project_json(project) for project in projects]})
            return
        for project in projects:
            self.emit(project_line(project))
