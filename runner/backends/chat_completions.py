"""An OpenAI-compatible chat completions backend, streamed, through the official `openai` client.

Any server speaking `POST {base_url}/chat/completions` works: OpenAI itself, a LiteLLM proxy, or
a local model behind llama.cpp's server, vLLM or Ollama. The thread's history becomes the
messages list (`runner.prompt`).

The reply is asked for as a stream (`stream: true`, with `stream_options.include_usage` so the
last chunk carries token usage), and `draft` is called with the whole text so far as chunks
arrive (SPEC §7.1, Streaming). A server that cannot stream and answers one JSON completion
instead is read as such.

Two timeouts bound a request, neither of them the whole reply: the connect timeout, and the idle
timeout — the longest silence allowed while waiting for the answer or between two chunks
(including the wait for the first one, while the model reads the prompt). A slow model that
keeps streaming is never cut off.

The request runs on a private event loop so a cancelled turn (its claim ended, the runner
stopping) closes the HTTP request at once instead of waiting for the model. Every failure is
classified by `runner.backends.failures`; no exception of the client reaches the run.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import queue
import ssl
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx2
from openai import (
    AsyncOpenAI,
    AsyncStream,
    AuthenticationError,
    DefaultAsyncHttpxClient,
    PermissionDeniedError,
)
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

from broker.steps import ToolCall
from runner.backends.base import (
    Draft,
    EndpointRefused,
    Reply,
    ReplyFailed,
    TurnCancelled,
    TurnTools,
)
from runner.backends.failures import (
    MalformedAnswer,
    failure_from_empty_reply,
    failure_from_error,
    trimmed,
)
from runner.prompt import prompt_messages
from runner.turns import Done, Turn

logger = logging.getLogger("mosaic.runner")

# How often a waiting request looks at its cancellation flag, in seconds.
CANCEL_POLL = 0.05
# Some local servers want a key but check none; the client refuses an empty one.
UNUSED_KEY = "unused"
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_IDLE_TIMEOUT = 60.0


def _text_of(value: object, what: str) -> str:
    """A tool call's field as text ("" when absent)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedAnswer(f"a tool call's {what} is not a string")
    return value


@dataclass
class CallSoFar:
    """A tool call as it arrives: streamed, its id and name come once and its arguments in
    fragments (SPEC §7.2)."""

    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ReplySoFar:
    """One answer of the model as it arrives: the text, the tool calls it asks for, and what
    the server reported about it."""

    started: float
    parts: list[str] = field(default_factory=list)
    # By the call's index in the answer.
    calls: dict[int, CallSoFar] = field(default_factory=dict)
    model: str = ""
    finish_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_token_ms: int | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def add_text(self, text: object) -> bool:
        """Append a piece of text; True when the reply grew."""
        if text is None:
            return False
        if not isinstance(text, str):
            raise MalformedAnswer("its text is not a string")
        if not text:
            return False
        if self.first_token_ms is None:
            self.first_token_ms = round((time.monotonic() - self.started) * 1000)
        self.parts.append(text)
        return True

    def add_call(self, index: object, *, call_id: object, name: object, arguments: object) -> None:
        """Add a tool call, or (same index) a fragment of one: its id and name are kept as the
        server first gives them, its arguments' text is joined."""
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise MalformedAnswer("a tool call has no index")
        call = self.calls.setdefault(index, CallSoFar())
        if not call.call_id:
            call.call_id = _text_of(call_id, "id")
        if not call.name:
            call.name = _text_of(name, "name")
        fragment = _text_of(arguments, "arguments")
        if fragment:
            call.arguments.append(fragment)

    def tool_calls(self, round: int) -> list[ToolCall]:
        """The calls asked for, in index order; a call the server gave no id gets one of its
        round and index, so a retried turn finds it again by the same id."""
        return [
            ToolCall(
                call_id=call.call_id or f"call-{round}-{index}",
                round=round,
                name=call.name,
                arguments="".join(call.arguments),
            )
            for index, call in sorted(self.calls.items())
        ]

    def note(self, *, model: object = None, finish_reason: object = None) -> None:
        if isinstance(model, str) and model:
            self.model = model
        if isinstance(finish_reason, str) and finish_reason:
            self.finish_reason = finish_reason

    def note_usage(self, usage: object) -> None:
        """Token counts from a chunk's `usage` (an object) or a completion's (a mapping);
        anything that is not a count is ignored."""
        for name in ("prompt_tokens", "completion_tokens"):
            value = usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, name, value)

    def reply(self) -> Reply:
        """The finished reply; a reply with no text is a failure (`failures`)."""
        text = self.text
        if not text.strip():
            raise failure_from_empty_reply(self.finish_reason)
        return Reply(
            text=text,
            model=self.model,
            finish_reason=self.finish_reason,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            first_token_ms=self.first_token_ms,
        )


def read_chunk(chunk: object, reply: ReplySoFar) -> bool:
    """Add one streamed chunk to `reply`; True when its text grew. Only the first choice
    counts (one is asked for). The client builds chunks without validating them, so every
    field is checked here."""
    if not isinstance(chunk, ChatCompletionChunk):
        raise MalformedAnswer("a streamed chunk is not a JSON object")
    reply.note(model=getattr(chunk, "model", None))
    reply.note_usage(getattr(chunk, "usage", None))
    choices = getattr(chunk, "choices", None) or []
    if not isinstance(choices, list):
        raise MalformedAnswer("a streamed chunk's choices are not a list")
    grew = False
    for choice in choices:
        if getattr(choice, "index", 0) not in (0, None):
            continue
        reply.note(finish_reason=getattr(choice, "finish_reason", None))
        delta = getattr(choice, "delta", None)
        grew = reply.add_text(getattr(delta, "content", None)) or grew
        for call in getattr(delta, "tool_calls", None) or []:
            function = getattr(call, "function", None)
            reply.add_call(
                getattr(call, "index", None),
                call_id=getattr(call, "id", None),
                name=getattr(function, "name", None),
                arguments=getattr(function, "arguments", None),
            )
    return grew


def read_completion(body: bytes, reply: ReplySoFar) -> None:
    """Fill `reply` from a whole JSON completion (a server that does not stream)."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        raise MalformedAnswer("it is not valid JSON") from None
    if not isinstance(data, dict):
        raise MalformedAnswer("it is not a JSON object")
    error = data.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        said = trimmed(message) if isinstance(message, str) and message.strip() else "no details"
        raise ReplyFailed(f"The model server reported an error: {said}", transient=True)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedAnswer("it has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedAnswer("its choice has no message")
    reply.note(model=data.get("model"), finish_reason=choices[0].get("finish_reason"))
    reply.note_usage(data.get("usage"))
    reply.add_text(message.get("content"))
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise MalformedAnswer("its tool calls are not a list")
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise MalformedAnswer("a tool call has no function")
        reply.add_call(
            index,
            call_id=call.get("id"),
            name=function.get("name"),
            arguments=function.get("arguments"),
        )


@dataclass
class TurnSoFar:
    """What a turn's answers add up to, over its rounds of tool calls: the tokens of every
    request, and the time to the first text of any (from the turn's first request)."""

    started: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    first_token_ms: int | None = None

    def add(self, answer: ReplySoFar) -> None:
        if answer.prompt_tokens is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + answer.prompt_tokens
        if answer.completion_tokens is not None:
            self.completion_tokens = (self.completion_tokens or 0) + answer.completion_tokens
        if self.first_token_ms is None:
            self.first_token_ms = answer.first_token_ms

    def reply(self, final: ReplySoFar) -> Reply:
        """The turn's reply: the final answer's text, model and finish reason, with the turn's
        totals."""
        reply = final.reply()
        return replace(
            reply,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            first_token_ms=self.first_token_ms,
        )


def calls_message(text: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The assistant message that asked for `calls`, as the model is sent it back."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in calls
        ],
    }


def replayed_calls(done: Sequence[Done]) -> list[dict[str, Any]]:
    """The calls earlier attempts at the turn made, round by round, each followed by its
    result, as the model saw them then."""
    messages: list[dict[str, Any]] = []
    for _, in_round in itertools.groupby(done, key=lambda call: call.round):
        calls = list(in_round)
        messages.append(
            calls_message(
                "",
                [
                    ToolCall(
                        call_id=call.call_id,
                        round=call.round,
                        name=call.tool,
                        arguments=call.arguments,
                    )
                    for call in calls
                ],
            )
        )
        messages.extend(
            {"role": "tool", "tool_call_id": call.call_id, "content": call.result} for call in calls
        )
    return messages


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The certificates a model server's TLS is checked against, loaded once per process (the
    environment's `SSL_CERT_FILE` or `SSL_CERT_DIR`, else the system's). Loading them takes
    tens of milliseconds of CPU with the GIL held: done per request, it stalled the runner's
    other threads — among them the one holding its business's stream lock, which every writer
    of the business waits for."""
    return httpx2.create_ssl_context()


class ChatCompletionsBackend:
    """Streams replies from an OpenAI-compatible endpoint. Failures raise a classified
    `ReplyFailed`; a cancelled turn raises `TurnCancelled` with its request closed."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        max_tokens: int | None = None,
        temperature: float | None = None,
        system_prompt: str | None = None,
        context_tokens: int | None = None,
    ) -> None:
        if connect_timeout <= 0 or idle_timeout <= 0:
            raise ValueError("the connect and idle timeouts must be positive")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if temperature is not None and temperature < 0:
            raise ValueError("temperature must not be negative")
        self.base_url = base_url
        self.model = model
        self.api_key = api_key or UNUSED_KEY
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        # None: not sent, the server's default applies.
        self.max_tokens = max_tokens
        self.temperature = temperature
        # None: the default system prompt, and MOSAIC_ASSISTANT_CONTEXT_TOKENS.
        self.system_prompt = system_prompt
        self.context_tokens = context_tokens

    def prompt(self, turn: Turn) -> list[ChatCompletionMessageParam]:
        return prompt_messages(
            turn,
            system=self.system_prompt,
            reply_tokens=self.max_tokens,
            context_tokens=self.context_tokens,
        )

    def request_body(
        self,
        messages: Sequence[ChatCompletionMessageParam | dict[str, Any]],
        tools: Sequence[dict[str, Any]] = (),
    ) -> dict[str, Any]:
        """The JSON of a streamed chat completion request; the tools offered only when there
        are any, max_tokens and temperature only when set (else the server's defaults apply)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = list(tools)
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body

    def check(self) -> None:
        """At a runner's start (`GET {base_url}/models`): a refused key or a model the server
        does not serve raises `EndpointRefused` with a sentence saying which; a server that
        cannot be reached now only logs, since turns wait and retry until it can."""
        try:
            served = asyncio.run(self._served_models())
        except AuthenticationError as error:
            raise EndpointRefused(
                f"The model server at {self.base_url} refused the API key ({error.status_code})."
            ) from error
        except PermissionDeniedError as error:
            raise EndpointRefused(
                f"The model server at {self.base_url} refused the API key ({error.status_code})."
            ) from error
        except Exception as error:
            failure = failure_from_error(
                error, connect_timeout=self.connect_timeout, idle_timeout=self.idle_timeout
            )
            logger.warning("model server check at %s: %s", self.base_url, failure.sentence)
            return
        if served is not None and self.model not in served:
            listed = ", ".join(sorted(served)[:10]) or "none"
            raise EndpointRefused(
                f"The model server at {self.base_url} does not serve the model "
                f"{self.model!r} (it lists: {listed})."
            )

    async def _served_models(self) -> set[str] | None:
        """The model ids the server lists; None when it lists none (some proxies route any)."""
        timeout = httpx2.Timeout(self.idle_timeout, connect=self.connect_timeout)
        async with self._client(timeout) as client:
            models = {model.id async for model in client.models.list()}
        return models or None

    def _client(self, timeout: httpx2.Timeout) -> AsyncOpenAI:
        """A client for one request's event loop (an async HTTP client is bound to the loop
        it first runs on), checking TLS against the process's certificates (`tls_context`).
        Retries are the run's (after a back-off, by whichever runner comes next): one attempt
        here."""
        return AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout=timeout,
            max_retries=0,
            http_client=DefaultAsyncHttpxClient(verify=tls_context(), timeout=timeout),
        )

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        if cancel.is_set():
            raise TurnCancelled
        try:
            return self._tool_loop(turn, tools, cancel, draft)
        except (TurnCancelled, ReplyFailed):
            raise
        except Exception as error:
            raise failure_from_error(
                error, connect_timeout=self.connect_timeout, idle_timeout=self.idle_timeout
            ) from error

    def _tool_loop(
        self, turn: Turn, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        """SPEC §7.2: ask the model; while it answers with tool calls, make each one (a step of
        the turn) and ask again with the results, at most `max_steps` rounds; its first answer
        without a call is the reply. A retried turn starts after the calls it made already."""
        toolbox = tools.toolbox
        offered = toolbox.definitions()
        messages: list[ChatCompletionMessageParam | dict[str, Any]] = [
            *self.prompt(turn),
            *replayed_calls(turn.done),
        ]
        round = max((done.round for done in turn.done), default=0) + 1
        so_far = TurnSoFar(started=time.monotonic())
        while True:
            answer = self._on_request_thread(
                self.request_body(messages, offered), so_far.started, cancel, draft
            )
            so_far.add(answer)
            calls = answer.tool_calls(round)
            if not calls:
                return so_far.reply(answer)
            if round > toolbox.max_steps:
                raise ReplyFailed(
                    f"The assistant went on calling tools past its limit of {toolbox.max_steps} "
                    "rounds, so this turn was ended.",
                    transient=False,
                )
            messages.append(calls_message(answer.text, calls))
            for call in calls:
                if cancel.is_set():
                    raise TurnCancelled
                called = tools.call(call)
                messages.append(
                    {"role": "tool", "tool_call_id": call.call_id, "content": called.content}
                )
            round += 1

    def _on_request_thread(
        self, body: dict[str, Any], started: float, cancel: threading.Event, draft: Draft
    ) -> ReplySoFar:
        """The request runs on its own event loop in a thread of its own, and the drafts come
        back to the calling thread: `draft` stores them through the database, which Django
        refuses to do from inside an event loop."""
        texts: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        outcome: list[ReplySoFar | BaseException] = []

        def request() -> None:
            try:
                outcome.append(asyncio.run(self._reply(body, started, cancel, texts.put)))
            except BaseException as error:  # handed to the calling thread as it is
                outcome.append(error)
            finally:
                texts.put(None)

        worker = threading.Thread(target=request, name="model-request", daemon=True)
        worker.start()
        failed: BaseException | None = None
        while (text := texts.get()) is not None:
            if failed is None:
                try:
                    draft(text)
                except BaseException as error:
                    failed = error
        worker.join()
        if failed is not None:
            raise failed
        (result,) = outcome
        if isinstance(result, BaseException):
            raise result
        return result

    async def _reply(
        self, body: dict[str, Any], started: float, cancel: threading.Event, draft: Draft
    ) -> ReplySoFar:
        """Run the request as a task and cancel it (closing the connection) once `cancel` is
        set."""
        request = asyncio.ensure_future(self._stream(body, started, cancel, draft))
        while not request.done():
            await asyncio.wait({request}, timeout=CANCEL_POLL)
            if cancel.is_set() and not request.done():
                request.cancel()
                # Wait for the task to close its response and client; whatever it raises while
                # doing so no longer matters.
                await asyncio.gather(request, return_exceptions=True)
                raise TurnCancelled
        return request.result()

    async def _stream(
        self, body: dict[str, Any], started: float, cancel: threading.Event, draft: Draft
    ) -> ReplySoFar:
        """One answer of the model, streamed (or whole, from a server that does not stream),
        its text shown as drafts as it grows."""
        # The read timeout is per read, so it is the idle timeout between chunks.
        timeout = httpx2.Timeout(
            self.idle_timeout, connect=self.connect_timeout, pool=self.connect_timeout
        )
        async with self._client(timeout) as client:
            reply = ReplySoFar(started=started)
            # Posted as built: `client.chat.completions.create` first walks the body against
            # its TypedDicts (`openai._utils._transform`), which for a body of plain strings
            # changes nothing and took a quarter of a busy runner's CPU, with the GIL held
            # while the thread holding its business's stream lock waited for it.
            stream = await client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                options={"security": {"bearer_auth": True}},
                stream=True,
                stream_cls=AsyncStream[ChatCompletionChunk],
            )
            async with stream:
                if "json" in stream.response.headers.get("content-type", ""):
                    # A server that does not stream answered with the whole completion.
                    read_completion(await stream.response.aread(), reply)
                    return reply
                async for chunk in stream:
                    if cancel.is_set():
                        raise TurnCancelled
                    if read_chunk(chunk, reply):
                        draft(reply.text)
            if not reply.finish_reason:
                # The protocol ends every stream with a finish reason; without one the
                # answer was cut short (a proxy closing it, a server dying mid-reply).
                raise ReplyFailed(
                    "The model server's stream ended before the reply was finished.",
                    transient=True,
                )
            return reply
