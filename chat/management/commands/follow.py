"""`manage.py follow --thread ID [--after MSGID]`: print a thread's messages as they arrive.

Without `--after` it starts at the thread's newest message, so only new ones are printed; with
it, every message after that id first. It runs until interrupted (Ctrl-C), then exits 0.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from django.core.management.base import CommandParser

from broker.actors import Actor
from chat.management.cli_command import BrokerCommand, id_argument
from chat.management.cli_format import message_json, message_line
from chat.management.cli_stream import newest_id, stream


class Command(BrokerCommand):
    help = (
        "Stream one of your threads' new messages until Ctrl-C, "
        "as the human or with --tester as the tester."
    )

    def add_command_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--thread", type=id_argument, required=True, metavar="ID")
        parser.add_argument(
            "--after", type=id_argument, metavar="MSGID", help="start after this id"
        )
        # Tests stop the stream after a while instead of interrupting it.
        parser.add_argument("--max-seconds", type=float, help=argparse.SUPPRESS)

    def handle_as(self, actor: Actor, **options: Any) -> None:
        thread_id: int = options["thread"]
        after = options["after"]
        if after is None:
            after = newest_id(actor, thread_id=thread_id)
        limit = options["max_seconds"]
        deadline = None if limit is None else time.monotonic() + limit
        try:
            for message in stream(
                actor,
                thread_id=thread_id,
                after=after,
                done=lambda: deadline is not None and time.monotonic() >= deadline,
            ):
                if options["json"]:
                    self.emit_json(message_json(message))
                else:
                    self.emit(message_line(message))
        except KeyboardInterrupt:
            return
