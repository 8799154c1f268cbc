"""A small WebSocket client over asyncio streams (RFC 6455), enough to follow a live stream
of a real server: the handshake with Origin and cookies, text frames in, close codes out."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import struct
from dataclasses import dataclass, field
from urllib.parse import urlsplit

TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


class HandshakeRefused(Exception):
    """The server answered the upgrade with an HTTP status instead of 101."""

    def __init__(self, status: int) -> None:
        super().__init__(f"handshake refused with HTTP {status}")
        self.status = status


@dataclass
class WebSocket:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    close_code: int | None = None
    _parts: list[bytes] = field(default_factory=list)

    async def receive(self) -> str | None:
        """The next text message, or None once the connection is closed (see `close_code`)."""
        while True:
            try:
                head = await self.reader.readexactly(2)
                length = head[1] & 0x7F
                if length == 126:
                    (length,) = struct.unpack("!H", await self.reader.readexactly(2))
                elif length == 127:
                    (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
                payload = await self.reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                self.close_code = self.close_code or 1006
                return None
            opcode, final = head[0] & 0x0F, bool(head[0] & 0x80)
            if opcode == CLOSE:
                self.close_code = struct.unpack("!H", payload[:2])[0] if payload else 1005
                await self.close()
                return None
            if opcode == PING:
                await self._send(PONG, payload)
                continue
            if opcode in (TEXT, 0x0):
                self._parts.append(payload)
                if final:
                    text = b"".join(self._parts).decode()
                    self._parts.clear()
                    return text

    async def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        self.writer.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()

    async def close(self) -> None:
        if not self.writer.is_closing():
            await self._send(CLOSE, struct.pack("!H", 1000))
            self.writer.close()


async def connect(
    url: str, *, origin: str, cookies: dict[str, str] | None = None, timeout: float = 5.0
) -> WebSocket:
    """Open `ws://host:port/path?query`; raises `HandshakeRefused` or `OSError`."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        f"Origin: {origin}",
    ]
    if cookies:
        lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in cookies.items()))
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        writer.close()
        raise ConnectionError("closed during the handshake") from exc
    status = int(head.split(b" ", 2)[1])
    if status != 101:
        writer.close()
        raise HandshakeRefused(status)
    return WebSocket(reader, writer)
