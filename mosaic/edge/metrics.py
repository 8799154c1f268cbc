"""The Prometheus metrics, defined here and nowhere else, and what moves them.

Served as `/metrics` by the ops listener only (`mosaic.ops`). Under `manage.py cluster` every
process writes its values to PROMETHEUS_MULTIPROC_DIR (prometheus-client's multi-process mode,
chosen when the variable is set before this module is imported), and the ops listener adds
them up; `manage.py serve` is one process, whose own registry is served.

What moves them, from the edge inward: each ended request (the access log's observer), each
WebSocket accepted and closed (`counted_sockets`), a busy server's refusal
(`count_admission_refusal`), a turn sent by a chat view (chat's `turn_sent` signal), and each
attempt at a turn (the broker's `turn_ended` signal): neither the chat API nor the broker imports
anything of this. Database pool waits are read from the process's psycopg pool (`pop_stats`) as
requests and turns end, at most once a second. Every label's values are bounded: routes are URL
patterns, listeners and states fixed sets, instances those configured, and the model a server
names is cut and capped (`BoundedLabel`). The site's app loads this module in every process
(`mosaic.apps`), runners too.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.dispatch import receiver
from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from broker.signals import TurnEnd, turn_ended
from chat.signals import turn_sent
from mosaic.edge import access_log
from mosaic.edge.access_log import ASGIApp, Message, Receive, Scope, Send

# A `_created` sample beside every counter and histogram doubles the page and says nothing here.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Replies take seconds to minutes; requests milliseconds to seconds.
REPLY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)

REQUESTS = Counter(
    "mosaic_http_requests",
    "HTTP requests answered, by listener, route and status.",
    ["listener", "route", "status"],
)
REQUEST_SECONDS = Histogram(
    "mosaic_http_request_duration_seconds",
    "From a request's arrival to the end of its answer, by listener and route.",
    ["listener", "route"],
)
OPEN_SOCKETS = Gauge(
    "mosaic_websockets_open",
    "WebSockets accepted and not yet closed, by listener.",
    ["listener"],
    multiprocess_mode="livesum",
)
SENDS = Counter("mosaic_sends", "Turns sent to a thread, by listener.", ["listener"])
TURNS = Counter("mosaic_turns", "Attempts at turns, by how they ended.", ["state"])
REPLY_FIRST_TOKEN_SECONDS = Histogram(
    "mosaic_reply_first_token_seconds",
    "From sending a turn to the model to its first text.",
    buckets=REPLY_BUCKETS,
)
REPLY_SECONDS = Histogram(
    "mosaic_reply_duration_seconds",
    "From taking a turn up to its reply, for turns answered.",
    buckets=REPLY_BUCKETS,
)
TOKENS = Counter(
    "mosaic_tokens",
    "Model tokens, by instance, model (as the server named it; bounded) and kind (prompt or "
    "completion).",
    ["instance", "model", "kind"],
)
ADMISSION_REFUSALS = Counter(
    "mosaic_admission_refusals", "Requests answered 503 because every worker stayed busy."
)
DB_POOL_WAITS = Counter(
    "mosaic_db_pool_waits", "Database connection requests that waited for a pooled connection."
)
DB_POOL_WAIT_SECONDS = Counter(
    "mosaic_db_pool_wait_seconds", "Time spent waiting for a pooled database connection."
)
DB_POOL_TIMEOUTS = Counter(
    "mosaic_db_pool_timeouts", "Database connection requests that gave up waiting."
)

for _end in TurnEnd:
    TURNS.labels(_end.value)


class BoundedLabel:
    """A label whose values come from outside, kept to a bounded set: each value cut to
    `length` characters, the first `most` distinct values kept as they are, any later one
    counted as `other`. A series per value lives as long as the process, so a value per reply
    would grow the page, and the memory, without end."""

    OTHER = "other"

    def __init__(self, *, most: int, length: int) -> None:
        self.most = most
        self.length = length
        self._kept: set[str] = set()
        # Turns end on several threads of a runner at once.
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        value = value[: self.length]
        with self._lock:
            if value in self._kept:
                return value
            if len(self._kept) < self.most:
                self._kept.add(value)
                return value
        return self.OTHER


# The model a server names in its answer is its own words (a dated version, an alias, whatever a
# proxy in front reports): at most MODEL_LABELS of them a process, each at most MODEL_LABEL_MAX
# characters; a reply that names none is `-`.
MODEL_LABELS = 20
MODEL_LABEL_MAX = 64
NO_MODEL = "-"
model_label = BoundedLabel(most=MODEL_LABELS, length=MODEL_LABEL_MAX)


# How often a process reads its pool's waits: at most once a second, not per request (a
# request costs the event loop about 0.7 ms of CPU, and reading the pool on each was 0.05 of it).
POOL_STATS_SECONDS = 1.0
_pool_stats_due = float("-inf")


def collect_pool_stats(now: float | None = None) -> None:
    """Add the pool's waits since the last read, when POOL_STATS_SECONDS have passed since it
    (PostgreSQL's pool; none on SQLite). The pool keeps counting in between: nothing is lost,
    only read late."""
    global _pool_stats_due
    now = time.monotonic() if now is None else now
    if now < _pool_stats_due:
        return
    _pool_stats_due = now + POOL_STATS_SECONDS
    wrapper = connections[DEFAULT_DB_ALIAS]
    pools = getattr(type(wrapper), "_connection_pools", {})
    # Read only: asking `wrapper.pool` would open a pool where none was needed yet.
    pool = pools.get(DEFAULT_DB_ALIAS)
    if pool is None:
        return
    stats = pool.pop_stats()
    DB_POOL_WAITS.inc(stats.get("requests_queued", 0))
    DB_POOL_WAIT_SECONDS.inc(stats.get("requests_wait_ms", 0) / 1000)
    DB_POOL_TIMEOUTS.inc(stats.get("requests_errors", 0))


def observe_request(fields: dict[str, Any]) -> None:
    """An ended HTTP request (`mosaic.edge.access_log`'s fields)."""
    if fields["kind"] != "http":
        return
    REQUESTS.labels(fields["listener"], fields["route"], str(fields["status"])).inc()
    REQUEST_SECONDS.labels(fields["listener"], fields["route"]).observe(fields["ms"] / 1000)
    collect_pool_stats()


access_log.observers.append(observe_request)


@receiver(turn_sent)
def count_send(sender: Any, *, listener: str, **kwargs: Any) -> None:
    SENDS.labels(listener).inc()


def count_admission_refusal() -> None:
    ADMISSION_REFUSALS.inc()


@receiver(turn_ended)
def observe_turn(
    sender: Any, *, instance: str, state: TurnEnd, seconds: float, reply: Any, **kwargs: Any
) -> None:
    TURNS.labels(state.value).inc()
    if reply is not None:
        REPLY_SECONDS.observe(seconds)
        if reply.first_token_ms is not None:
            REPLY_FIRST_TOKEN_SECONDS.observe(reply.first_token_ms / 1000)
        model = model_label(reply.model) if reply.model else NO_MODEL
        for kind, count in (
            ("prompt", reply.prompt_tokens),
            ("completion", reply.completion_tokens),
        ):
            if count:
                TOKENS.labels(instance, model, kind).inc(count)
    collect_pool_stats()


def counted_sockets(app: ASGIApp, *, listener: str) -> ASGIApp:
    """Count `listener`'s WebSockets open: from their accept until the connection ends."""

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await app(scope, receive, send)
            return
        accepted = False

        async def watched(message: Message) -> None:
            nonlocal accepted
            if message["type"] == "websocket.accept" and not accepted:
                accepted = True
                OPEN_SOCKETS.labels(listener).inc()
            await send(message)

        try:
            await app(scope, receive, watched)
        finally:
            if accepted:
                OPEN_SOCKETS.labels(listener).dec()

    return counted
