"""`GET /healthz` and `GET /readyz`: a thin ASGI layer in front of a listener.

They answer before any listener guard, session or Django runs (STYLE §23), so a probe needs no
sign-in, no particular Host and no cookie, and `/healthz` touches no database. Neither body
names a version or a setting.

- `/healthz` 200 `{"status": "alive"}`: the process serves requests.
- `/readyz` 200 `{"status": "ready", "checks": {...}}`, or 503 `unavailable` naming the failing
  checks (`mosaic.edge.readiness`), with `Retry-After`.
"""

from __future__ import annotations

from typing import Any

from broker import refusals
from chat.errors import STATUS, UNAVAILABLE_RETRY_AFTER, body
from mosaic.edge.access_log import HEALTHZ, READYZ, ASGIApp, Receive, Scope, Send
from mosaic.edge.answers import Headers, answer_json
from mosaic.edge.readiness import OK, readiness

PATHS = frozenset({HEALTHZ, READYZ})


async def _answer(send: Send, status: int, payload: dict[str, Any], extra: Headers = ()) -> None:
    await answer_json(send, status, payload, headers=((b"cache-control", b"no-store"), *extra))


async def answer_probe(scope: Scope, send: Send) -> None:
    """Answer `/healthz` or `/readyz` (the caller checked the path)."""
    if scope["path"] == HEALTHZ:
        await _answer(send, 200, {"status": "alive"})
        return
    checks = await readiness()
    failing = [name for name, outcome in checks.items() if outcome != OK]
    if not failing:
        await _answer(send, 200, {"status": "ready", "checks": checks})
        return
    payload = body(refusals.UNAVAILABLE, f"Not ready: {', '.join(failing)}.")
    await _answer(
        send,
        STATUS[refusals.UNAVAILABLE],
        {**payload, "checks": checks},
        ((b"retry-after", UNAVAILABLE_RETRY_AFTER.encode()),),
    )


def is_probe(scope: Scope) -> bool:
    return scope["type"] == "http" and scope.get("method") == "GET" and scope.get("path") in PATHS


def with_probes(app: ASGIApp) -> ASGIApp:
    """`/healthz` and `/readyz` in front of `app`; everything else goes on to it."""

    async def probes(scope: Scope, receive: Receive, send: Send) -> None:
        if is_probe(scope):
            await answer_probe(scope, send)
            return
        await app(scope, receive, send)

    return probes
