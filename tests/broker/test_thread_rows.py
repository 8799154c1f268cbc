"""A thread's rows are asked for in the shape its (thread, id) index serves.

Written as `thread_id = X ORDER BY id`, PostgreSQL may walk the primary key through every newer
row of the table (78 ms against 0.1 ms at 100,000 messages, P8). Each read of one thread's
newest rows asks for the thread as a one-value range, ordered by (thread, id)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from broker import actions, selectors
from broker.actors import Actor
from broker.models import Message, Thread, TrailRow
from tests.broker import factories


@pytest.fixture
def thread(human: Actor) -> Thread:
    thread = factories.thread(human, factories.project(human), "busy")
    for n in range(3):
        actions.send_to_thread(human, thread_id=thread.pk, body=f"turn {n}")
    return thread


def reads_by_thread_index(sql: str, table: str) -> bool:
    """A read of `table` (or its alias in a subquery) narrowed to one thread by a range and
    ordered by (thread, id)."""
    name = rf'(?:"{table}"|U\d+)'
    narrowed = re.search(rf'{name}\."thread_id" >= \S+ AND {name}\."thread_id" <= \S+', sql)
    # The id by name, or by its place among the columns (a subquery selecting only it).
    ordered = re.search(rf'ORDER BY {name}\."thread_id" (DESC|ASC), (?:{name}\."id"|1 )', sql)
    return bool(narrowed and ordered)


@pytest.mark.parametrize("cursor", [{}, {"after": 0}, {"before": 10**9}], ids=str)
def test_console_message_page_reads_the_thread_index(
    human: Actor, thread: Thread, cursor: dict[str, int]
) -> None:
    with CaptureQueriesContext(connection) as captured:
        rows = selectors.thread_messages(human, thread_id=thread.pk, **cursor)
    assert [m.body for m in rows] == ["turn 0", "turn 1", "turn 2"]
    messages = Message._meta.db_table
    assert any(reads_by_thread_index(q["sql"], messages) for q in captured.captured_queries)


@pytest.mark.parametrize("model", [Message, TrailRow], ids=lambda m: m.__name__)
def test_admin_one_thread_list_reads_the_thread_index(
    admin_client: Client, thread: Thread, model: type[Message] | type[TrailRow]
) -> None:
    url = reverse(f"admin:broker_{model._meta.model_name}_changelist")
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(url, {"thread__id__exact": thread.pk})
    shown = [row.pk for row in response.context["cl"].result_list]
    assert shown == list(
        model._default_manager.filter(thread=thread).order_by("-pk").values_list("pk", flat=True)
    )
    table = model._meta.db_table
    assert any(reads_by_thread_index(q["sql"], table) for q in captured.captured_queries)


def test_admin_thread_page_reads_the_newest_by_the_thread_index(
    admin_client: Client, thread: Thread
) -> None:
    with CaptureQueriesContext(connection) as captured:
        admin_client.get(reverse("admin:broker_thread_change", args=[thread.pk]))
    messages = Message._meta.db_table
    assert any(reads_by_thread_index(q["sql"], messages) for q in captured.captured_queries)
