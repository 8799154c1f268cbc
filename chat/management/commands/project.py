"""`manage.py project create --name N [--tester] [--json]`: a new project of the business."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from broker import actions
from broker.actors import Actor
from chat.management.cli_command import BrokerCommand, add_common_arguments
from chat.management.cli_format import project_json, project_line


class Command(BrokerCommand):
    help = "Create a project, as the human or with --tester as the tester."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="create")
        create = verbs.add_parser("create", help="create a project")
        create.add_argument("--name", required=True, help="the project's name")
        add_common_arguments(create)

    def handle_as(self, actor: Actor, **options: Any) -> None:
        project = actions.create_project(actor, name=options["name"])
        if options["json"]:
            self.emit_json({"project": project_json(project)})
        else:
            self.emit(project_line(project))
