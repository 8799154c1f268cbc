"""Why a model server gave no reply, as a `ReplyFailed` the run can act on (SPEC §7.1,
"Failures end").

Every way a request to a chat completions server can go wrong ends here, so no exception of
the client library ever reaches the run as a traceback. Each failure is classified — transient
(retried after a back-off) or permanent (the turn fails at once) — and carries a sentence a
person can read, never an exception's repr:

==========================================  =========  ===========================================
what happened                               transient  why
==========================================  =========  ===========================================
the server cannot be reached (refused,      yes        a server restarting or a network blip
reset, unknown host, TLS failure)
no connection within the connect timeout    yes        the same, slower
no chunk within the idle timeout            yes        a stalled or overloaded model
the stream broke off mid-body               yes        a dropped connection; the next try may pass
408 Request Timeout                         yes        the server's own timeout
429 Too Many Requests                       yes        busy or rate-limited: wait `Retry-After`
5xx                                         yes        the server failed, `Retry-After` honoured
other 4xx: 400 (prompt too long, bad        no         the same request fails the same way:
parameter), 401/403 (key), 404 (model or               context too long, unknown model, bad key
endpoint), 413, 422 …
a redirect (3xx) the client does not        no         a wrong base URL does not mend itself
follow
a 200 that is not a chat completion:        yes        most often a proxy's glitch or a cut body;
malformed JSON, a chunk that is not JSON,              a server that never speaks the protocol
a stream ending with no finish reason                  fails after the run's last attempt
an error event inside a 200 stream          by code    its `code`, when an HTTP status, classifies
                                                       it like that status; otherwise transient
a reply with no text, cut at the token      no         the same limit cuts it again
limit (`finish_reason` `length`) or
withheld by a content filter
any other reply with no text                yes        sampling may give text next time
anything else the client library raises     yes        logged with its traceback for operators;
                                                       the run's attempts bound the retries
==========================================  =========  ===========================================

`retry_after` comes from the answer's `retry-after-ms` (milliseconds) or `Retry-After` (seconds,
or an HTTP date) header, on any transient status. A reply cut at the token limit *with* text is
no failure: it is returned with `finish_reason` `length` and the run marks it cut off.
"""

from __future__ import annotations

import email.utils
import json
import logging
import math
import os
import time
from collections.abc import Mapping

import httpx2
from openai import APIConnectionError, APIError, APIStatusError, APITimeoutError

from runner.backends.base import ReplyFailed

logger = logging.getLogger("mosaic.runner")

# A server's own message is shown to people trimmed to about this many characters.
MESSAGE_LIMIT = 200
# Statuses that may pass on a later try; every other 4xx (and 3xx) will not.
TRANSIENT_STATUSES = frozenset({408, 429})
# Error codes and types servers use for a prompt longer than the model's context (OpenAI,
# vLLM, llama.cpp's server, LiteLLM).
CONTEXT_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"}
)


class MalformedAnswer(Exception):
    """A 200 whose body is not the chat completion the protocol promises; `detail` says how."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def seconds(value: float) -> str:
    """`value` seconds for a sentence: "3 s", "0.5 s"."""
    return f"{value:g} s"


def trimmed(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` on one line, at most about `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """How long the server asked to wait, in seconds, or None when it did not say.

    `retry-after-ms` (milliseconds, a common extension) wins over `Retry-After`, which is
    either seconds or an HTTP date; a date in the past means no wait (0).
    """
    lowered = {name.lower(): value.strip() for name, value in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(name)
        if not value:
            continue
        try:
            delay = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(delay) and delay >= 0:
            return delay
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None  # not an HTTP date: those are always GMT
    now = time.time() if now is None else now
    return max(0.0, moment.timestamp() - now)


def server_message(error: APIError) -> str:
    """The server's own words about an error, trimmed; empty when it said nothing readable."""
    body = error.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message.strip():
            return trimmed(message)
        return ""
    if isinstance(body, str) and body.strip() and not body.lstrip().startswith("<"):
        return trimmed(body)  # plain text; an HTML error page says nothing a person needs
    return ""


def is_context_too_long(error: APIError, message: str) -> bool:
    """Whether a 400 says the prompt does not fit the model's context. Only the sentence
    depends on it: every 400 is permanent."""
    body = error.body if isinstance(error.body, Mapping) else {}
    marks = {str(body.get("code") or ""), str(body.get("type") or "")}
    if marks & CONTEXT_CODES:
        return True
    lowered = message.lower()
    return "context" in lowered and any(word in lowered for word in ("length", "window", "size"))


def with_message(sentence: str, message: str) -> str:
    return f"{sentence}: {message}" if message else f"{sentence}."


def status_failure(error: APIStatusError) -> ReplyFailed:
    """A 3xx, 4xx or 5xx answer, by the table above."""
    status = error.status_code
    message = server_message(error)
    transient = status in TRANSIENT_STATUSES or status >= 500
    retry_after = retry_after_seconds(error.response.headers) if transient else None
    wait = f"; it asked to wait {seconds(retry_after)}" if retry_after is not None else ""
    if status == 429:
        sentence = f"The model server is busy (429){wait}."
        if message:
            sentence += f" It said: {message}"
    elif status == 408:
        sentence = f"The model server timed out the request (408){wait}."
    elif status >= 500:
        sentence = with_message(f"The model server failed ({status}){wait}", message)
    elif status == 400 and is_context_too_long(error, message):
        sentence = with_message("The prompt is too long for the model", message)
    elif status in (401, 403):
        sentence = with_message(f"The model server refused the API key ({status})", message)
    elif status == 404:
        sentence = with_message(
            "The model server does not know this model or endpoint (404)", message
        )
    elif status < 400:
        sentence = f"The model server answered with a redirect ({status}); check its base URL."
    else:
        sentence = with_message(f"The model server refused the request ({status})", message)
    return ReplyFailed(sentence, transient=transient, retry_after=retry_after)


def timeout_failure(
    error: APITimeoutError, *, connect_timeout: float, idle_timeout: float
) -> ReplyFailed:
    cause = error.__cause__
    if isinstance(cause, httpx2.ConnectTimeout | httpx2.PoolTimeout):
        sentence = (
            f"The model server did not accept a connection within {seconds(connect_timeout)}."
        )
    elif isinstance(cause, httpx2.WriteTimeout):
        sentence = f"The model server did not take the request within {seconds(idle_timeout)}."
    else:
        sentence = f"The model server sent nothing for {seconds(idle_timeout)} (idle timeout)."
    return ReplyFailed(sentence, transient=True)


def connection_failure(error: APIConnectionError) -> ReplyFailed:
    cause = error.__cause__
    if isinstance(cause, httpx2.RemoteProtocolError | httpx2.ReadError):
        return ReplyFailed(
            "The model server's answer broke off before it was complete.", transient=True
        )
    reason = os_reason(error)
    suffix = f" ({reason})" if reason else ""
    return ReplyFailed(f"The model server could not be reached{suffix}.", transient=True)


def os_reason(error: BaseException) -> str:
    """The operating system's words for the first `OSError` behind `error` ("Connection
    refused"), or empty."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            # asyncio words a refused connection "Connect call failed ('127.0.0.1', 8080)";
            # the errno has the plain words. Name lookups carry negative (resolver) codes.
            if current.errno > 0:
                return os.strerror(current.errno)
            return str(current.strerror or "")
        current = current.__cause__ or current.__context__
    return ""


def stream_error_failure(error: APIError) -> ReplyFailed:
    """An error the server reported inside a 200 stream (`data: {"error": …}`). Its `code`,
    when it is an HTTP status, classifies it like that status; otherwise it is transient."""
    message = server_message(error) or trimmed(error.message)
    code = error.code or ""
    status = int(code) if code.isdigit() else None
    transient = status is None or status in TRANSIENT_STATUSES or status >= 500
    return ReplyFailed(
        f"The model server reported an error mid-reply: {message}", transient=transient
    )


def failure_from_error(
    error: Exception, *, connect_timeout: float, idle_timeout: float
) -> ReplyFailed:
    """`error`, raised while asking for or reading a reply, as a classified failure."""
    if isinstance(error, ReplyFailed):
        return error
    if isinstance(error, APIStatusError):
        return status_failure(error)
    if isinstance(error, APITimeoutError):
        return timeout_failure(error, connect_timeout=connect_timeout, idle_timeout=idle_timeout)
    if isinstance(error, APIConnectionError):
        return connection_failure(error)
    if isinstance(error, MalformedAnswer):
        return ReplyFailed(
            f"The model server's answer could not be read: {trimmed(error.detail)}.",
            transient=True,
        )
    if isinstance(error, json.JSONDecodeError | UnicodeDecodeError):
        # A streamed event that is not JSON, or not UTF-8.
        return ReplyFailed(
            "The model server's answer could not be read: a streamed chunk is not valid JSON.",
            transient=True,
        )
    if isinstance(error, APIError):
        return stream_error_failure(error)
    logger.error("reply backend: unexpected error from the model client", exc_info=error)
    return ReplyFailed(
        f"The request to the model server failed unexpectedly ({type(error).__name__}); "
        "the runner's log has the details.",
        transient=True,
    )


def failure_from_empty_reply(finish_reason: str) -> ReplyFailed:
    """A reply that carries no text, by its `finish_reason`."""
    if finish_reason == "length":
        return ReplyFailed(
            "The model reached its token limit before writing any text.", transient=False
        )
    if finish_reason == "content_filter":
        return ReplyFailed("The model server withheld the reply (content filter).", transient=False)
    return ReplyFailed("The model returned no text.", transient=True)
