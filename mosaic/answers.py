"""Answers written straight to ASGI by the layers in front of Django: the listeners' guards,
the probes and the ops listener."""

from __future__ import annotations

import json
from typing import Any

from mosaic.access_log import Send

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
