"""Answers written straight to ASGI by the layers in front of Django: the listeners' guards,
the probes, the ops listener and the handler's admission."""

from __future__ import annotations

import json
from typing import Any

from chat.errors import STATUS, body, close_code
from mosaic.edge.access_log import Scope, Send

Headers = tuple[tuple[bytes, bytes], ...]


async def answer(
    send: Send, status: int, content: bytes, *, content_type: bytes, headers: Headers = ()
) -> None:
    """A whole HTTP answer: its type and length, then `headers`, then the body."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(content)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": content})


async def answer_json(send: Send, status: int, payload: Any, *, headers: Headers = ()) -> None:
    """`payload` as a JSON answer."""
    content = json.dumps(payload).encode()
    await answer(send, status, content, content_type=b"application/json", headers=headers)


async def refuse(
    scope: Scope,
    send: Send,
    code: str,
    detail: str,
    *,
    headers: Headers = (),
) -> None:
    """Answer an HTTP request with the error body (and `headers`), or close a WebSocket before
    accepting it."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": close_code(code), "reason": code})
        return
    if scope["type"] != "http":
        return
    await answer_json(send, STATUS[code], body(code, detail), headers=headers)
