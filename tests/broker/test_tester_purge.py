"""The tester-data purge deletes old tester threads with everything of theirs, and old
suite runs, and never a row of the human's; the append-only guards and those of threads and
tasks still refuse every other delete, a permit or not."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

from broker import actions
from broker.actions import suite_runs, tester_purge
from broker.actors import Actor
from broker.models import (
    TESTER,
    Message,
    MessageClass,
    PurgePermit,
    SuiteRun,
    SuiteVerdict,
    Task,
    Thread,
    ThreadClaim,
    ThreadOpen,
    TrailKind,
    TrailRow,
    TurnProgress,
)
from tests.broker import factories
from tests.broker.test_append_only import make_task
from tests.broker.test_suite_runs import ended_run
from tests.support.marks import postgres_only

# The rows of a thread the purge reaches, each by the column naming its thread.
THREAD_TABLES: tuple[type[models.Model], ...] = (
    Message,
    ThreadOpen,
    ThreadClaim,
    TurnProgress,
    TrailRow,
)


def conversation(actor: Actor, run: Actor, thread: Thread) -> None:
    """A turn, an open, and a run's claim, started turn and reply: a row in every table."""
    turn = actions.send_to_thread(actor, thread_id=thread.pk, body="hello").message
    actions.open_thread(actor, thread_id=thread.pk)
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    actions.send_message(
        run,
        to=turn.from_role,
        body="hi",
        message_class=MessageClass.RESULT,
        in_reply_to=turn.pk,
        claim_id=claim.pk,
    )
    actions.end_claim(run, claim_id=claim.pk)


def rows_of(thread: Thread) -> dict[str, list[int]]:
    """The ids of every row of `thread`, by table."""
    return {
        model.__name__: sorted(
            model._default_manager.filter(thread=thread).values_list("pk", flat=True)
        )
        for model in THREAD_TABLES
    }


def backdate(thread: Thread, days: int) -> None:
    Thread.objects.filter(pk=thread.pk).update(created_at=timezone.now() - timedelta(days=days))


@pytest.fixture
def threads(human: Actor, tester: Actor, assistant_run: Actor) -> tuple[Thread, Thread]:
    """The human's thread and the tester's, in the same project, each with a conversation."""
    product = factories.project(human)
    mine = factories.thread(human, product, "mine")
    probe = factories.thread(tester, product, "probe")
    conversation(human, assistant_run, mine)
    conversation(tester, assistant_run, probe)
    return mine, probe


def test_purge_deletes_every_tester_row_and_keeps_the_humans(
    threads: tuple[Thread, Thread],
) -> None:
    mine, probe = threads
    humans_before = rows_of(mine)
    trail_before = list(TrailRow.objects.exclude(thread=probe).values_list("pk", "text"))
    assert all(rows_of(probe).values()), "the tester's thread has a row in every table"

    counts = tester_purge.purge_tester_data(cut=timezone.now())["demo"]

    assert not Thread.objects.filter(pk=probe.pk).exists()
    assert rows_of(probe) == {model.__name__: [] for model in THREAD_TABLES}
    assert rows_of(mine) == humans_before
    assert Thread.objects.filter(pk=mine.pk).exists()
    assert (counts.threads, counts.messages, counts.opens, counts.claims, counts.turns) == (
        1,
        2,
        1,
        1,
        1,
    )
    # The human's trail rows stay as they were; one row more says what went.
    after = list(TrailRow.objects.values_list("pk", "text"))
    assert after[: len(trail_before)] == trail_before
    purged = TrailRow.objects.get(kind=TrailKind.TESTER_PURGED)
    assert after[len(trail_before) :] == [(purged.pk, purged.text)]
    assert purged.pk == counts.trail_row
    assert purged.text.startswith("system to tester: purged old tester data: 1 threads, 2 messages")
    assert purged.tester_visible
    assert not PurgePermit.objects.exists()


def test_purge_dry_run_counts_and_deletes_nothing(threads: tuple[Thread, Thread]) -> None:
    _, probe = threads
    before = rows_of(probe)
    trail = TrailRow.objects.count()

    counts = tester_purge.purge_tester_data(cut=timezone.now(), dry_run=True)["demo"]

    assert rows_of(probe) == before
    assert TrailRow.objects.count() == trail
    assert counts.rows == {
        "threads": 1,
        "messages": 2,
        "opens": 1,
        "claims": 1,
        "turns": 1,
        "trail_rows": len(before["TrailRow"]),
        "decisions": 0,
        "steps": 0,
        "suite_runs": 0,
        "suite_cases": 0,
    }


def test_purge_takes_only_threads_quiet_since_the_cut(
    human: Actor, tester: Actor, assistant_run: Actor
) -> None:
    product = factories.project(human)
    old, busy, _ = (factories.thread(tester, product, name) for name in ("old", "busy", "new"))
    actions.send_to_thread(tester, thread_id=busy.pk, body="still in use")
    backdate(old, 3)
    backdate(busy, 3)
    held = factories.thread(tester, product, "held")
    backdate(held, 3)
    factories.claim(assistant_run, held)

    tester_purge.purge_tester_data(cut=timezone.now() - timedelta(days=1))

    assert set(Thread.objects.values_list("name", flat=True)) == {"busy", "new", "held"}


def test_purge_keeps_a_thread_while_a_branch_carries_from_it(
    human: Actor, tester: Actor, assistant_run: Actor
) -> None:
    """R24: a branch points at its source's messages, so the source waits for a later purge,
    whatever the order of their ids; the branch goes first."""
    product = factories.project(human)
    source = factories.thread(tester, product, "source")
    conversation(tester, assistant_run, source)
    turn = Message.objects.filter(thread=source).order_by("pk").last()
    assert turn is not None
    branch = actions.branch_thread(tester, thread_id=source.pk, message_id=turn.pk)
    conversation(tester, assistant_run, branch)

    first = tester_purge.purge_tester_data(cut=timezone.now())["demo"]
    assert (first.threads, list(Thread.objects.values_list("pk", flat=True))) == (1, [source.pk])
    second = tester_purge.purge_tester_data(cut=timezone.now())["demo"]
    assert (second.threads, Thread.objects.exists()) == (1, False)


def test_purge_keeps_an_old_thread_a_kept_branch_carries_from(
    human: Actor, tester: Actor, assistant_run: Actor
) -> None:
    """An old source of a branch still in use stays, so the branch's reference holds."""
    source = factories.thread(tester, factories.project(human), "source")
    conversation(tester, assistant_run, source)
    cut = timezone.now()
    carried = Message.objects.filter(thread=source).order_by("pk").last()
    assert carried is not None
    branch = actions.branch_thread(tester, thread_id=source.pk, message_id=carried.pk)
    actions.send_to_thread(tester, thread_id=branch.pk, body="still in use")

    counts = tester_purge.purge_tester_data(cut=cut)["demo"]

    assert counts.threads == 0
    assert set(Thread.objects.values_list("pk", flat=True)) == {source.pk, branch.pk}


def test_purge_in_batches_reaches_every_thread(human: Actor, tester: Actor) -> None:
    product = factories.project(human)
    for index in range(5):
        thread = factories.thread(tester, product, f"t{index}")
        actions.send_to_thread(tester, thread_id=thread.pk, body="hello")

    counts = tester_purge.purge_tester_data(cut=timezone.now(), batch=2)["demo"]

    assert (counts.threads, counts.messages) == (5, 5)
    assert not Thread.objects.exists()
    assert TrailRow.objects.filter(kind=TrailKind.TESTER_PURGED).count() == 1


def test_purge_of_nothing_writes_no_trail_row(human: Actor) -> None:
    factories.thread(human, factories.project(human), "mine")
    counts = tester_purge.purge_tester_data(cut=timezone.now())["demo"]
    assert counts.empty
    assert not TrailRow.objects.filter(kind=TrailKind.TESTER_PURGED).exists()


def test_purge_deletes_old_suite_runs_and_unlinks_their_baselines(tester: Actor) -> None:
    old = ended_run(tester, ["smoke"], verdict=SuiteVerdict.PASS)
    SuiteRun.objects.filter(pk=old.pk).update(started_at=timezone.now() - timedelta(days=9))
    kept = suite_runs.start_suite_run(tester, suites=["smoke"], compare=old.pk)

    counts = tester_purge.purge_tester_data(cut=timezone.now() - timedelta(days=1))["demo"]

    assert (counts.suite_runs, counts.suite_cases) == (1, 1)
    assert list(SuiteRun.objects.values_list("pk", "baseline")) == [(kept.pk, None)]


# --- the guards stay in force ----------------------------------------------------------------


def delete_raw(model: type[models.Model], pk: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {model._meta.db_table} WHERE id = %s", [pk])


APPEND_ONLY = (Message, ThreadOpen, TrailRow)


@pytest.mark.parametrize("model", APPEND_ONLY, ids=lambda model: model.__name__)
def test_guard_refuses_deleting_a_humans_row_even_under_a_permit(
    model: type[models.Model], threads: tuple[Thread, Thread]
) -> None:
    """The purge's permit opens tester rows only: a purge widened to the human's threads would
    be refused by the database itself."""
    mine, _ = threads
    row = model._default_manager.filter(thread=mine).first()
    assert row is not None
    refused = pytest.raises(
        IntegrityError, match=re.escape(f"{model._meta.db_table} is append-only")
    )
    with refused, transaction.atomic(), tester_purge.purge_permit():
        delete_raw(model, row.pk)
    assert model._default_manager.filter(pk=row.pk).exists()


@pytest.mark.parametrize("model", APPEND_ONLY, ids=lambda model: model.__name__)
def test_guard_refuses_deleting_a_tester_row_without_a_permit(
    model: type[models.Model], threads: tuple[Thread, Thread]
) -> None:
    _, probe = threads
    row = model._default_manager.filter(thread=probe).first()
    assert row is not None
    with pytest.raises(IntegrityError, match="is append-only"), transaction.atomic():
        delete_raw(model, row.pk)
    assert model._default_manager.filter(pk=row.pk).exists()


def test_guard_refuses_rewriting_a_tester_row_under_a_permit(
    threads: tuple[Thread, Thread],
) -> None:
    _, probe = threads
    refused = pytest.raises(IntegrityError, match="broker_message is append-only")
    with refused, transaction.atomic(), tester_purge.purge_permit():
        Message.objects.filter(thread=probe).update(body="rewritten")


def thread_never_deleted() -> pytest.RaisesExc[IntegrityError]:
    return pytest.raises(IntegrityError, match="broker_thread rows are never deleted")


def test_guard_lets_a_permit_delete_a_tester_thread(tester: Actor, human: Actor) -> None:
    """What the purge does last, once the thread's rows are gone: under its permit, a
    tester-owned thread is deleted."""
    probe = factories.thread(tester, factories.project(human), "probe")
    with transaction.atomic(), tester_purge.purge_permit():
        delete_raw(Thread, probe.pk)
    assert not Thread.objects.filter(pk=probe.pk).exists()


def test_guard_refuses_deleting_a_humans_thread_even_under_a_permit(human: Actor) -> None:
    """The permit opens tester-owned threads only: a purge widened to the human's would be
    refused by the database itself, an empty thread too."""
    mine = factories.thread(human, factories.project(human), "mine")
    with thread_never_deleted(), transaction.atomic(), tester_purge.purge_permit():
        delete_raw(Thread, mine.pk)
    assert Thread.objects.filter(pk=mine.pk).exists()


def test_guard_refuses_deleting_a_tester_thread_without_a_permit(
    tester: Actor, human: Actor
) -> None:
    probe = factories.thread(tester, factories.project(human), "probe")
    with thread_never_deleted(), transaction.atomic():
        delete_raw(Thread, probe.pk)
    assert Thread.objects.filter(pk=probe.pk).exists()


def test_guard_refuses_deleting_a_task_even_under_a_permit(business) -> None:
    """The purge deletes no task (the tester has none, R15), so its permit opens none."""
    task = make_task(business)
    refused = pytest.raises(IntegrityError, match="broker_task rows are never deleted")
    with refused, transaction.atomic(), tester_purge.purge_permit():
        delete_raw(Task, task.pk)
    assert Task.objects.filter(pk=task.pk).exists()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_guard_on_postgresql_ignores_a_permit_of_another_transaction(
    threads: tuple[Thread, Thread],
) -> None:
    """A permit is its own transaction's: one committed by another opens nothing, neither a
    tester thread's rows nor the thread."""
    _, probe = threads
    PurgePermit.objects.create(txid=0)
    message = Message.objects.filter(thread=probe).first()
    assert message is not None
    try:
        with pytest.raises(IntegrityError, match="is append-only"), transaction.atomic():
            delete_raw(Message, message.pk)
        with thread_never_deleted(), transaction.atomic():
            delete_raw(Thread, probe.pk)
    finally:
        PurgePermit.objects.all().delete()


# --- the command -----------------------------------------------------------------------------


def test_purgetesterdata_dry_run_prints_the_counts(threads: tuple[Thread, Thread]) -> None:
    _, probe = threads
    out = StringIO()
    call_command("purgetesterdata", "--older-than", "0", "--dry-run", stdout=out)
    assert "demo: would delete 1 threads, 2 messages" in out.getvalue()
    assert Thread.objects.filter(pk=probe.pk).exists()


def test_purgetesterdata_older_than_zero_resets_the_test_data(
    threads: tuple[Thread, Thread],
) -> None:
    mine, _ = threads
    out = StringIO()
    call_command("purgetesterdata", "--older-than", "0", stdout=out)
    assert "demo: deleted 1 threads, 2 messages" in out.getvalue()
    assert list(Thread.objects.values_list("owner", flat=True)) == [mine.owner]
    assert not Thread.objects.filter(owner=TESTER).exists()


def test_purgetesterdata_refuses_a_negative_age(db: None) -> None:
    with pytest.raises(CommandError, match="--older-than"):
        call_command("purgetesterdata", "--older-than", "-1")
