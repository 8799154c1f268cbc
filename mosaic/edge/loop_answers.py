"""Answers that finish on the event loop, after the worker that began them is free.

A request's sync path runs on one of a few workers (`mosaic.edge.handler`). An answer that
waits — for an assistant's reply, say — would hold its worker for as long, and a handful of
such requests would leave the listener none for anything else. A view that must wait answers
with a `LoopAnswer` instead: the worker returns it at once, through the middleware like any
answer, and the loop then `settle`s it (which may wait, and sets the status, the headers and
the body) and sends it, streamed or whole. What it reads meanwhile it reads through `read`: a
short job on a worker, one at a time, as a request would.

A client that hangs up before the whole answer is sent cancels the settling and the sending,
and the answer is told (`hung_up`), as Django's own handler cancels a view when its client
goes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from django.http import StreamingHttpResponse

from mosaic.edge.access_log import Receive, Send

logger = logging.getLogger("mosaic.chat")

T = TypeVar("T")


class Read(Protocol):
    """Run a short sync job (a read) on a worker, as a request runs there: `await read(func)`.
    Raises the handler's `Overloaded` when the workers are too busy to take it."""

    async def __call__(self, func: Callable[[], T], /) -> T: ...


class LoopAnswer(StreamingHttpResponse):
    """An answer the loop settles and sends once the worker that made it is free."""

    async def settle(self, read: Read) -> None:
        """Before anything is sent: wait as long as needed, then set the status, headers and
        body (`streaming_content`, an async iterator or a list of bytes)."""

    async def hung_up(self, read: Read) -> None:
        """The client went away before the whole answer was sent."""


async def answer_on_loop(
    answer: LoopAnswer,
    *,
    read: Read,
    receive: Receive,
    send: Send,
    send_response: Callable[[Any, Any], Awaitable[None]],
) -> None:
    """Settle and send `answer`, and tell it when its client hangs up meanwhile."""

    async def deliver() -> None:
        await answer.settle(read)
        await send_response(answer, send)

    delivering = asyncio.ensure_future(deliver())
    listening = asyncio.ensure_future(_hang_up(receive))
    await asyncio.wait({delivering, listening}, return_when=asyncio.FIRST_COMPLETED)
    if delivering.done():
        listening.cancel()
        delivering.result()
        return
    delivering.cancel()
    try:
        await delivering
    except asyncio.CancelledError:
        pass
    except Exception:
        logger.exception("an answer failed while its client hung up")
    await answer.hung_up(read)


async def _hang_up(receive: Receive) -> None:
    """Returns when the client disconnects (the request's body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass
