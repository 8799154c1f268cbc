"""`manage.py talk --thread ID [--wait SECONDS]`: chat in a thread from the terminal.

Each line read from standard input is sent as a turn; the command then prints the thread's
new messages until the reply to that turn arrives (a RESULT `in_reply_to` it, R12), and reads
the next line. End of input ends the session; a reply that does not come within `--wait`
seconds, or a turn that ends without one (stopped, failed: SPEC §7.1), ends it with status 1.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from django.core.management.base import CommandError, CommandParser

from broker import actions, selectors
from broker.actors import Actor
from broker.models import Message, MessageClass, ReplyState, Via
from chat.management.cli_command import BrokerCommand, id_argument
from chat.management.cli_format import message_json, message_line, printable
from chat.management.cli_stream import newest_id, stream

DEFAULT_WAIT_SECONDS = 60.0


def seconds(value: str) -> float:
    number = float(value)
    if not number >= 0:
        raise ValueError(value)
    return number


class Command(BrokerCommand):
    help = (
        "Talk in one of your threads: each line of input is a turn; the reply is printed. "
        "As the human, or with --tester as the tester."
    )
    # Tests hand in their own input.
    stealth_options = ("stdin",)

    def add_command_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--thread", type=id_argument, required=True, metavar="ID")
        parser.add_argument(
            "--wait",
            type=seconds,
            default=DEFAULT_WAIT_SECONDS,
            metavar="SECONDS",
            help=f"how long to wait for each reply (default {DEFAULT_WAIT_SECONDS:g})",
        )

    def handle_as(self, actor: Actor, **options: Any) -> None:
        thread_id: int = options["thread"]
        source: TextIO = options.get("stdin") or sys.stdin
        # Reads the thread first: someone else's thread is refused before any input is read.
        seen = newest_id(actor, thread_id=thread_id)
        try:
            for line in iter(source.readline, ""):
                body = line.rstrip("\r\n")
                if not body.strip():
                    continue
                turn = actions.send_to_thread(actor, thread_id=thread_id, body=body, via=Via.CLI)
                seen = self.print_until_reply(
                    actor, options, thread_id=thread_id, after=seen, turn=turn.message
                )
        except KeyboardInterrupt:
            # Ctrl-C ends the session like end of input.
            return

    def print_until_reply(
        self, actor: Actor, options: dict[str, Any], *, thread_id: int, after: int, turn: Message
    ) -> int:
        """Print the thread's messages after `after` until `turn`'s reply; the last id shown."""
        deadline = time.monotonic() + options["wait"]
        ended: list[selectors.ReplyView] = []

        def done() -> bool:
            if time.monotonic() >= deadline:
                return True
            ended[:] = [
                reply
                for reply in selectors.thread_replies(actor, thread_id=thread_id, known=[turn.pk])
                if reply.turn == turn.pk and reply.state in (ReplyState.STOPPED, ReplyState.FAILED)
            ]
            return bool(ended)

        for message in stream(actor, thread_id=thread_id, after=after, done=done):
            after = message.pk
            if options["json"]:
                self.emit_json(message_json(message))
            else:
                self.emit(message_line(message))
            if message.message_class == MessageClass.RESULT and message.in_reply_to_id == turn.pk:
                return after
        if ended:
            why = f": {printable(ended[0].failure)}" if ended[0].failure else ""
            raise CommandError(f"No reply to #{turn.pk} ({ended[0].state}{why})")
        raise CommandError(f"No reply to #{turn.pk} within {options['wait']:g} s.")
