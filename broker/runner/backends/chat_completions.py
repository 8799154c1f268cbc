"""An OpenAI-compatible chat completions backend, through the official `openai` client.

Any server speaking `POST {base_url}/chat/completions` works: OpenAI itself, or a local model
behind llama.cpp's server, vLLM or Ollama. The thread's history becomes the messages list; a
tester turn's prompt begins with SPEC §7's tester line.

The request runs on a private event loop so a cancelled turn (its claim ended) abandons the
HTTP request at once instead of waiting for the model.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import suppress

from openai import AsyncOpenAI, OpenAIError
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from broker.runner.backends.base import Draft, Reply, ReplyFailed, TurnCancelled, TurnTools
from broker.runner.prompt import prompt_messages
from broker.runner.turns import Turn

# How often a waiting request looks at its cancellation flag, in seconds.
CANCEL_POLL = 0.05
# Some local servers want a key but check none; the client refuses an empty one.
UNUSED_KEY = "unused"


class ChatCompletionsBackend:
    """Replies from an OpenAI-compatible endpoint; errors and timeouts raise `ReplyFailed`."""

    name = "openai"

    def __init__(self, *, base_url: str, model: str, api_key: str, timeout: float) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key or UNUSED_KEY
        self.timeout = timeout

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        if cancel.is_set():
            raise TurnCancelled
        try:
            completion = asyncio.run(self._complete(prompt_messages(turn), cancel))
        except OpenAIError as error:
            raise ReplyFailed(f"{type(error).__name__}: {error}", transient=True) from error
        choice = completion.choices[0] if completion.choices else None
        content = choice.message.content if choice else None
        if not content or not content.strip():
            raise ReplyFailed("the model returned no text", transient=True)
        return Reply(text=content)

    async def _complete(
        self, messages: list[ChatCompletionMessageParam], cancel: threading.Event
    ) -> ChatCompletion:
        # Retries are the runner's (after a back-off, by whichever runner comes next), so the
        # client makes one attempt within the timeout.
        async with AsyncOpenAI(
            base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=0
        ) as client:
            request = asyncio.ensure_future(
                client.chat.completions.create(model=self.model, messages=messages)
            )
            while not request.done():
                await asyncio.wait({request}, timeout=CANCEL_POLL)
                if cancel.is_set() and not request.done():
                    request.cancel()
                    with suppress(asyncio.CancelledError):
                        await request
                    raise TurnCancelled
            return request.result()
