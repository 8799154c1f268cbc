"""Live streams of the Console: the trail and one thread's messages (SPEC §6, L7).

The database is the record and a push is only a nudge (`broker.events`): on connect a consumer
follows its group first (through the process's one membership, `chat.fan_out`) and then reads
every row after the client's `after` cursor; each nudge reads again after the last id it sent.
So rows arrive in id order, none twice, and a dropped or reordered push loses nothing. Sockets
of one process showing the same stream to the same actor share each read (`chat.shared_reads`).
Every read goes through the broker's own verbs, with the actor the listener bound (L5), so the
owner check (R1) and the trail's scoping (R20) hold here as they do over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections.abc import Hashable, Mapping
from functools import partial
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from broker import events, fields, refusals, selectors
from broker.access import access_human_actor, access_tester_actor
from broker.actors import Actor
from broker.models import OWED, ReplyState
from broker.refusals import Refusal
from chat.api import shapes
from chat.api.parsers import load_json
from chat.errors import close_code
from chat.fan_out import fan_out_of_this_loop, fan_outs_of_this_loop
from chat.revocations import REVOKED, REVOKED_GROUP, Revocation
from chat.session_checks import SharedSignInChecks, sign_in_of
from chat.shared_reads import Frames, SharedReads, tick

logger = logging.getLogger("mosaic.chat")

FRAME_MAX = 4096
# The rows one read sends: the largest page the broker gives.
BATCH = fields.MAX_LIMIT

# Per process: the reads of every socket this server holds.
SHARED_READS = SharedReads()
# Per process: the sign-in checks of the human sockets opened with a session.
SIGN_IN_CHECKS = SharedSignInChecks()
# How often every socket renews its group memberships and reads once more (`Resync`).
RESYNC_SECONDS = settings.MOSAIC_RESYNC_SECONDS


def actor_for(scope: dict[str, Any], listener: str) -> Actor:
    """The listener's actor: always the tester on its listener (L5), else the signed-in human."""
    if listener == "tester":
        return access_tester_actor(business_slug=settings.MOSAIC_TESTER_BUSINESS)
    user = scope.get("user")
    if user is None or not user.is_authenticated or not user.is_active:
        raise Refusal(refusals.NOT_AUTHENTICATED, "Sign in first.")
    return access_human_actor(username=user.get_username())


def query(scope: dict[str, Any]) -> dict[str, list[str]]:
    from urllib.parse import parse_qs

    return parse_qs(scope.get("query_string", b"").decode("latin-1"))


def cursor(scope: dict[str, Any]) -> int:
    """The `after` query parameter: a non-negative id, 0 when absent."""
    values = query(scope).get("after", ["0"])
    if len(values) != 1:
        raise Refusal(refusals.INVALID, "after must be one non-negative id.")
    return fields.parse_id(values[0], what="after cursor")


def batched(scope: dict[str, Any]) -> bool:
    """The `batch` query parameter: `1` asks for the rows of one read in one frame."""
    values = query(scope).get("batch", ["0"])
    if values not in (["0"], ["1"]):
        raise Refusal(refusals.INVALID, "batch is 0 or 1.")
    return values == ["1"]


class StreamConsumer(AsyncWebsocketConsumer):  # type: ignore[misc]
    """A stream of rows after a cursor: replay from the database, then live, in id order."""

    # One row: {"type": frame_type, field: row}; several read together, to a socket that
    # asked for them with `batch=1`: {"type": rows_type, "rows": [row, ...]}.
    frame_type = ""
    field = ""
    rows_type = ""
    # Set once the socket's sign-in ended: nothing is sent after (`recheck`).
    revoked = False
    # The check of the sign-in after a revocation that may end it; sends wait for it.
    verdict: asyncio.Future[None] | None = None

    def __init__(self, *, listener: str, **kwargs: Any) -> None:
        # Bound per listener by its routes (`as_asgi(listener=…)`), never read from the request.
        super().__init__(**kwargs)
        self.listener = listener

    async def connect(self) -> None:
        try:
            self.actor = await database_sync_to_async(actor_for)(self.scope, self.listener)
            self.last_id = cursor(self.scope)
            self.batch = batched(self.scope)
            await database_sync_to_async(self.authorise)()
        except Refusal as refusal:
            await self.close(code=close_code(refusal.code))
            return
        self.wanted = asyncio.Event()
        # The process hands nudges on from the moment the socket follows its stream, while
        # it still connects: `want_read` works from here.
        self.nudged_id = 0
        self.sign_in = sign_in_of(self.scope) if self.listener == "human" else None
        self.fan_out = fan_out_of_this_loop(self.channel_layer)
        if self.sign_in is not None:
            # Hears each sign-in that ends from now on (`chat.revocations`); one that ended
            # since the scope's session was read, the check below finds.
            await self.fan_out.follow(REVOKED_GROUP, self)
        await self.fan_out.follow(self.group_name(), self)
        try:
            await self.check_signed_in(not_before=tick())
        except Refusal as refusal:
            await self.close(code=close_code(refusal.code))
            return
        if self.verdict is not None:
            await asyncio.wait([self.verdict])
        if self.revoked:
            return  # a revocation heard while it connected ended it: the connection is refused
        await self.accept()
        # Joined before the first read: a row committed from here on nudges us, and the read
        # below or the next one after it finds it; the cursor keeps each row to one frame.
        self.sender = asyncio.create_task(self.send_rows())
        self.want_read()
        resync_of_this_loop().add(self)

    async def disconnect(self, code: int) -> None:
        resync_of_this_loop().sockets.discard(self)
        if hasattr(self, "fan_out"):
            self.fan_out.unfollow(self.group_name(), self)
            self.fan_out.unfollow(REVOKED_GROUP, self)
        sender = getattr(self, "sender", None)
        if sender is not None:
            sender.cancel()

    async def resync(self) -> bool:
        """Check the sign-in once more and read once more (the process renews the memberships,
        in `Resync`); False when that failed (the socket then closes `unavailable`, and its
        client reconnects after its last id)."""
        try:
            # Finds a sign-in ended by a write no signal announced (`chat.revocations`).
            await self.check_signed_in(not_before=tick())
        except Refusal as refusal:
            await self.close(code=close_code(refusal.code))
            return True
        except Exception:
            await self.close(code=close_code(refusals.UNAVAILABLE))
            return False
        self.want_read()
        return True

    async def check_signed_in(self, *, not_before: int) -> None:
        """Refuse `not-authenticated` once the session this socket was opened with no longer
        signs its user in (deleted, expired, user deactivated, password changed), by a check
        that began at `not_before` or later. Sockets without a session sign-in pass."""
        if self.sign_in is None:
            return
        if not await SIGN_IN_CHECKS.is_signed_in(self.sign_in, not_before=not_before):
            raise Refusal(refusals.NOT_AUTHENTICATED, "The session has ended; sign in again.")

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' own dispatch, without its `close_old_connections` hop to a thread before
        every handler: a nudge to five hundred sockets cost five hundred hops. No handler here
        touches the database on the loop; every read goes through `database_sync_to_async`,
        which closes old connections on the thread that reads."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    # --- what each stream defines ---

    def group_name(self) -> str:
        raise NotImplementedError

    def authorise(self) -> None:
        """Refuse the connection as the broker would refuse the read (runs in a thread)."""

    def stream(self) -> Hashable:
        """What the socket shows, to whom: sockets with equal streams share their reads."""
        raise NotImplementedError

    def rows_after(self, after: int) -> list[tuple[int, dict[str, Any]]]:
        """The next rows after `after`, each with its id (runs in a thread)."""
        raise NotImplementedError

    async def after_rows(self) -> None:
        """What a stream sends after each read's rows (runs on the loop)."""

    def frames_after(self, after: int) -> Frames:
        """Each row after `after` with its JSON, encoded once for every socket sharing the read."""
        return [(row_id, json.dumps(row)) for row_id, row in self.rows_after(after)]

    async def send_frames(self, frames: Frames) -> None:
        """The rows of one read: one frame each, or (`batch=1`) one frame for them all."""
        if self.batch and len(frames) > 1:
            rows = ", ".join(text for _, text in frames)
            await self.send(text_data=f'{{"type": "{self.rows_type}", "rows": [{rows}]}}')
            self.last_id = frames[-1][0]
            return
        for row_id, text in frames:
            await self.send(text_data=f'{{"type": "{self.frame_type}", "{self.field}": {text}}}')
            self.last_id = row_id

    # --- the loop ---

    async def send_rows(self) -> None:
        """Coalesce nudges: while a read runs, further nudges ask for one more read."""
        try:
            while True:
                await self.wanted.wait()
                self.wanted.clear()
                not_before = 0
                while True:
                    began, frames = await SHARED_READS.frames(
                        (self.stream(), self.last_id),
                        read=partial(self.frames_after, self.last_id),
                        not_before=not_before,
                    )
                    if frames:
                        # No row leaves after the sign-in ended: checked after the read began.
                        await self.check_signed_in(not_before=began)
                    await self.send_frames(frames)
                    if len(frames) == BATCH:
                        continue
                    if began > self.nudged or self.last_id >= self.nudged_id:
                        break
                    # A shared read that began before the nudge, without the nudged row: it may
                    # predate the row. Read once more, from a read that began after the nudge.
                    not_before = self.nudged
                await self.after_rows()
        except Refusal as refusal:
            # Access ended (signed out, session ended, tester switched off): the socket ends.
            await self.close(code=close_code(refusal.code))
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("stream failed")
            await self.close(code=close_code(refusals.UNAVAILABLE))

    def want_read(self, row_id: int | None = None) -> None:
        """Ask the sender for a read that sees every row committed before now: the nudged row
        `row_id`, or (None) whatever the socket may have missed."""
        self.nudged = tick()
        self.nudged_id = max(self.nudged_id, self.last_id + 1 if row_id is None else row_id)
        self.wanted.set()

    def hear(self, message: Mapping[str, Any]) -> None:
        """A nudge to the socket's stream, handed on by the process (`chat.fan_out`): a new
        row, (`turn.nudge`) a turn whose reply state or draft changed (SPEC §7.1), or a
        sign-in that ended (`chat.revocations`)."""
        if message.get("type") == REVOKED:
            if self.sign_in is not None and Revocation.of(message).ends(self.sign_in):
                self.verdict = asyncio.ensure_future(self.recheck(self.verdict))
        elif message.get("type") == events.TURN_NUDGE:
            self.want_read()
        else:
            self.want_read(int(message.get("id", 0)))

    async def recheck(self, earlier: asyncio.Future[None] | None) -> None:
        """A revocation names this socket's session or user: from the instant it is heard, the
        socket sends nothing until a check that began after it (so after its commit) says
        whether the sign-in still holds. A user's revocation heard late may predate this very
        sign-in (the password changed, then changed back, then signed in again); only the check
        can tell. Ended (or the check failed), the socket closes and sends nothing more."""
        if earlier is not None:
            await asyncio.wait([earlier])
        if self.revoked:
            return
        try:
            await self.check_signed_in(not_before=tick())
            return
        except Refusal as refusal:
            code = close_code(refusal.code)
        except Exception:
            logger.warning("could not check a revoked sign-in", exc_info=True)
            code = close_code(refusals.UNAVAILABLE)
        self.revoked = True
        sender = getattr(self, "sender", None)
        if sender is not None:
            sender.cancel()
        await self.close(code=code)

    async def send(
        self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False
    ) -> None:
        if self.verdict is not None and not self.verdict.done():
            await asyncio.wait([self.verdict])
        if self.revoked:
            return
        await super().send(text_data=text_data, bytes_data=bytes_data, close=close)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Clients may ping; any other frame is answered with an error, and the socket lives on."""
        if bytes_data is not None or text_data is None:
            await self.error(refusals.INVALID, "Frames are JSON text.")
            return
        if len(text_data) > FRAME_MAX:
            await self.error(refusals.TOO_LARGE, f"Frames are at most {FRAME_MAX} characters.")
            return
        try:
            frame = load_json(text_data)
        except ValueError:
            await self.error(refusals.INVALID, "The frame is not JSON.")
            return
        if not isinstance(frame, dict) or frame.get("type") != "ping":
            await self.error(refusals.INVALID, 'The only frame a client sends is {"type": "ping"}.')
            return
        await self.send(text_data=json.dumps({"type": "pong", "last": self.last_id}))

    async def error(self, code: str, detail: str) -> None:
        await self.send(text_data=json.dumps({"type": "error", "error": code, "detail": detail}))


class Resync:
    """Every RESYNC_SECONDS the sockets of one event loop renew their group memberships and
    read once more.

    A channel layer can forget a membership — Redis restarted without persistence forgets them
    all, and every layer lets one lapse after its group expiry — and a socket left out of its
    group would hear no nudge again, though its connection lives on. The process's memberships
    for the streams (`chat.fan_out`) are renewed first, then each socket's own. The database forgets
    nothing, so a read after the renewal sends whatever the socket missed. Sockets that show one
    stream from one cursor share that read (`chat.shared_reads`): an idle process makes one read
    per stream per period, not one per socket.
    """

    def __init__(self) -> None:
        self.sockets: weakref.WeakSet[StreamConsumer] = weakref.WeakSet()
        self.task: asyncio.Task[None] | None = None

    def add(self, socket: StreamConsumer) -> None:
        self.sockets.add(socket)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        while self.sockets:
            await asyncio.sleep(RESYNC_SECONDS)
            sockets = list(self.sockets)
            try:
                for fan_out in fan_outs_of_this_loop():
                    await fan_out.renew()
            except Exception:
                failed = sockets
                for socket in sockets:
                    await socket.close(code=close_code(refusals.UNAVAILABLE))
            else:
                failed = [socket for socket in sockets if not await socket.resync()]
            if failed:
                logger.warning(
                    "channel layer unavailable: %d of %d sockets closed", len(failed), len(sockets)
                )


_resyncs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Resync] = weakref.WeakKeyDictionary()


def resync_of_this_loop() -> Resync:
    loop = asyncio.get_running_loop()
    if loop not in _resyncs:
        _resyncs[loop] = Resync()
    return _resyncs[loop]


class TrailConsumer(StreamConsumer):
    """`/ws/trail/`: every trail row the actor may read (R16 labels, R20 scoping)."""

    frame_type = "trail.row"
    field = "row"
    rows_type = "trail.rows"

    def group_name(self) -> str:
        return events.trail_group(self.actor.business_id)

    def authorise(self) -> None:
        selectors.read_trail(self.actor, after=self.last_id, limit=1)

    def stream(self) -> Hashable:
        return ("trail", self.actor)

    def rows_after(self, after: int) -> list[tuple[int, dict[str, Any]]]:
        rows = selectors.read_trail(self.actor, after=after, limit=BATCH)
        return [(row.pk, shapes.TrailRowOut(row).data) for row in rows]


class ThreadConsumer(StreamConsumer):
    """`/ws/chat/threads/ID/`: one thread's messages, to its owner only (R1), and how the
    replies to its turns are going (SPEC §7.1).

    After each read of messages the socket reads the replies still owed (and those it showed
    as owed before, or just sent the turn of) and sends what changed since it last told:
    `reply.state` for a new state, `reply.draft` with the whole text so far while a run
    writes. Drafts are never records, so they go to this socket only, never to the trail; a
    socket that joins mid-reply gets the current draft with its first read. An `answered`
    state waits until the RESULT itself has been sent, so a client never sees a turn
    answered before its reply.
    """

    frame_type = "message"
    field = "message"
    rows_type = "messages"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # What the socket last told of each turn still owed: its state, then its draft.
        self.told: dict[int, tuple[tuple[str, str | None, str], str]] = {}
        # The rows sent since the replies were last read: the turns among them are told too.
        self.shown: set[int] = set()
        # The steps told of each turn followed while owed, as (call id, outcome or None).
        self.told_steps: dict[int, set[tuple[str, str | None]]] = {}

    @property
    def thread_id(self) -> int:
        return int(self.scope["url_route"]["kwargs"]["thread_id"])

    def group_name(self) -> str:
        return events.thread_group(self.thread_id)

    def authorise(self) -> None:
        selectors.thread_messages(self.actor, thread_id=self.thread_id, after=self.last_id, limit=1)

    def stream(self) -> Hashable:
        return ("thread", self.thread_id, self.actor)

    def rows_after(self, after: int) -> list[tuple[int, dict[str, Any]]]:
        messages = selectors.thread_messages(
            self.actor, thread_id=self.thread_id, after=after, limit=BATCH
        )
        return [(message.pk, shapes.MessageOut(message).data) for message in messages]

    async def send_frames(self, frames: Frames) -> None:
        await super().send_frames(frames)
        self.shown.update(row_id for row_id, _ in frames)

    async def after_rows(self) -> None:
        """Tell the replies still owed, those told before, and those of the turns just sent.
        A turn first read after its reply moved on (a model that refuses at once) is told as
        well, though its message frame carries the state: the page may hold the turn already,
        `pending`, from the answer to its own send, and keeps the copy it has."""
        known = [*self.told, *self.shown]
        just_shown = set(self.shown)
        self.shown.clear()
        replies = await database_sync_to_async(selectors.thread_replies)(
            self.actor, thread_id=self.thread_id, known=known
        )
        for reply in replies:
            await self.tell(reply, steps_shown=reply.turn in just_shown)

    async def tell(self, reply: selectors.ReplyView, *, steps_shown: bool = False) -> None:
        """Send what changed in one turn's reply since the socket last told it; its steps too,
        unless its message frame just carried them (`steps_shown`)."""
        if reply.turn > self.last_id:
            return  # its message has not been sent yet: that frame comes first
        if reply.result is not None and reply.result > self.last_id:
            return  # answered: the RESULT's own frame comes first, at the next read
        # A turn read again for its RESULT (a socket back after its steps were made) is told
        # the steps it missed; one whose message frame was just sent carried them.
        if not steps_shown:
            for step in self.untold_steps(reply):
                await self.send(
                    text_data=json.dumps(
                        {"type": "reply.step", "in_reply_to": reply.turn, "step": step}
                    )
                )
        retry_at = shapes.time_text(reply.retry_at)
        state = (reply.state, retry_at, reply.failure)
        told_state, told_draft = self.told.get(reply.turn, (("pending", None, ""), ""))
        if state != told_state:
            await self.send(
                text_data=json.dumps(
                    {
                        "type": "reply.state",
                        "in_reply_to": reply.turn,
                        "state": reply.state,
                        "retry_at": retry_at,
                        "failure": reply.failure or None,
                        # A stopped turn says what its reply had written (the message shape's
                        # `partial`), so the page keeps it without a read.
                        **(
                            {"partial": reply.draft or None}
                            if reply.state == ReplyState.STOPPED
                            else {}
                        ),
                    }
                )
            )
        draft = reply.draft if reply.state == ReplyState.WORKING else ""
        if draft and draft != told_draft:
            await self.send(
                text_data=json.dumps(
                    {"type": "reply.draft", "in_reply_to": reply.turn, "text": draft}
                )
            )
        if reply.state in OWED:
            self.told[reply.turn] = (state, draft)
        else:
            self.told.pop(reply.turn, None)
            self.told_steps.pop(reply.turn, None)

    def untold_steps(self, reply: selectors.ReplyView) -> list[dict[str, Any]]:
        """SPEC §7.2: the turn's steps this socket has not told yet — each stored one, and the
        call running now (told again once it is stored, with its outcome)."""
        steps: list[dict[str, Any]] = [shapes.StepOut(step).data for step in reply.steps]
        stored = {step["call_id"] for step in steps}
        if reply.calling and reply.state == ReplyState.WORKING:
            running = shapes.running_step(reply.turn, reply.calling)
            if running["call_id"] not in stored:
                steps.append(running)
        told = self.told_steps.setdefault(reply.turn, set())
        untold = [step for step in steps if (step["call_id"], step["outcome"]) not in told]
        told.update((step["call_id"], step["outcome"]) for step in untold)
        return untold
