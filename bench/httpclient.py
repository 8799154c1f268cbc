"""A small HTTP/1.1 keep-alive client on asyncio streams, for the load generators.

The load generator shares two cores with the server; a full-featured client would spend more
of them than the requests it measures. This one speaks only what the benchmarks need: a
request with a JSON body, a response with `Content-Length` or chunked encoding.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> Answer:
        if self.writer is None:
            await self.open()
        assert self.reader is not None and self.writer is not None
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("connection closed")
        status = int(status_line.split()[1])
        length = None
        chunked = closing = False
        received: dict[str, str] = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            value = value.strip()
            received[name] = value
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and value.lower() == "close":
                closing = True
        if chunked:
            parts = []
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    break
                parts.append(await self.reader.readexactly(size))
                await self.reader.readline()
            data = b"".join(parts)
        elif length is not None:
            data = await self.reader.readexactly(length)
        else:
            data = await self.reader.read()
            closing = True
        if closing:
            self.close()
        return Answer(status, data, received)


class Pool:
    """Up to `size` keep-alive connections; a request waits for a free one (that wait is part
    of its latency, as it would be for a browser)."""

    def __init__(self, host: str, port: int, size: int, headers: dict[str, str]) -> None:
        self.headers = headers
        self.idle: asyncio.Queue[Connection] = asyncio.Queue()
        for _ in range(size):
            self.idle.put_nowait(Connection(host, port))

    async def request(self, method: str, path: str, payload: Any = None) -> Answer:
        connection = await self.idle.get()
        try:
            body = None if payload is None else json.dumps(payload).encode()
            try:
                return await connection.request(method, path, self.headers, body)
            except (ConnectionError, asyncio.IncompleteReadError):
                # A keep-alive connection the server closed: one fresh attempt.
                connection.close()
                return await connection.request(method, path, self.headers, body)
        except BaseException:
            connection.close()
            raise
        finally:
            self.idle.put_nowait(connection)

    async def warm(self) -> None:
        """Open every connection now, so the first requests measured do not pay for it."""
        connections = [self.idle.get_nowait() for _ in range(self.idle.qsize())]
        await asyncio.gather(*(c.open() for c in connections), return_exceptions=True)
        for connection in connections:
            self.idle.put_nowait(connection)

    async def get(self, path: str) -> Answer:
        return await self.request("GET", path)

    async def post(self, path: str, payload: Any) -> Answer:
        return await self.request("POST", path, payload)

    def close(self) -> None:
        while not self.idle.empty():
            self.idle.get_nowait().close()
