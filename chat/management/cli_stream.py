"""Reading a thread's messages through the broker, once or as they arrive (by polling)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from broker import selectors
from broker.actors import Actor
from broker.models import Message
from chat.management.cli_pages import every_row

# How often `talk` and `follow` ask the broker for new messages.
POLL_SECONDS = 0.3


def messages_after(actor: Actor, *, thread_id: int, after: int) -> list[Message]:
    """Every message of the actor's thread with an id above `after`, oldest first (R1)."""
    return every_row(
        lambda cursor, limit: selectors.thread_messages(
            actor, thread_id=thread_id, after=cursor, limit=limit
        ),
        after=after,
    )


def newest_id(actor: Actor, *, thread_id: int) -> int:
    """The id of the thread's newest message, 0 when it has none (R1 applies)."""
    newest = selectors.thread_messages(actor, thread_id=thread_id, limit=1)
    return newest[-1].pk if newest else 0


def stream(
    actor: Actor, *, thread_id: int, after: int, done: Callable[[], bool]
) -> Iterator[Message]:
    """The thread's messages after `after` as they arrive, until `done()` after a read."""
    while True:
        for message in messages_after(actor, thread_id=thread_id, after=after):
            after = message.pk
            yield message
        if done():
            return
        time.sleep(POLL_SECONDS)
