"""A turn's tool calls, live on the thread socket (SPEC §7.2): `reply.step` when a call starts
and again when it ends; a socket that reads the turn later gets its steps in the message shape.
The owner check on the socket is the thread's (R1), tested with the socket itself."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from broker import actions, steps, tools
from broker.actors import Actor
from broker.models import Business
from broker.steps import ToolCall
from tests.broker import factories
from tests.chat.test_consumers import frames, socket
from tests.chat.test_reply_frames import quiet
from tests.support.listeners import TESTER

pytestmark = pytest.mark.django_db(transaction=True)

BOOK = ToolCall(call_id="call-1", round=1, name="create_task", arguments='{"title": "book"}')


@pytest.fixture
def world(business: Business) -> dict[str, Any]:
    tester = Actor.tester(business_id=business.pk)
    run = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-1")
    thread = factories.thread(tester, factories.project(tester), "t")
    return {"tester": tester, "run": run, "thread": thread}


def test_owner_socket_sees_the_call_start_then_end(world) -> None:
    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="book it").message
    toolbox = tools.read_toolbox(business_id=run.business_id, instance=run.role)

    async def scenario() -> list[dict[str, Any]]:
        chat = socket(TESTER, f"/ws/chat/threads/{thread.pk}/")
        assert (await chat.connect())[0]
        got = await frames(chat, 1)  # the turn
        claim = await sync_to_async(factories.claim)(run, thread)
        await sync_to_async(actions.start_turn)(run, claim_id=claim.pk, turn_id=turn.pk)
        got += await frames(chat, 1)  # working
        await sync_to_async(steps.begin_step)(run, claim_id=claim.pk, turn_id=turn.pk, call=BOOK)
        got += await frames(chat, 1)
        await sync_to_async(steps.call_tool)(
            run, claim_id=claim.pk, turn_id=turn.pk, call=BOOK, toolbox=toolbox
        )
        got += await frames(chat, 1)
        assert await quiet(chat)
        await chat.disconnect()
        return got

    got = async_to_sync(scenario)()
    started, ended = got[2], got[3]
    assert (started["type"], started["in_reply_to"]) == ("reply.step", turn.pk)
    assert started["step"]["outcome"] is None and started["step"]["id"] is None
    assert (started["step"]["call_id"], started["step"]["tool"]) == ("call-1", "create_task")
    assert started["step"]["arguments"] == {"title": "book"}
    assert started["step"]["started_at"].endswith("Z")
    assert ended["type"] == "reply.step" and ended["step"]["call_id"] == "call-1"
    assert (ended["step"]["outcome"], ended["step"]["code"]) == ("refused", "invalid")
    assert ended["step"]["result"]["detail"] == actions.TESTER_TASK_REFUSED
    assert ended["step"]["id"] is not None and ended["step"]["ended_at"] is not None


def test_a_socket_opened_later_gets_the_steps_with_the_turn(world) -> None:
    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="book it").message
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    toolbox = tools.read_toolbox(business_id=run.business_id, instance=run.role)
    steps.call_tool(run, claim_id=claim.pk, turn_id=turn.pk, call=BOOK, toolbox=toolbox)

    async def scenario() -> list[dict[str, Any]]:
        chat = socket(TESTER, f"/ws/chat/threads/{thread.pk}/")
        assert (await chat.connect())[0]
        got = await frames(chat, 1)
        await chat.disconnect()
        return got

    (frame,) = async_to_sync(scenario)()
    assert frame["type"] == "message" and frame["message"]["id"] == turn.pk
    [step] = frame["message"]["steps"]
    assert (step["call_id"], step["outcome"], step["turn"]) == ("call-1", "refused", turn.pk)


def test_a_socket_back_after_the_reply_is_told_the_steps_it_missed(world) -> None:
    """A page that held the turn, away while the call was made and the reply landed, comes
    back after its last id: the RESULT's read tells it the turn's steps and its end."""
    tester, run, thread = world["tester"], world["run"], world["thread"]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="book it").message
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    toolbox = tools.read_toolbox(business_id=run.business_id, instance=run.role)
    steps.call_tool(run, claim_id=claim.pk, turn_id=turn.pk, call=BOOK, toolbox=toolbox)
    reply = actions.send_message(
        run,
        to="tester",
        message_class="RESULT",
        in_reply_to=turn.pk,
        claim_id=claim.pk,
        body="Not booked: a test.",
    )

    async def scenario() -> list[dict[str, Any]]:
        chat = socket(TESTER, f"/ws/chat/threads/{thread.pk}/?after={turn.pk}")
        assert (await chat.connect())[0]
        got = await frames(chat, 3)
        assert await quiet(chat)
        await chat.disconnect()
        return got

    got = async_to_sync(scenario)()
    assert got[0]["type"] == "message" and got[0]["message"]["id"] == reply.pk
    told = {frame["type"]: frame for frame in got[1:]}
    assert told["reply.step"]["in_reply_to"] == turn.pk
    assert told["reply.step"]["step"]["outcome"] == "refused"
    assert (told["reply.state"]["in_reply_to"], told["reply.state"]["state"]) == (
        turn.pk,
        "answered",
    )
