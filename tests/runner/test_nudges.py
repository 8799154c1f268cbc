"""A stored turn wakes runners at once instead of at their next poll (SPEC §7; P5)."""

from __future__ import annotations

import threading
import time

import pytest

from broker import actions, events
from broker.actors import Actor
from broker.models import Message
from runner.nudges import LayerNudges
from tests.broker import factories
from tests.support.waits import wait_for


@pytest.mark.django_db(transaction=True)
def test_turn_stored_in_this_process_wakes_an_idle_runner_at_once(human: Actor, start_runner):
    """An idle runner polling once a minute still answers within seconds."""
    thread = factories.thread(human, factories.project(human), "prompt")
    runner = start_runner(poll_interval=60)
    # Past the runner's first look for work: it now waits on its poll.
    wait_for(lambda: runner.looks >= 1, what="the runner's first look for work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="hello").message
    wait_for(
        lambda: Message.objects.filter(in_reply_to=turn, message_class="RESULT").exists(),
        timeout=5,
    )


def test_stopped_runner_is_woken_here_no_more() -> None:
    woken: list[int] = []
    stop = events.wake_runners_here(lambda: woken.append(1))
    events._wake_runners()
    stop()
    events._wake_runners()
    assert woken == [1]


def test_nudges_listen_only_where_the_layer_reaches_other_processes(settings) -> None:
    """An in-memory layer reaches no other process: nothing to listen to."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "mosaic.layers.InMemoryChannelLayer"}}
    assert LayerNudges(lambda: None).start() is False


@pytest.mark.redis
def test_nudge_through_the_shared_layer_wakes_the_runner() -> None:
    """A turn stored by another process reaches this runner through the `runs` group."""
    woken = threading.Event()
    nudges = LayerNudges(woken.set)
    assert nudges.start() is True
    try:
        # The listener joins the group on its own thread; nudge until it has.
        deadline = time.monotonic() + 10
        while not woken.is_set() and time.monotonic() < deadline:
            events._wake_runners()  # what a turn's commit calls, as in another process
            woken.wait(0.2)
        assert woken.is_set()
    finally:
        nudges.stop(timeout=5)


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_nudges_beside_live_sockets_leave_the_sockets_their_layer(tester: Actor) -> None:
    """In the one-process run the runner listens beside the server's consumers. One layer
    instance receives on one event loop only, so the runner listens on a layer of its own and
    the sockets still get their rows."""
    import json

    from asgiref.sync import async_to_sync, sync_to_async

    from tests.chat.test_consumers import socket
    from tests.support.listeners import TESTER

    thread = factories.thread(tester, factories.project(tester), "beside the runner")
    woken = threading.Event()
    nudges = LayerNudges(woken.set)
    assert nudges.start() is True
    try:
        deadline = time.monotonic() + 10
        while not woken.is_set() and time.monotonic() < deadline:
            events._wake_runners()  # the runner is receiving on its loop from here on
            woken.wait(0.2)
        assert woken.is_set()

        async def scenario() -> str:
            communicator = socket(TESTER, "/ws/trail/")
            assert (await communicator.connect())[0]
            await sync_to_async(actions.send_to_thread)(tester, thread_id=thread.pk, body="hi")
            frame = json.loads(await communicator.receive_from(timeout=5))
            await communicator.disconnect()
            return frame["row"]["text"]

        assert async_to_sync(scenario)() == "tester to assistant: hi"
    finally:
        nudges.stop(timeout=5)
