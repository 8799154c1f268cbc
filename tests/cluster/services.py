"""Services the cluster tests own, so they may break them: a redis-server on a free port, a
TCP proxy in front of PostgreSQL that can cut every connection, and a fake OpenAI-compatible
model whose `[slow]` turns are held until the run gives up on them."""

from __future__ import annotations

import asyncio
import json
import os
import select
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.console.server import answers, free_port
from tests.support.waits import wait_for

SLOW = "[slow]"
HOLD = "[hold]"


def require_binary(name: str) -> str:
    """The program's path; a missing one skips, or fails under MOSAIC_REQUIRE_SERVICES=1."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed"
        if os.environ.get("MOSAIC_REQUIRE_SERVICES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def wait_until(predicate: Any, *, timeout: float, what: str, every: float = 0.05) -> Any:
    """`wait_for`, naming what was awaited when it does not come."""
    try:
        return wait_for(predicate, timeout=timeout, every=every)
    except AssertionError as error:
        raise AssertionError(f"{what}: not within {timeout}s") from error


@dataclass
class RedisServer:
    """A redis-server of the test's own, without persistence: a restart forgets everything."""

    binary: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *(self.binary, "--bind", "127.0.0.1", "--port", str(self.port)),
                *("--save", "", "--appendonly", "no"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: answers(self.port), timeout=10, what="redis-server answering")

    def crash(self) -> None:
        """SIGKILL: connections drop without a goodbye, and every group is lost."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class TcpProxy:
    """Forwards 127.0.0.1:port to a target; `cut` drops every connection and refuses new
    ones until `restore`. Runs its own event loop in a thread."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.refusing = False
        self.connections: set[asyncio.StreamWriter] = set()
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> None:
        self.thread.start()
        assert self.ready.wait(10), "the proxy did not start"

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port)
        )
        self.ready.set()
        self.loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.connections |= {writer, upstream}
        try:
            await asyncio.gather(self._pipe(reader, upstream), self._pipe(upstream_reader, writer))
        finally:
            for end in (writer, upstream):
                self.connections.discard(end)
                end.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.transport.abort()

    def _call(self, function: Any) -> None:
        done = threading.Event()

        def call() -> None:
            function()
            done.set()

        self.loop.call_soon_threadsafe(call)
        assert done.wait(5)

    def cut(self) -> None:
        def cut() -> None:
            self.refusing = True
            for end in list(self.connections):
                end.transport.abort()

        self._call(cut)

    def restore(self) -> None:
        self._call(lambda: setattr(self, "refusing", False))

    def stop(self) -> None:
        self.cut()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@dataclass
class FakeModel:
    """An OpenAI-compatible chat completions endpoint on loopback. A turn whose text holds
    `[slow]` is held until its client goes away (the run was cancelled) and then counted in
    `abandoned`; one that holds `[hold]` is streamed (`tests.support.revocation_scenario`'s pieces),
    held after its first words (`holding`) until `release`; every other turn is answered at
    once."""

    url: str = ""
    answered: int = 0
    held: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    closing: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    holding: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            text = str(request["messages"][-1]["content"])
            if SLOW in text:
                with model.lock:
                    model.held.append(text)
                while not model.closing.is_set():
                    readable, _, _ = select.select([self.connection], [], [], 0.05)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        with model.lock:
                            model.abandoned.append(text)
                        return
                return
            if HOLD in text:
                self.stream_held(request["model"])
                return
            payload = json.dumps(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": request["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "model reply"},
                            "finish_reason": "stop",
                        }
                    ],
                }
            ).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                return
            with model.lock:
                model.answered += 1

        def stream_held(self, name: str) -> None:
            """The suite's streamed answer, held after its first words until `release`."""
            from tests.support.model_servers import FakeModel as StreamingModel
            from tests.support.model_servers import write_event
            from tests.support.revocation_scenario import HOLD_AFTER, PIECES

            events = StreamingModel(pieces=PIECES).stream_events(name, None, include_usage=False)
            self.protocol_version = "HTTP/1.1"
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for number, event in enumerate(events):
                    if number == HOLD_AFTER:
                        model.holding.set()
                        while not (model.release.wait(0.05) or model.closing.is_set()):
                            pass
                    write_event(self.wfile, event)
                write_event(self.wfile, None)
            except OSError:
                return

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class FakeModelServer:
    def __init__(self) -> None:
        self.model = FakeModel()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.model))
        self.server.daemon_threads = True
        self.model.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> FakeModel:
        self.thread.start()
        return self.model

    def stop(self) -> None:
        self.model.closing.set()
        self.server.shutdown()
        self.server.server_close()
