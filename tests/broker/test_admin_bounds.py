"""Admin pages bounded by design at a million rows — a thread's page shows the newest
rows of each kind and links to the rest, and no list counts a whole table."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib import admin
from django.db import connection
from django.db.models import Model
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from broker import actions, admin_bounds
from broker.actors import Actor
from broker.admin import ReadOnlyAdmin
from broker.models import (
    Business,
    ClaimEnd,
    Instance,
    Message,
    ReplyState,
    Thread,
    ThreadClaim,
    ThreadOpen,
    TrailRow,
    TurnProgress,
)
from tests.broker import factories
from tests.broker.test_admin import add_messages
from tests.support.marks import postgres_only

# The record's tables: each grows with the traffic, to millions of rows.
BIG_TABLES = [Message, TrailRow, TurnProgress, ThreadClaim, ThreadOpen]


def changelist(model: type[Model]) -> str:
    return reverse(f"admin:broker_{model._meta.model_name}_changelist")


def add_rows(model: type[Model], thread: Thread, count: int) -> None:
    """`count` rows of `model` in `thread`, inserted in bulk (the guards refuse only rewrites)."""
    business = thread.project.business
    if model is Message:
        add_messages(business, thread, count=count)
    elif model is ThreadOpen:
        ThreadOpen.objects.bulk_create(ThreadOpen(thread=thread, by="ada") for _ in range(count))
    elif model is ThreadClaim:
        now = timezone.now()
        instance = Instance.objects.get(business=business, name="assistant")
        ThreadClaim.objects.bulk_create(
            ThreadClaim(
                thread=thread,
                run=f"run-{n}",
                instance=instance,
                lease_expires_at=now,
                ended_at=now,
                ended_how=ClaimEnd.DONE,
            )
            for n in range(count)
        )
    else:
        raise AssertionError(model)


@pytest.fixture
def thread(business: Business, human: Actor) -> Thread:
    return factories.thread(human, factories.project(human), "busy")


def inline_ids(admin_client: Client, thread: Thread, model: type[Model]) -> tuple[list[int], str]:
    """The ids a thread's page shows of `model`, in their order, and the page."""
    response = admin_client.get(reverse("admin:broker_thread_change", args=[thread.pk]))
    assert response.status_code == 200
    (formset,) = [
        f.formset for f in response.context["inline_admin_formsets"] if f.opts.model is model
    ]
    return [form.instance.pk for form in formset.forms], response.content.decode()


@pytest.mark.parametrize("model", [Message, ThreadOpen, ThreadClaim], ids=lambda m: m.__name__)
def test_thread_page_shows_newest_rows_and_links_to_all(
    admin_client: Client, thread: Thread, model: type[Model]
) -> None:
    """A thread's page shows its newest INLINE_ROWS rows of each kind, oldest first, and links
    to the thread's rows in their own list, where the rest are."""
    add_rows(model, thread, admin_bounds.INLINE_ROWS + 10)
    rows = model._default_manager.filter(thread=thread).order_by("pk")
    newest = list(rows.values_list("pk", flat=True))[-admin_bounds.INLINE_ROWS :]

    shown, page = inline_ids(admin_client, thread, model)

    assert shown == newest
    total = rows.count()
    plural = model._meta.verbose_name_plural
    link = f'<a href="{changelist(model)}?thread__id__exact={thread.pk}">all {total} {plural}</a>'
    assert f"The newest {admin_bounds.INLINE_ROWS} of {total}: {link}" in page


def test_thread_page_with_few_rows_shows_them_all_without_a_link(
    admin_client: Client, thread: Thread
) -> None:
    add_rows(Message, thread, 3)
    shown, page = inline_ids(admin_client, thread, Message)
    assert len(shown) == 3
    assert "The newest" not in page


def grow(model: type[Model], thread: Thread, count: int) -> None:
    if model in (Message, ThreadOpen, ThreadClaim):
        add_rows(model, thread, count)
    elif model is TrailRow:
        human = Actor.human(business_id=thread.project.business_id, username="ada")
        for n in range(count):
            actions.send_to_thread(human, thread_id=thread.pk, body=f"turn {n}")
    else:
        add_rows(Message, thread, count)
        TurnProgress.objects.bulk_create(
            TurnProgress(message=message, thread=thread, state=ReplyState.WORKING)
            for message in Message.objects.filter(thread=thread, progress__isnull=True)
        )


def unbounded_counts(queries: list[dict[str, Any]]) -> list[str]:
    return [q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "LIMIT" not in q["sql"]]


@pytest.mark.parametrize(
    "query",
    [{}, {"q": "SEARCH"}, {"thread__id__exact": "THREAD"}],
    ids=["whole-list", "search", "one-thread"],
)
@pytest.mark.parametrize("model", BIG_TABLES, ids=lambda m: m.__name__)
def test_admin_list_counts_no_further_than_the_cap(
    admin_client: Client,
    thread: Thread,
    monkeypatch: pytest.MonkeyPatch,
    model: type[Model],
    query: dict[str, str],
) -> None:
    """No list runs a `COUNT(*)` without a LIMIT: its count stops past COUNT_CAP, shown as
    "N+", and the table's own total is never asked for."""
    monkeypatch.setattr(admin_bounds, "COUNT_CAP", 5)
    grow(model, thread, 8)
    # A word each list's search finds in every row grown: a body, or the thread's name.
    word = "turn" if model in (Message, TrailRow) else "busy"
    values = {"THREAD": str(thread.pk), "SEARCH": word}
    params = {key: values[value] for key, value in query.items()}

    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(changelist(model), params)

    assert response.status_code == 200
    assert unbounded_counts(captured.captured_queries) == []
    assert response.context["cl"].result_count == 6
    assert "5+ " in response.content.decode()


def test_admin_lists_are_pages_of_fifty_without_date_hierarchy_on_big_tables() -> None:
    """Every broker list pages by LIST_ROWS (or fewer) with the capped count; the record's
    tables and the threads have no date hierarchy, whose first read is a DISTINCT over the
    whole table (on SQLite, a Python function per row: 1.4 s for 20,000 threads)."""
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "broker":
            continue
        assert isinstance(model_admin, ReadOnlyAdmin), model
        assert model_admin.paginator is admin_bounds.CappedCountPaginator, model
        assert model_admin.show_full_result_count is False, model
    for model in [*BIG_TABLES, Thread]:
        assert admin.site.get_model_admin(model).date_hierarchy is None, model


@postgres_only
@pytest.mark.parametrize(
    ("model", "column", "index"),
    [(Message, "body", "message_body_search"), (TrailRow, "text", "trail_text_search")],
    ids=["message-body", "trail-text"],
)
def test_text_search_reads_its_trigram_index_on_postgresql(
    db: None, model: type[Model], column: str, index: str
) -> None:
    """The admin's search and the Console's message-text search ask `icontains`; on PostgreSQL
    the trigram index on that very expression serves it (a few test rows would be read whole,
    so the plan is asked with sequential scans off: the index must be usable, not merely
    present)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    plan = model._default_manager.filter(**{f"{column}__icontains": "summary"}).explain()
    assert index in plan
