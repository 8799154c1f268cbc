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

Admission is bounded too, and decided as a request arrives (`mosaic.edge.admission`): one the
workers can serve within `MOSAIC_HTTP_QUEUE_SECONDS` is queued for them, the rest are answered
503 `unavailable` with `Retry-After` at once, having touched nothing. The queue is the
executor's own, so a worker that ends a job takes the next without a hop through the event
loop: under overload the loop is the busiest part of the process, and a worker waiting on it
for its next job is capacity lost.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable, MutableMapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from asgiref.sync import sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.core.handlers.exception import response_for_exception
from django.http import HttpResponseBase
from django.urls import set_script_prefix

from broker import refusals
from chat.errors import UNAVAILABLE_RETRY_AFTER
from mosaic.edge import metrics
from mosaic.edge.admission import AdmissionPolicy
from mosaic.edge.answers import refuse
from mosaic.edge.loop_answers import LoopAnswer, answer_on_loop

logger = logging.getLogger("mosaic.chat")

T = TypeVar("T")


class Overloaded(Exception):
    """The request was refused admission to the workers (`mosaic.edge.admission`)."""


class Workers(Protocol):
    async def run(self, func: Callable[..., T], /, *args: Any) -> T: ...


class WorkerPool:
    """`size` long-lived threads, and admission to them.

    The executor's thread count is the hard bound on concurrent request work (and so on
    database connections); the admission policy bounds its queue, so that what is queued can
    be served within `wait` seconds and the rest is refused at once.
    """

    def __init__(self, *, size: int, wait: float) -> None:
        self.size = size
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="mosaic-http")
        # The policy is shared by the event loops that admit and the workers that start and
        # end jobs.
        self._lock = threading.Lock()
        self._policy = AdmissionPolicy(workers=size, budget=wait)

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        """`func(*args)` on a worker; `Overloaded` when it was refused admission."""
        with self._lock:
            admitted_at = time.monotonic()
            was_overloaded = self._policy.overloaded
            admitted = self._policy.admit(admitted_at)
            overloaded = self._policy.overloaded
        if overloaded != was_overloaded:
            # One line when an overload begins and one when it ends, not one per refusal: each
            # refused request has its access-log line already, and a line costs the loop.
            logger.warning("overload %s", "began: refusing" if overloaded else "ended")
        if not admitted:
            raise Overloaded
        context = contextvars.copy_context()
        future = self._executor.submit(self._work, admitted_at, context.run, func, *args)
        future.add_done_callback(self._withdraw_if_cancelled)
        # Cancelled (the client went away), this cancels a job still queued; one already
        # running runs to its end, and holds its worker until then.
        return await asyncio.wrap_future(future)

    def _work(self, admitted_at: float, func: Callable[..., T], /, *args: Any) -> T:
        with self._lock:
            started_at = time.monotonic()
            was_overloaded = self._policy.overloaded
            started = self._policy.start(now=started_at, admitted_at=admitted_at)
        if not started:
            if not was_overloaded:
                logger.warning("overload began: a request waited past the queue wait")
            raise Overloaded
        try:
            return func(*args)
        finally:
            with self._lock:
                self._policy.finish(now=time.monotonic(), started_at=started_at)

    def _withdraw_if_cancelled(self, future: Future[Any]) -> None:
        if future.cancelled():
            with self._lock:
                self._policy.withdraw()


class CallingThread:
    """Runs the request path on the thread that awaits the application (asgiref's
    thread-sensitive mode): the test suite's clients, whose database transaction lives on the
    test's own thread."""

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        return await sync_to_async(func, thread_sensitive=True)(*args)


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
            response: HttpResponseBase
            try:
                response = await self.workers.run(self.respond, scope, body_file)
            except Overloaded:
                metrics.count_admission_refusal()
                # Answered on the loop without Django's response machinery: under overload the
                # loop answers every refused request, and its CPU is taken from the sends.
                await refuse(
                    scope,
                    send,
                    refusals.UNAVAILABLE,
                    "The server is busy; retry shortly.",
                    headers=((b"retry-after", UNAVAILABLE_RETRY_AFTER.encode()),),
                )
                return
            try:
                if isinstance(response, LoopAnswer):
                    await answer_on_loop(
                        response,
                        read=self.read,
                        receive=receive,
                        send=send,
                        send_response=self.send_response,
                    )
                else:
                    await self.send_response(response, send)
            finally:
                if response.streaming:
                    # A `LoopAnswer` (static files are served before this handler); its
                    # `request_finished` runs on a thread of asgiref's.
                    await sync_to_async(response.close, thread_sensitive=False)()
        finally:
            body_file.close()

    async def read(self, func: Callable[[], T], /) -> T:
        """A `LoopAnswer`'s read, on a worker between Django's request signals, so the worker's
        connection is kept or returned as after a request (`mosaic.edge.loop_answers`)."""
        return await self.workers.run(self._read_on_worker, func)

    def _read_on_worker(self, func: Callable[[], T]) -> T:
        signals.request_started.send(sender=self.__class__, scope=None)
        try:
            return func()
        finally:
            signals.request_finished.send(sender=self.__class__)

    def respond(self, scope: MutableMapping[str, Any], body_file: Any) -> HttpResponseBase:
        """The whole sync request path, on a worker, from building the request on (a refused
        request costs the loop no more than its 503). `request_started` and
        `request_finished` run here, so `close_old_connections` keeps or returns this worker's
        own connection."""
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            # Django's own 400 or 413 for a request it could not build.
            assert error_response is not None
            return error_response
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
