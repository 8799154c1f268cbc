"""Django's HTTP handler on a bounded pool of long-lived worker threads.

Django's own ASGI handler gives every request a thread of its own (a per-request
`ThreadSensitiveContext`) and, with sync middleware and views, hops between the event loop and
that thread once per layer: a new thread and a new database connection per request, and nothing
that bounds how many run at once. Under load each waiting request held its own PostgreSQL
connection until the server refused new ones.

Here the whole sync request path — `request_started`, the middleware, DRF, the broker,
`request_finished` — runs in one hop on one of `MOSAIC_HTTP_WORKERS` threads that live as long
as the process. Each worker keeps its database connection between requests (SQLite: persistent
connections with health checks; PostgreSQL: checked out of the process's pool per request), and
the database never sees more of them than there are workers and pool slots.

Admission is bounded too: a request that finds every worker busy waits at most
`MOSAIC_HTTP_QUEUE_SECONDS` on the event loop, where waiting costs neither a thread nor a
connection, and is then answered 503 `unavailable` with `Retry-After`, having touched nothing.
That wait is for bursts. Once a request has been refused, and until one finds a worker free
again, the overload is sustained and a request waits at most `SUSTAINED_WAIT`: a full wait per
request would keep a second of work queued for as long as the overload lasts, which the server
then owes when it ends (about four seconds of slow answers at half capacity, P7) instead of
serving the requests that come after. A stall shorter than the full wait (a slow commit) refuses
no one: it is the refusals, not the busy workers, that tell an overload from a stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections.abc import Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.core.handlers.exception import response_for_exception
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.urls import set_script_prefix

from broker import refusals
from chat.errors import UNAVAILABLE_RETRY_AFTER, error_response
from mosaic import metrics

logger = logging.getLogger("mosaic.chat")

T = TypeVar("T")


class Overloaded(Exception):
    """Every worker stayed busy for the whole admission wait."""


class Workers(Protocol):
    async def run(self, func: Callable[..., T], /, *args: Any) -> T: ...


# In a sustained overload (a request was refused, and none has found a worker free since) a
# request waits at most this long.
SUSTAINED_WAIT = 0.1


class Admission:
    """A loop's way in to the workers: their free slots, and whether the overload is sustained."""

    def __init__(self, size: int) -> None:
        self.slots = asyncio.Semaphore(size)
        self.sustained = False


class WorkerPool:
    """`size` long-lived threads, and admission to them from the event loop.

    The executor's thread count is the hard bound on concurrent request work (and so on
    database connections); the per-loop semaphore lets a request wait for a free worker on the
    loop, up to `wait` seconds (`sustained_wait` in a sustained overload), instead of in the
    executor's unbounded queue.
    """

    def __init__(
        self,
        *,
        size: int,
        wait: float,
        sustained_wait: float = SUSTAINED_WAIT,
    ) -> None:
        self.size = size
        self.wait = wait
        self.sustained_wait = min(sustained_wait, wait)
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="mosaic-http")
        self._admissions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Admission] = (
            weakref.WeakKeyDictionary()
        )

    def _admission_of(self, loop: asyncio.AbstractEventLoop) -> Admission:
        admission = self._admissions.get(loop)
        if admission is None:
            admission = self._admissions[loop] = Admission(self.size)
        return admission

    def _wait_for(self, admission: Admission) -> float:
        """How long a request arriving now may wait for a worker."""
        if not admission.slots.locked():
            admission.sustained = False
        return self.sustained_wait if admission.sustained else self.wait

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        """`func(*args)` on a worker; `Overloaded` when none came free in time."""
        loop = asyncio.get_running_loop()
        admission = self._admission_of(loop)
        slots = admission.slots
        try:
            async with asyncio.timeout(self._wait_for(admission)):
                await slots.acquire()
        except TimeoutError:
            admission.sustained = True
            raise Overloaded from None

        def release(_: object) -> None:
            # The slot is the worker's, not the waiting coroutine's: it is given back when the
            # work ends, even if the client went away and the coroutine was cancelled.
            # RuntimeError: the loop closed first, and its semaphore went with it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(slots.release)

        context = contextvars.copy_context()
        future = self._executor.submit(context.run, func, *args)
        future.add_done_callback(release)
        return await asyncio.wrap_future(future)


class CallingThread:
    """Runs the request path on the thread that awaits the application (asgiref's
    thread-sensitive mode): the test suite's clients, whose database transaction lives on the
    test's own thread."""

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        return await sync_to_async(func, thread_sensitive=True)(*args)


def overloaded_response() -> JsonResponse:
    response = error_response(refusals.UNAVAILABLE, "The server is busy; retry shortly.")
    response["Retry-After"] = UNAVAILABLE_RETRY_AFTER
    return response


class PooledHandler(ASGIHandler):
    """Django's ASGI handler with the sync request path on `workers`, in one hop."""

    def __init__(self, workers: Workers) -> None:
        BaseHandler.__init__(self)
        # Django's sync chain, as under WSGI: the middleware and views run on the worker.
        self.load_middleware(is_async=False)
        self.workers = workers

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django serves HTTP only, not {scope['type']}.")
        await self.handle(scope, receive, send)

    async def handle(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            set_script_prefix(get_script_prefix(scope))
            request, error_response = self.create_request(scope, body_file)
            response: HttpResponseBase
            if request is None:
                # Django's own 400 or 413 for a request it could not build.
                assert error_response is not None
                response = error_response
            else:
                try:
                    response = await self.workers.run(self.respond, request, scope)
                except Overloaded:
                    logger.warning("overloaded: %s %s answered 503", scope["method"], scope["path"])
                    metrics.count_admission_refusal()
                    response = overloaded_response()
            try:
                await self.send_response(response, send)
            finally:
                if response.streaming:
                    # Rare here (static files are served before this handler); its
                    # `request_finished` runs on a thread of asgiref's.
                    await sync_to_async(response.close, thread_sensitive=False)()
        finally:
            body_file.close()

    def respond(self, request: HttpRequest, scope: MutableMapping[str, Any]) -> HttpResponseBase:
        """The whole sync request path, on a worker. `request_started` and `request_finished`
        run here, so `close_old_connections` keeps or returns this worker's own connection."""
        try:
            signals.request_started.send(sender=self.__class__, scope=scope)
            response = self.get_response(request)
        except Exception as error:  # the middleware chain answers its own; this is the signal's
            response = response_for_exception(request, error)
        if not response.streaming:
            # The body is rendered: close now, on this worker. A streamed body is closed once
            # it has been sent.
            response.close()
        return response
