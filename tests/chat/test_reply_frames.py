"""How a reply is going, live on the thread socket (SPEC §7.1): `reply.state`, `reply.draft`.

A run's writes are made here through the broker's own verbs, step by step, so each frame can be
waited for in order.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator

from broker import actions, selectors
from broker.actors import Actor
from broker.models import Business, Message, MessageClass
from chat.api import shapes
from tests.broker import factories
from tests.chat.test_consumers import frames, socket
from tests.support.listeners import TESTER

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(business: Business, settings) -> dict[str, Any]:
    settings.MOSAIC_DRAFT_INTERVAL = 0.0
    tester = Actor.tester(business_id=business.pk)
    run = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-1")
    thread = factories.thread(tester, factories.project(tester), "t")
    return {"tester": tester, "run": run, "thread": thread}


async def quiet(communicator: WebsocketCommunicator, seconds: float = 0.3) -> bool:
    """True when no frame arrives within `seconds`."""
    return await communicator.receive_nothing(timeout=seconds)


async def only_frames(path: str, count: int) -> list[dict[str, Any]]:
    """The tester's socket at `path`: its first `count` frames, and then no more."""
    chat = socket(TESTER, path)
    assert (await chat.connect())[0]
    got = await frames(chat, count)
    assert await quiet(chat)
    await chat.disconnect()
    return got


def test_owner_socket_sees_working_drafts_then_reply_then_answered(world) -> None:
    """Drafts come before the RESULT, each the whole text so far; the trail gets none."""
    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hello").message

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        chat = socket(TESTER, f"/ws/chat/threads/{thread.pk}/")
        trail = socket(TESTER, "/ws/trail/")
        assert (await chat.connect())[0] and (await trail.connect())[0]
        got = await frames(chat, 1)  # the turn itself, pending
        trail_rows = await frames(trail, 1)
        claim = await sync_to_async(factories.claim)(run, thread)
        await sync_to_async(actions.start_turn)(run, claim_id=claim.pk, turn_id=turn.pk)
        got += await frames(chat, 1)
        for text in ("Hel", "Hello the", "Hello there"):
            await sync_to_async(actions.draft_turn)(
                run, claim_id=claim.pk, turn_id=turn.pk, text=text
            )
            got += await frames(chat, 1)
        await sync_to_async(actions.send_message)(
            run,
            to="tester",
            message_class="RESULT",
            in_reply_to=turn.pk,
            claim_id=claim.pk,
            body="Hello there!",
        )
        got += await frames(chat, 2)
        assert await quiet(chat)
        trail_rows += await frames(trail, 1)  # the reply, and no draft
        assert await quiet(trail)
        await chat.disconnect()
        await trail.disconnect()
        return got, trail_rows

    got, trail_rows = async_to_sync(scenario)()
    assert got[0]["message"]["reply_state"] == "pending"
    assert [(f["type"], f.get("state") or f.get("text")) for f in got[1:5]] == [
        ("reply.state", "working"),
        ("reply.draft", "Hel"),
        ("reply.draft", "Hello the"),
        ("reply.draft", "Hello there"),
    ]
    assert all(f["in_reply_to"] == turn.pk for f in got[1:5])
    result, answered = got[5:]
    assert (result["type"], result["message"]["body"]) == ("message", "Hello there!")
    assert (answered["type"], answered["state"]) == ("reply.state", "answered")
    assert [row["row"]["text"] for row in trail_rows] == [
        "tester to assistant: hello",
        "assistant to tester: Hello there!",
    ]


def test_socket_joining_mid_reply_gets_the_current_draft(world) -> None:
    """A socket that connects while a run writes gets the state and the draft so far at once."""
    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hello").message
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    actions.draft_turn(run, claim_id=claim.pk, turn_id=turn.pk, text="Half a rep")

    # Reconnecting after the turn it already has: no message frame, only the reply's.
    got = async_to_sync(only_frames)(f"/ws/chat/threads/{thread.pk}/?after={turn.pk}", 2)
    assert got == [
        {
            "type": "reply.state",
            "in_reply_to": turn.pk,
            "state": "working",
            "retry_at": None,
            "failure": None,
        },
        {"type": "reply.draft", "in_reply_to": turn.pk, "text": "Half a rep"},
    ]


def test_retrying_and_failed_states_carry_their_sentences(world) -> None:
    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hello").message

    async def scenario() -> list[dict[str, Any]]:
        chat = socket(TESTER, f"/ws/chat/threads/{thread.pk}/?after={turn.pk}")
        assert (await chat.connect())[0]
        assert await quiet(chat)  # pending, as the client knows it already
        claim = await sync_to_async(factories.claim)(run, thread)
        got = []
        for transient in (True, False):
            await sync_to_async(actions.start_turn)(run, claim_id=claim.pk, turn_id=turn.pk)
            got += await frames(chat, 1)
            await sync_to_async(actions.fail_turn)(
                run,
                claim_id=claim.pk,
                turn_id=turn.pk,
                failure="The model server is busy." if transient else "Unknown model.",
                transient=transient,
                retry_after=30,
            )
            got += await frames(chat, 1)
        assert await quiet(chat)
        await chat.disconnect()
        return got

    got = async_to_sync(scenario)()
    states = [f["state"] for f in got]
    assert states == ["working", "retrying", "working", "failed"]
    retrying, failed = got[1], got[3]
    assert retrying["failure"] == "The model server is busy." and retrying["retry_at"]
    assert (failed["failure"], failed["retry_at"]) == ("Unknown model.", None)


def test_a_turn_that_failed_before_the_socket_read_it_is_told_failed(world) -> None:
    """SPEC §7.1: a model that refuses at once can fail the turn before the socket's first read
    of it. The page already holds the turn, `pending`, from the answer to its send, and keeps
    that copy over the message frame's: the socket tells the state too, or the page shows the
    turn pending until it is reloaded."""
    tester, run, thread = world["tester"], world["run"], world["thread"]
    before = actions.send_to_thread(tester, thread_id=thread.pk, body="earlier").message
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hello").message
    claim = factories.claim(run, thread)
    for earlier in (before, turn):
        actions.start_turn(run, claim_id=claim.pk, turn_id=earlier.pk)
        actions.fail_turn(
            run,
            claim_id=claim.pk,
            turn_id=earlier.pk,
            failure="Unknown model.",
            transient=False,
        )

    # The page read the thread up to `before`, then sent `turn`.
    path = f"/ws/chat/threads/{thread.pk}/?after={before.pk}"
    message, told = async_to_sync(only_frames)(path, 2)
    assert (message["type"], message["message"]["id"]) == ("message", turn.pk)
    assert message["message"]["reply_state"] == "failed"
    assert told == {
        "type": "reply.state",
        "in_reply_to": turn.pk,
        "state": "failed",
        "retry_at": None,
        "failure": "Unknown model.",
    }


def test_drafts_of_a_tester_thread_never_reach_the_humans_sockets(
    world, business: Business
) -> None:
    """R1, R20: drafts go to the thread's owner only; the human's trail shows no draft."""
    from tests.chat.test_consumers import sign_in
    from tests.support.listeners import HUMAN

    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hello").message
    cookies = sign_in()

    async def scenario() -> tuple[bool, list[dict[str, Any]]]:
        refused = socket(HUMAN, f"/ws/chat/threads/{thread.pk}/", cookies=cookies)
        connected, _ = await refused.connect()
        trail = socket(HUMAN, "/ws/trail/", cookies=cookies)
        assert (await trail.connect())[0]
        rows = await frames(trail, 1)
        claim = await sync_to_async(factories.claim)(run, thread)
        await sync_to_async(actions.start_turn)(run, claim_id=claim.pk, turn_id=turn.pk)
        await sync_to_async(actions.draft_turn)(
            run, claim_id=claim.pk, turn_id=turn.pk, text="secret draft"
        )
        await asyncio.sleep(0.2)
        while not await quiet(trail):
            rows += [json.loads(await trail.receive_from())]
        await trail.disconnect()
        return connected, rows

    connected, rows = async_to_sync(scenario)()
    assert not connected
    assert all("secret draft" not in json.dumps(row) for row in rows)


def test_stop_mid_reply_keeps_partial_in_state_frame_and_message_shape(world) -> None:
    """SPEC §7.1: a stopped turn keeps what its reply had written — the `stopped` frame and
    the message shape carry it as `partial` — and no RESULT exists for it; a turn stopped
    before any text has `partial` null, as has every other turn."""
    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="hello").message
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    actions.draft_turn(run, claim_id=claim.pk, turn_id=turn.pk, text="Half a rep")

    async def scenario() -> list[dict[str, Any]]:
        chat = socket(TESTER, f"/ws/chat/threads/{thread.pk}/?after={turn.pk}")
        assert (await chat.connect())[0]
        got = await frames(chat, 2)  # working, and the draft so far
        await sync_to_async(actions.stop_assistant)(tester, thread_id=thread.pk)
        got += await frames(chat, 1)
        assert await quiet(chat)
        await chat.disconnect()
        return got

    got = async_to_sync(scenario)()
    assert got[2] == {
        "type": "reply.state",
        "in_reply_to": turn.pk,
        "state": "stopped",
        "retry_at": None,
        "failure": None,
        "partial": "Half a rep",
    }
    waiting = actions.send_to_thread(tester, thread_id=thread.pk, body="again").message
    actions.stop_assistant(tester, thread_id=thread.pk)
    shown = {
        m.pk: shapes.MessageOut(m).data
        for m in selectors.thread_messages(tester, thread_id=thread.pk)
    }
    assert [(m["reply_state"], m["partial"]) for m in shown.values()] == [
        ("stopped", "Half a rep"),
        ("stopped", None),
    ]
    assert shown[waiting.pk]["partial"] is None
    assert not Message.objects.filter(message_class=MessageClass.RESULT).exists()
