"""The ops listener: `/metrics`, `/healthz` and `/readyz`, on loopback only.

It binds MOSAIC_OPS_PORT (default 7334, 0 for none) on 127.0.0.1 and answers only loopback
clients with a loopback Host (DNS rebinding); anything else it serves is `not-found`. The
human and tester listeners do not serve `/metrics`. Under `manage.py cluster` it is a process
of its own, adding up every process's values (`mosaic.edge.metrics`). Any local process can read
them, the tester's programs too: the human's activity shows there as counts, by listener, which
docs/decisions/probes-metrics-and-logs.md accepts, and why.
"""

from __future__ import annotations

import os

from asgiref.sync import sync_to_async
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from broker import refusals
from mosaic.edge.access_log import METRICS, ASGIApp, Receive, Scope, Send, one_line_each
from mosaic.edge.answers import answer, refuse
from mosaic.edge.health import answer_probe, is_probe
from mosaic.edge.ports import LOOPBACK

OPS_HOST = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})


def exposition() -> bytes:
    """Every metric in Prometheus's text format: every process's under the cluster."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest(REGISTRY)


def _host_name(scope: Scope) -> str:
    hosts = [value for name, value in scope.get("headers", []) if name.lower() == b"host"]
    host = hosts[0].decode("latin-1") if len(hosts) == 1 else ""
    return host.rsplit(":", 1)[0] if not host.endswith("]") else host


async def ops(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        await refuse(scope, send, refusals.NOT_FOUND, "The ops listener serves HTTP only.")
        return
    client = scope.get("client") or ("", 0)
    if client[0] not in LOOPBACK or _host_name(scope) not in LOOPBACK_NAMES:
        await refuse(scope, send, refusals.HOST_REFUSED, "The ops listener is loopback only.")
        return
    if is_probe(scope):
        await answer_probe(scope, send)
        return
    if scope.get("method") != "GET" or scope.get("path") != METRICS:
        await refuse(scope, send, refusals.NOT_FOUND, "The ops listener serves /metrics.")
        return
    content = await sync_to_async(exposition, thread_sensitive=False)()
    await answer(
        send,
        200,
        content,
        content_type=CONTENT_TYPE_LATEST.encode(),
        headers=((b"cache-control", b"no-store"),),
    )


def build_ops_application() -> ASGIApp:
    return one_line_each(ops, listener="ops")
