"""Who acts on the command line: the human, or with `--tester` the tester.

The two actors are built by separate functions, each from its own option, and neither from
the other (L5): the human through `access_human_actor`, the tester only through
`access_tester_actor`.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from broker.access import access_human_actor, access_tester_actor
from broker.actors import Actor
from broker.models import Business


def add_actor_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--tester",
        action="store_true",
        help="act as the business's tester instead of its human",
    )
    parser.add_argument(
        "--user",
        metavar="USERNAME",
        help="the human to act as (default: the human of the only business)",
    )
    parser.add_argument(
        "--business",
        metavar="SLUG",
        help="with --tester: the business whose tester acts (default: the only business)",
    )


def actor_from_options(options: dict[str, Any]) -> Actor:
    """The actor the options name; refusals of the broker propagate as `Refusal`."""
    if options["tester"]:
        if options["user"]:
            raise CommandError("--user names a human; --tester acts as the tester.")
        return tester_actor(business_slug=options["business"])
    if options["business"]:
        raise CommandError("--business goes with --tester; name the human with --user.")
    return human_actor(username=options["user"])


def human_actor(*, username: str | None) -> Actor:
    """The human named by `--user`, or the human of the only business."""
    if username is None:
        username = only_business(missing="--user USERNAME").human
    return access_human_actor(username=username)


def tester_actor(*, business_slug: str | None) -> Actor:
    """The tester of the business named by `--business`, or of the only business."""
    if business_slug is None:
        business_slug = only_business(missing="--business SLUG").slug
    return access_tester_actor(business_slug=business_slug)


def only_business(*, missing: str) -> Business:
    """The one stored business; with none or several the caller must name one."""
    businesses = list(Business.objects.order_by("pk")[:2])
    if len(businesses) == 1:
        return businesses[0]
    if not businesses:
        raise CommandError("No business is stored; load one with `manage.py loadbusiness`.")
    raise CommandError(f"Several businesses are stored; choose with {missing}.")
