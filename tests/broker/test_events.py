"""Pushes leave only after commit, as nudges naming ids (STYLE §8, SPEC §6)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from broker import actions, events
from broker.actors import Actor
from broker.models import TrailKind, TrailRow
from broker.refusals import Refusal
from tests.broker import factories
from tests.support.marks import postgres_only


@pytest.fixture
def layer():
    channel_layer = get_channel_layer()
    yield channel_layer
    # Each loop closes its own connections; flushing closes those of the loop it runs on.
    events.close_own_loop()
    async_to_sync(channel_layer.flush)()


def listen(layer, group: str) -> str:
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group, channel)
    return channel


def test_thread_send_nudges_trail_and_thread_after_commit(
    human: Actor, layer, django_capture_on_commit_callbacks
) -> None:
    thread = factories.thread(human, factories.project(human), "t")
    trail = listen(layer, events.trail_group(human.business_id))
    thread_channel = listen(layer, events.thread_group(thread.pk))
    woken: list[int] = []
    stop_waking = events.wake_runners_here(lambda: woken.append(1))
    with django_capture_on_commit_callbacks(execute=False) as pending:
        turn = actions.send_to_thread(human, thread_id=thread.pk, body="hi")
    # Nothing was pushed inside the transaction: the callbacks wait for the commit.
    assert len(pending) == 3
    for callback in pending:
        callback()
    row = TrailRow.objects.get(message=turn.message)
    # Each nudge names its group: one channel of each process follows many (`chat.fan_out`).
    assert async_to_sync(layer.receive)(trail) == {
        "type": "trail.nudge",
        "id": row.pk,
        "group": events.trail_group(human.business_id),
    }
    assert async_to_sync(layer.receive)(thread_channel) == {
        "type": "thread.nudge",
        "id": turn.message.pk,
        "group": events.thread_group(thread.pk),
    }
    # A turn waits: this process's runners are woken (others hear through a shared layer).
    stop_waking()
    assert woken == [1]


def test_refused_write_pushes_nothing(
    human: Actor, tester: Actor, django_capture_on_commit_callbacks
) -> None:
    thread = factories.thread(human, factories.project(human), "t")
    with django_capture_on_commit_callbacks() as pending, pytest.raises(Refusal):
        actions.send_to_thread(tester, thread_id=thread.pk, body="hi")
    assert pending == []


def test_rolled_back_write_pushes_nothing(human: Actor, django_capture_on_commit_callbacks) -> None:
    thread = factories.thread(human, factories.project(human), "t")
    with django_capture_on_commit_callbacks() as pending:
        try:
            with transaction.atomic():
                actions.send_to_thread(human, thread_id=thread.pk, body="hi")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
    assert pending == []


def test_trail_row_outside_the_stream_lock_is_refused(human: Actor) -> None:
    """Rows commit in id order only under the business's stream lock: a writer that stores a
    trail row without `appending` fails at once, on every database."""
    from django.db import transaction

    def record(text: str) -> object:
        return actions.do_record_trail(
            human,
            business_id=human.business_id,
            thread=None,
            message=None,
            to_role="assistant",
            text=text,
            kind=TrailKind.MESSAGE,
        )

    with pytest.raises(RuntimeError), transaction.atomic():
        record("unlocked")
    with actions.appending(human.business_id):
        row = record("locked")
    assert TrailRow.objects.filter(pk=row.pk, text__endswith="locked").exists()
    assert not TrailRow.objects.filter(text__endswith="unlocked").exists()


def test_pushes_from_a_thread_reach_the_layer_in_commit_order_with_one_wake_of_the_loop(
    monkeypatch,
) -> None:
    """A committing thread hands its pushes to the server's loop and goes on; pushes committed
    while a hand-over is on its way join it, so a turn's pushes wake the loop once, and the
    layer sees every push in the order it was committed."""
    import asyncio
    import threading

    sent: list[tuple[str, int]] = []
    all_sent = threading.Event()

    class Layer:
        async def group_send(self, group: str, message: dict) -> None:
            await asyncio.sleep(0)
            sent.append((group, message["id"]))
            if len(sent) == 3:
                all_sent.set()

    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    busy, wakes = threading.Event(), []
    real_wake = loop.call_soon_threadsafe
    try:
        # The loop is busy while one commit's callbacks run back to back.
        real_wake(busy.wait, 5)
        monkeypatch.setattr(
            loop, "call_soon_threadsafe", lambda *args: (wakes.append(args), real_wake(*args))
        )
        monkeypatch.setattr(events, "_server_loop", loop)
        layer = Layer()
        for group, row_id in (("a", 1), ("b", 2), ("a", 3)):
            events._send(group, {"id": row_id}, layer=layer)
        busy.set()
        assert all_sent.wait(5)
    finally:
        busy.set()
        real_wake(loop.stop)
        runner.join(5)
        loop.close()
    assert sent == [("a", 1), ("b", 2), ("a", 3)]
    assert len(wakes) == 1


def test_pushes_where_no_loop_serves_go_out_on_one_loop_in_commit_order() -> None:
    """A runner or a command has no serving loop: every push it commits is sent on one loop of
    its own, kept for the next push (a loop per push reconnected to Redis each time), before
    the committing call returns, in commit order, whichever thread commits (SPEC §11: the
    database is the record, a push the nudge that follows its commit)."""
    import asyncio
    import threading

    sent: list[tuple[str, int]] = []
    loops: set[asyncio.AbstractEventLoop] = set()

    class Layer:
        async def group_send(self, group: str, message: dict) -> None:
            loops.add(asyncio.get_running_loop())
            await asyncio.sleep(0)
            sent.append((group, message["id"]))

    layer = Layer()
    events._send("a", {"id": 1}, layer=layer)
    assert sent == [("a", 1)]
    committer = threading.Thread(
        target=events._send, args=("b", {"id": 2}), kwargs={"layer": layer}
    )
    committer.start()
    committer.join(5)
    events._send("a", {"id": 3}, layer=layer)
    assert sent == [("a", 1), ("b", 2), ("a", 3)]
    assert len(loops) == 1

    events.close_own_loop()
    (closed,) = loops
    assert closed.is_closed()
    events._send("c", {"id": 4}, layer=layer)
    assert sent[-1] == ("c", 4) and len(loops) == 2


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_turn_on_postgresql_waits_for_its_business_stream_lock(tester: Actor) -> None:
    """SPEC §6, rows in id order: the stream lock rides in the turn's thread read (one round
    trip fewer), and is still taken: while another transaction holds the business's lock, the
    turn waits for it."""
    import threading

    import psycopg
    from django.db import connection

    from broker.access import TAKE_STREAM_LOCK, stream_lock_key

    thread = factories.thread(tester, factories.project(tester), "t")
    settings = connection.settings_dict
    holder = psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        host=settings["HOST"],
        port=settings["PORT"] or 5432,
    )
    sent = threading.Event()

    def send() -> None:
        try:
            actions.send_to_thread(tester, thread_id=thread.pk, body="after the lock")
            sent.set()
        finally:
            connection.close()

    try:
        holder.execute(f"SELECT {TAKE_STREAM_LOCK}", stream_lock_key(tester.business_id))
        sender = threading.Thread(target=send)
        sender.start()
        assert not sent.wait(0.5), "the turn did not wait for the stream lock"
        holder.rollback()
        assert sent.wait(5)
        sender.join(5)
    finally:
        holder.close()
