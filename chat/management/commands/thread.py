"""`manage.py thread create|open|read`: one of the actor's own threads, through the broker.

    thread create --project P --name N [--instance I]
    thread open ID
    thread read ID [--after MSGID]

Each takes `--tester`, `--user`, `--business` and `--json`.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from broker import actions
from broker.actors import Actor
from chat.management.cli_command import BrokerCommand, add_common_arguments, id_argument
from chat.management.cli_format import (
    message_json,
    message_line,
    open_json,
    open_line,
    thread_json,
    thread_line,
)
from chat.management.cli_project import project_named
from chat.management.cli_stream import messages_after


class Command(BrokerCommand):
    help = "Create, open or read a thread, as the human or with --tester as the tester."

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="{create,open,read}")

        create = verbs.add_parser("create", help="create a thread you own")
        create.add_argument("--project", required=True, metavar="P", help="project name or id")
        create.add_argument("--name", required=True, metavar="N", help="the thread's name")
        create.add_argument(
            "--instance", metavar="I", help="the instance it talks to (default: the business's)"
        )

        open_ = verbs.add_parser("open", help="record that you opened your thread")
        open_.add_argument("thread", type=id_argument, metavar="ID")

        read = verbs.add_parser("read", help="print your thread's messages, oldest first")
        read.add_argument("thread", type=id_argument, metavar="ID")
        read.add_argument(
            "--after", type=id_argument, metavar="MSGID", help="only messages after this id"
        )

        for verb in (create, open_, read):
            add_common_arguments(verb)

    def handle_as(self, actor: Actor, **options: Any) -> None:
        if options["verb"] == "create":
            self.create(actor, options)
        elif options["verb"] == "open":
            self.open(actor, options)
        else:
            self.read(actor, options)

    def create(self, actor: Actor, options: dict[str, Any]) -> None:
        project = project_named(actor, options["project"])
        thread = actions.create_thread(
            actor, project_id=project.pk, name=options["name"], instance=options["instance"]
        )
        if options["json"]:
            self.emit_json({"thread": thread_json(thread)})
        else:
            self.emit(thread_line(thread))

    def open(self, actor: Actor, options: dict[str, Any]) -> None:
        opened = actions.open_thread(actor, thread_id=options["thread"])
        if options["json"]:
            self.emit_json({"open": open_json(opened)})
        else:
            self.emit(open_line(opened))

    def read(self, actor: Actor, options: dict[str, Any]) -> None:
        after = options["after"] if options["after"] is not None else 0
        found = messages_after(actor, thread_id=options["thread"], after=after)
        if options["json"]:
            self.emit_json({"messages": [message_json(message) for message in found]})
            return
        for message in found:
            self.emit(message_line(message))
