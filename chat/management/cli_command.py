"""The base of the chat commands: the actor options, `--json`, and refusals as exit status 2."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import InterfaceError, OperationalError

from broker import fields
from broker.actors import Actor
from broker.refusals import Refusal
from chat.management.cli_actor import actor_from_options, add_actor_arguments
from chat.management.cli_format import to_json

# Exit status of a command the broker refused; usage errors keep Django's 1.
REFUSED = 2


def id_argument(text: str) -> int:
    """An id on the command line, read as every transport reads one (`broker.fields.parse_id`):
    ASCII digits only. A malformed id is a usage error, as argparse makes any bad value."""
    try:
        return fields.parse_id(text, what="id")
    except Refusal as refusal:
        raise argparse.ArgumentTypeError(f"{refusal.code}: {refusal.detail}") from None


def add_common_arguments(parser: CommandParser) -> None:
    add_actor_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


class BrokerCommand(BaseCommand):
    """A command that calls the broker as the human or, with `--tester`, as the tester."""

    def add_arguments(self, parser: CommandParser) -> None:
        add_common_arguments(parser)
        self.add_command_arguments(parser)

    def add_command_arguments(self, parser: CommandParser) -> None:
        """The command's own options."""

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            # A command line can carry what no transport stores or prints: an undecodable byte
            # arrives as a lone surrogate. Every text option is held to the broker's rule.
            for name, value in options.items():
                if isinstance(value, str):
                    fields.clean_text(value, what=name.replace("_", "-"))
            self.handle_as(actor_from_options(options), **options)
        except Refusal as refusal:
            # `code: detail`, as every transport answers a refusal.
            raise CommandError(f"{refusal.code}: {refusal.detail}", returncode=REFUSED) from refusal
        except (OperationalError, InterfaceError) as error:
            raise CommandError(
                "unavailable: the database did not answer; retry.", returncode=REFUSED
            ) from error

    def handle_as(self, actor: Actor, **options: Any) -> None:
        raise NotImplementedError

    def emit(self, line: str) -> None:
        """Write one line and flush it, so a pipe reading a stream sees it at once."""
        self.stdout.write(line)
        self.stdout.flush()

    def emit_json(self, document: dict[str, Any]) -> None:
        self.emit(to_json(document))
