"""A message, its trail row and its thread's `active_at` are stored in one statement on
PostgreSQL and in three elsewhere (`broker.actions.streams.do_store_message`). Both ways store
the same rows and meet the same guards: shown here on PostgreSQL, where both can run, by
recording the same messages each way."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext
from psycopg.pq import TransactionStatus

from broker import guards
from broker.actions import streams
from broker.actors import Actor
from broker.models import Message, MessageClass, Thread, TrailKind, TrailRow, Via
from tests.broker import factories
from tests.support.marks import postgres_only

WAYS = {"one statement": True, "three statements": False}
# What differs between two stores of the same message: ids and times.
OWN = ("id", "message", "created_at", "at")
ROWS = ("message", "trail")


@pytest.fixture
def store_each_way(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], None]:
    """Makes every following message store the given way."""
    original = streams.do_store_message

    def choose(one_statement: bool) -> None:
        monkeypatch.setattr(
            streams, "do_store_message", partial(original, one_statement=one_statement)
        )

    return choose


def record(actor: Actor, thread: Thread, **fields: Any) -> Message:
    """A message of the actor's in its thread, recorded as a turn records it."""
    with streams.appending_to_thread(actor, thread_id=thread.pk) as locked:
        return streams.do_record_message(
            actor,
            thread=locked,
            holder="",
            via=Via.API,
            **{
                "message_class": MessageClass.REQUEST,
                "to_role": "assistant",
                "body": "the same words",
                **fields,
            },
        )


def stored(message: Message) -> dict[str, Any]:
    """The message's row, its trail row and its thread's last activity, as stored."""
    row = Message.objects.get(pk=message.pk)
    trail = TrailRow.objects.get(message=row)
    thread = Thread.objects.get(pk=row.thread_id)
    return {
        "message": {k: v for k, v in model_to_dict(row).items() if k not in OWN},
        "trail": {k: v for k, v in model_to_dict(trail).items() if k not in OWN},
        "trail names its message": trail.message_id == row.pk,
        "trail row no older than its message": trail.at >= row.created_at,
        "thread active at the message's time": thread.active_at == row.created_at,
        "the instance as returned": model_to_dict(message) == model_to_dict(row),
    }


@postgres_only
@pytest.mark.django_db
def test_both_ways_store_the_same_message_trail_row_and_thread_activity(
    tester: Actor, store_each_way: Callable[[bool], None]
) -> None:
    thread = factories.thread(tester, factories.project(tester), "t")
    results = {}
    for way, one_statement in WAYS.items():
        store_each_way(one_statement)
        results[way] = stored(record(tester, thread))
    assert results["one statement"] == results["three statements"]
    checks = {name: value for name, value in results["one statement"].items() if name not in ROWS}
    assert all(checks.values()), checks


@postgres_only
@pytest.mark.django_db
@pytest.mark.parametrize("way", WAYS)
def test_both_ways_meet_the_message_guard_and_store_nothing_when_refused(
    tester: Actor, store_each_way: Callable[[bool], None], way: str
) -> None:
    """SPEC §3: a thread's message has the thread's instance at one end; the trigger that holds
    it fires in the one statement as it does alone, and nothing of the statement remains."""
    thread = factories.thread(tester, factories.project(tester), "t")
    store_each_way(WAYS[way])
    before = Thread.objects.get(pk=thread.pk).active_at
    with pytest.raises(IntegrityError, match=re.escape(guards.MESSAGE_INSTANCE_REFUSED)):
        record(tester, thread, to_role="nobody")
    assert not Message.objects.exists()
    assert not TrailRow.objects.filter(kind="message").exists()
    assert Thread.objects.get(pk=thread.pk).active_at == before


# --- A turn's COMMIT in its store's round trip ----------------------------------------------


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_last_writes_commit_rides_on_its_store_and_keeps_the_same_rows(tester: Actor) -> None:
    """`last_write`: on PostgreSQL the one statement carries the transaction's COMMIT, so the
    stream lock is let go a round trip sooner; the rows are those of the plain store."""
    thread = factories.thread(tester, factories.project(tester), "t")
    plain = stored(record(tester, thread))
    with CaptureQueriesContext(connection) as seen:
        riding = stored(record(tester, thread, last_write=True))
    store = next(q["sql"] for q in seen.captured_queries if "INSERT" in q["sql"])
    assert store.endswith("; COMMIT")
    assert riding == plain
    assert connection.connection.info.transaction_status == TransactionStatus.IDLE


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_last_write_in_an_outer_block_leaves_the_commit_to_it(tester: Actor) -> None:
    """Nested in another atomic block, the store is not the transaction's last word: the outer
    block commits, and rolls back everything when it fails."""
    thread = factories.thread(tester, factories.project(tester), "t")
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        record(tester, thread, last_write=True)
        1 / 0  # noqa: B018
    assert not Message.objects.exists()
    assert not TrailRow.objects.filter(kind="message").exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_refused_last_write_commits_nothing(tester: Actor) -> None:
    """SPEC §3's guard fires before the COMMIT that rides behind it: nothing remains, and the
    connection serves the next turn."""
    thread = factories.thread(tester, factories.project(tester), "t")
    with pytest.raises(IntegrityError, match=re.escape(guards.MESSAGE_INSTANCE_REFUSED)):
        record(tester, thread, to_role="nobody", last_write=True)
    assert not Message.objects.exists()
    assert not TrailRow.objects.filter(kind="message").exists()
    assert stored(record(tester, thread, last_write=True))["trail names its message"]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_trail_row_after_a_last_write_is_refused(tester: Actor) -> None:
    """Past the COMMIT the stream lock is gone: a row stored then could commit out of id
    order, and a reader resuming after the last id it saw (SPEC §6) would skip it for good, so
    it raises rather than be stored."""
    thread = factories.thread(tester, factories.project(tester), "t")
    with streams.appending_to_thread(tester, thread_id=thread.pk) as locked:
        streams.do_record_message(
            tester,
            thread=locked,
            to_role="assistant",
            message_class=MessageClass.REQUEST,
            body="the last word",
            holder="",
            via=Via.API,
            last_write=True,
        )
        with pytest.raises(RuntimeError, match="only inside appending"):
            streams.do_record_trail(
                tester,
                business_id=tester.business_id,
                thread=locked,
                message=None,
                to_role="assistant",
                text="too late",
                kind=TrailKind.THREAD_RENAMED,
            )
    assert TrailRow.objects.filter(kind="message").count() == 1


@pytest.mark.django_db
def test_a_result_is_never_a_last_write(tester: Actor) -> None:
    """A RESULT moves the turn it answers after it is stored."""
    thread = factories.thread(tester, factories.project(tester), "t")
    with pytest.raises(ValueError, match="never the last write"):
        record(tester, thread, message_class=MessageClass.RESULT, last_write=True)
    assert not Message.objects.exists()
