"""Every error under `/v1/` on the tester listener in OpenAI's shape, whoever answered it.

Refusals are made all along the way — the body cap, the listener's guard (L8), the busy
server's 503, the fence (L4), Django's 404, the gates and the broker — and each writes the
product's `{"error", "detail"}` (SPEC §6). A client of these routes decides on OpenAI's shape
instead, so this layer, in front of everything else of the listener, rewrites that body into
`{"error": {"message", "type", "param", "code"}}` with the same status and code (SPEC §6.1). A
401 says its scheme (`WWW-Authenticate: Bearer`). Anything else passes as it was.
"""

from __future__ import annotations

import json
from typing import Any

from mosaic.edge.access_log import ASGIApp, Message, Receive, Scope, Send
from tester.openai import shapes

PREFIX = "/v1"


def is_openai_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def openai_shaped(app: ASGIApp) -> ASGIApp:
    """`app` with its error answers under `/v1/` in OpenAI's shape."""

    async def shaped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_openai_path(str(scope.get("path", ""))):
            await app(scope, receive, send)
            return
        held: Message | None = None
        parts: list[bytes] = []

        async def reshaping(message: Message) -> None:
            nonlocal held
            if message["type"] == "http.response.start" and message.get("status", 200) >= 400:
                held = message
                return
            if held is None or message["type"] != "http.response.body":
                await send(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            start, body = reshaped(held, b"".join(parts))
            await send(start)
            await send({"type": "http.response.body", "body": body})

        await app(scope, receive, reshaping)

    return shaped


def reshaped(start: Message, body: bytes) -> tuple[Message, bytes]:
    """An error answer's start and body, the body in OpenAI's shape when it was the product's."""
    status = int(start["status"])
    product = _product_error(body)
    headers = [(name, value) for name, value in start.get("headers", [])]
    if product is None:
        return start, body
    code, detail = product
    body = json.dumps(shapes.error(status, code, detail)).encode()
    headers = [
        (name, value)
        for name, value in headers
        if name.lower() not in (b"content-length", b"content-type")
    ]
    headers += [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    return {**start, "headers": headers}, body


def _product_error(body: bytes) -> tuple[str, str] | None:
    try:
        answer: Any = json.loads(body)
    except ValueError:
        return None
    if (
        isinstance(answer, dict)
        and set(answer) == {"error", "detail"}
        and isinstance(answer["error"], str)
        and isinstance(answer["detail"], str)
    ):
        return answer["error"], answer["detail"]
    return None
