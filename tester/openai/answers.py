"""A chat completion's answer: the turn's reply, waited for on the loop (SPEC §6.1, §7.1).

The view sends the turn and hands back one of these at once, freeing its worker; the loop then
follows the turn as the Console does, through the broker's own reads as the tester
(`thread.replies`, `thread.messages`): its state, its draft while it is written, its RESULT.
It reads again every `POLL_SECONDS`, the pace at which drafts are stored, whatever the channel
layer: a nudge the in-memory layer never carries across processes cannot delay it, and a read
is one short job on a worker (`mosaic.edge.loop_answers`).

The wait is bounded by MOSAIC_TESTER_API_WAIT_SECONDS without news of the turn — a state
changed, a draft grew — after which the answer is 504 with the thread: the turn goes on there.
A failed turn is 502 with the failure's sentence, a stopped one 409; neither is worth a retry
of the client's (`X-Should-Retry: false`): the runner has retried already, and each retry
would be a new turn. A streamed answer whose client hangs up stops the turn, as Stop does
(R13); a waited one leaves it to finish in its thread, as after a timeout.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError

from broker import actions, refusals, selectors
from broker.actors import Actor
from broker.models import OWED, Message, ReplyState, Step
from broker.refusals import Refusal
from chat.errors import STATUS, UNAVAILABLE_RETRY_AFTER
from mosaic.edge.handler import Overloaded
from mosaic.edge.loop_answers import LoopAnswer, Read
from tester.openai import shapes

logger = logging.getLogger("mosaic.chat")

FINAL = (ReplyState.ANSWERED, ReplyState.FAILED, ReplyState.STOPPED)
TURN_FAILED = "turn-failed"
TURN_STOPPED = "turn-stopped"
TIMED_OUT = "timeout"
REPLY_RESTARTED = "reply-restarted"
# A stop asked for as the client hangs up is tried this many times while the workers are busy.
STOP_TRIES = 5


def poll_seconds() -> float:
    """How often a waiting answer reads its turn: as often as drafts are stored, within reason."""
    return min(max(float(settings.MOSAIC_DRAFT_INTERVAL), 0.05), 1.0)


@dataclass(frozen=True)
class TurnNews:
    """What the tester may see of its turn now (SPEC §7.1)."""

    state: str
    draft: str = ""
    failure: str = ""
    steps: tuple[Step, ...] = ()
    result: Message | None = None

    @property
    def final(self) -> bool:
        return self.state in FINAL

    @property
    def mark(self) -> tuple[object, ...]:
        """What changes when there is news."""
        return (self.state, self.draft, len(self.steps), self.result is not None)


def read_turn(actor: Actor, *, thread: int, turn: int) -> TurnNews:
    """The turn's reply as its owner sees it, read through the broker as `actor` (R1, R20)."""
    views = selectors.thread_replies(actor, thread_id=thread, known=[turn])
    view = next((each for each in views if each.turn == turn), None)
    if view is None:
        raise Refusal(refusals.NOT_FOUND, "The turn is gone.")
    result = None
    if view.result is not None:
        found = selectors.thread_messages(actor, thread_id=thread, after=view.result - 1, limit=1)
        result = found[0] if found and found[0].pk == view.result else None
    return TurnNews(
        state=view.state,
        draft=view.draft,
        failure=view.failure,
        steps=view.steps,
        result=result,
    )


@dataclass
class Outcome:
    """How an answer ends when it is not the reply: its status, body and headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class TurnAnswer(LoopAnswer):
    """The answer to one turn of the tester's, settled on the loop."""

    def __init__(self, *, actor: Actor, thread: int, turn: int, instance: str) -> None:
        super().__init__(content_type="application/json")
        self.actor = actor
        self.thread = thread
        self.turn = turn
        self.instance = instance

    async def news(
        self, read: Read, since: TurnNews | None, done: Callable[[TurnNews], bool]
    ) -> TurnNews | None:
        """The turn once `done` holds of it, or None after MOSAIC_TESTER_API_WAIT_SECONDS
        without news."""
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        last: TurnNews | None = since
        while True:
            now: TurnNews | None
            try:
                now = await read(lambda: read_turn(self.actor, thread=self.thread, turn=self.turn))
            except Overloaded:
                # The workers are busy this moment: the next read tells.
                now = None
            if now is not None:
                if last is None or now.mark != last.mark:
                    quiet_since = loop.time()
                last = now
                if done(now):
                    return now
            if loop.time() - quiet_since >= settings.MOSAIC_TESTER_API_WAIT_SECONDS:
                return None
            await asyncio.sleep(poll_seconds())

    def end(self, outcome: Outcome) -> None:
        """Answer `outcome`, whole."""
        self.status_code = outcome.status
        for name, value in outcome.headers.items():
            self[name] = value
        self.content_whole(outcome.body)

    def content_whole(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self["Content-Type"] = "application/json"
        self["Content-Length"] = str(len(data))
        self.streaming_content = _once(data)

    def unanswered(self, news: TurnNews | None) -> Outcome:
        """Why there is no reply: a timeout, a failure or a stop."""
        where = shapes.mosaic(self.thread, self.turn)
        no_retry = {"X-Should-Retry": "false"}
        if news is None:
            waited = settings.MOSAIC_TESTER_API_WAIT_SECONDS
            message = (
                f"No news of the reply for {waited:g} s; the turn goes on in thread "
                f"{self.thread} (turn {self.turn})."
            )
            return Outcome(504, shapes.error(504, TIMED_OUT, message, mosaic=where), no_retry)
        if news.state == ReplyState.FAILED:
            message = news.failure or "The assistant could not answer."
            return Outcome(502, shapes.error(502, TURN_FAILED, message, mosaic=where), no_retry)
        message = f"The turn was stopped before its reply (thread {self.thread})."
        return Outcome(409, shapes.error(409, TURN_STOPPED, message, mosaic=where), no_retry)

    def refused(self, error: Exception) -> Outcome:
        """A read the broker refused (the tester switched off, say), or a database that is down."""
        if isinstance(error, Refusal):
            status = STATUS[error.code]
            return Outcome(status, shapes.error(status, error.code, error.detail))
        logger.warning("a turn's answer could not read it: %s", error.__class__.__name__)
        detail = "The service is unavailable; retry shortly."
        return Outcome(
            503,
            shapes.error(503, refusals.UNAVAILABLE, detail),
            {"Retry-After": UNAVAILABLE_RETRY_AFTER},
        )


class WaitedCompletion(TurnAnswer):
    """`stream: false`: one `chat.completion` once the turn is answered."""

    async def settle(self, read: Read) -> None:
        try:
            news = await self.news(read, None, lambda news: news.final)
        except (Refusal, DatabaseError) as error:
            self.end(self.refused(error))
            return
        if news is None or news.result is None:
            self.end(self.unanswered(news))
            return
        self.status_code = 200
        self.content_whole(
            shapes.completion(
                thread=self.thread,
                turn=self.turn,
                instance=self.instance,
                result=news.result,
                steps=news.steps,
            )
        )


class StreamedCompletion(TurnAnswer):
    """`stream: true`: `chat.completion.chunk` events built from the reply's drafts as they
    are stored, the last with `finish_reason` and `usage`, then `[DONE]`. Until the first
    draft the status is still open: a turn that fails, stops or times out before it is an
    error answer like `stream: false`'s."""

    async def settle(self, read: Read) -> None:
        try:
            first = await self.news(read, None, lambda news: news.final or bool(news.draft))
        except (Refusal, DatabaseError) as error:
            self.end(self.refused(error))
            return
        if first is None or (first.final and first.result is None):
            self.end(self.unanswered(first))
            return
        self.status_code = 200
        self["Content-Type"] = "text/event-stream; charset=utf-8"
        self["Cache-Control"] = "no-cache"
        self["X-Accel-Buffering"] = "no"
        self.streaming_content = self.events(read, first)

    async def events(self, read: Read, first: TurnNews) -> AsyncIterator[bytes]:
        """The stream, from the first news that has text."""
        created_at = shapes.created(first.result) if first.result is not None else int(time.time())

        def piece(delta: dict[str, Any], **extra: Any) -> bytes:
            extra.setdefault("model_name", self.instance)
            return _event(shapes.chunk(turn=self.turn, created_at=created_at, delta=delta, **extra))

        role = {"role": "assistant", "content": ""}
        yield piece(role, mosaic=shapes.mosaic(self.thread, self.turn))
        sent = ""
        news: TurnNews | None = first
        while news is not None:
            if news.result is not None:
                body = news.result.body
                if not body.startswith(sent):
                    yield _event(self.restarted())
                    return
                if body[len(sent) :]:
                    yield piece({"content": body[len(sent) :]})
                yield piece(
                    {},
                    model_name=news.result.model or self.instance,
                    finish=shapes.finish_reason(news.result),
                    usage=shapes.usage(news.result),
                    mosaic=shapes.mosaic(self.thread, self.turn, news.steps),
                )
                yield b"data: [DONE]\n\n"
                return
            if news.final:
                yield _event(self.unanswered(news).body)
                return
            if news.draft.startswith(sent) and len(news.draft) > len(sent):
                yield piece({"content": news.draft[len(sent) :]})
                sent = news.draft
            try:
                news = await self.news(read, news, _changed_from(news))
            except (Refusal, DatabaseError) as error:
                yield _event(self.refused(error).body)
                return
        yield _event(self.unanswered(None).body)

    def restarted(self) -> dict[str, Any]:
        message = (
            "The reply was started again after a transient failure, so what was streamed is "
            f"not its beginning; the reply is in thread {self.thread}."
        )
        return shapes.error(
            502, REPLY_RESTARTED, message, mosaic=shapes.mosaic(self.thread, self.turn)
        )

    async def hung_up(self, read: Read) -> None:
        """The client went away mid-stream: stop the turn, as Stop does (R13), if it is still
        owed a reply."""
        for _ in range(STOP_TRIES):
            try:
                await read(self.stop)
                return
            except Overloaded:
                await asyncio.sleep(poll_seconds())
            except (Refusal, DatabaseError) as error:
                logger.info("a hung-up stream's turn was not stopped: %s", error)
                return

    def stop(self) -> None:
        news = read_turn(self.actor, thread=self.thread, turn=self.turn)
        if news.state in OWED:
            actions.stop_assistant(self.actor, thread_id=self.thread)


def _changed_from(seen: TurnNews) -> Callable[[TurnNews], bool]:
    return lambda now: now.mark != seen.mark


def _event(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data
