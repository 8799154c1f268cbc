"""`manage.py thread create|open|read|edit|regenerate|branch`: one of the actor's own threads,
through the broker.

    thread create --project P --name N [--instance I]
    thread open ID
    thread read ID [--after MSGID]
    thread edit ID MSGID --body TEXT
    thread regenerate ID MSGID [--instance I]
    thread branch ID MSGID [--name N] [--instance I]

Edit and regenerate make a new version of one of the actor's turns (R24): in place while it is
the thread's latest, else in a new branch; branch makes a thread carrying the conversation up
to a message.

Each takes `--tester`, `--user`, `--business` and `--json`.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from broker import actions
from broker.actors import Actor
from broker.models import Via
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
    help = (
        "Create, open, read, edit, regenerate or branch a thread, as the human or with --tester"
        " as the tester."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        verbs = parser.add_subparsers(
            dest="verb", required=True, metavar="{create,open,read,edit,regenerate,branch}"
        )

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

        edit = verbs.add_parser("edit", help="a new version of your turn, with new text")
        regenerate = verbs.add_parser("regenerate", help="ask your turn again")
        branch = verbs.add_parser("branch", help="a new thread carrying the conversation so far")
        for verb, message in (
            (edit, "your turn"),
            (regenerate, "your turn or its reply"),
            (branch, "the last message the branch carries"),
        ):
            verb.add_argument("thread", type=id_argument, metavar="ID")
            verb.add_argument("message", type=id_argument, metavar="MSGID", help=message)
        edit.add_argument("--body", required=True, metavar="TEXT", help="the turn's new text")
        regenerate.add_argument(
            "--instance", metavar="I", help="another instance to ask, in a new branch"
        )
        branch.add_argument("--name", metavar="N", help="the branch's name")
        branch.add_argument("--instance", metavar="I", help="the instance the branch talks to")

        for verb in (create, open_, read, edit, regenerate, branch):
            add_common_arguments(verb)

    def handle_as(self, actor: Actor, **options: Any) -> None:
        getattr(self, options["verb"])(actor, options)

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

    def edit(self, actor: Actor, options: dict[str, Any]) -> None:
        turn = actions.edit_turn(actor, **_turn_named(options), body=options["body"])
        self.emit_new_turn(turn, options)

    def regenerate(self, actor: Actor, options: dict[str, Any]) -> None:
        turn = actions.regenerate_turn(actor, **_turn_named(options), instance=options["instance"])
        self.emit_new_turn(turn, options)

    def emit_new_turn(self, turn: actions.NewTurn, options: dict[str, Any]) -> None:
        if options["json"]:
            self.emit_json(
                {
                    "message": message_json(turn.message),
                    "request": turn.request,
                    "thread": thread_json(turn.thread),
                }
            )
            return
        self.emit(thread_line(turn.thread))
        self.emit(message_line(turn.message))

    def branch(self, actor: Actor, options: dict[str, Any]) -> None:
        thread = actions.branch_thread(
            actor,
            thread_id=options["thread"],
            message_id=options["message"],
            name=options["name"],
            instance=options["instance"],
        )
        if options["json"]:
            self.emit_json({"thread": thread_json(thread)})
        else:
            self.emit(thread_line(thread))


def _turn_named(options: dict[str, Any]) -> dict[str, Any]:
    """The thread and turn an edit or a regenerate names, sent from the command line."""
    return {"thread_id": options["thread"], "message_id": options["message"], "via": Via.CLI}
