"""The tester-data purge: old tester threads and everything of theirs, and old
suite runs, deleted in batches; the human's rows never.

Every suite run adds tester threads, and the append-only guards keep their messages, opens,
trail rows and decisions for good. The guards stay in force: a DELETE of those rows passes only
for a row of a tester-owned thread, in a transaction holding a purge permit (`PurgePermit`,
`broker.guards`). Each batch stores its permit first and deletes it before it commits, so no
other transaction ever holds one, and a slip here that reached a human's row would be refused
by the database itself.

A thread is old when it was created before the cut and has no message since; a thread a run
holds (an open claim), or that a branch still stored carries from (R24: by reference, to its
messages), is left for a later purge. Events stay: they are the business's record
(a tester writes none, R7). A purge of a business writes one trail row saying what went, for
the human and the tester alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, Model, OuterRef, QuerySet

from broker.actions.streams import appending, do_record_trail
from broker.actors import Actor
from broker.models import (
    TESTER,
    Business,
    Decision,
    Message,
    PurgePermit,
    Step,
    SuiteCase,
    SuiteRun,
    Thread,
    ThreadClaim,
    ThreadOpen,
    TrailKind,
    TrailRow,
    TurnProgress,
)

# Threads (or suite runs) deleted per transaction: each batch holds its locks briefly.
BATCH = 500

# (counted as, model, its column naming the purged row)
PurgeOrder = tuple[tuple[str, type[Model], str], ...]

# What a thread's purge deletes, in an order that leaves no row pointing at a deleted one.
THREAD_ROWS: PurgeOrder = (
    ("trail_rows", TrailRow, "thread_id"),
    ("steps", Step, "thread_id"),
    ("turns", TurnProgress, "thread_id"),
    ("decisions", Decision, "thread_id"),
    ("messages", Message, "thread_id"),
    ("claims", ThreadClaim, "thread_id"),
    ("opens", ThreadOpen, "thread_id"),
    ("threads", Thread, "id"),
)

# What a suite run's purge deletes, in the same sense.
SUITE_ROWS: PurgeOrder = (
    ("suite_cases", SuiteCase, "run_id"),
    ("suite_runs", SuiteRun, "id"),
)


@dataclass
class PurgeCounts:
    """How many rows of each kind a purge deleted (or, dry, would delete)."""

    threads: int = 0
    messages: int = 0
    opens: int = 0
    claims: int = 0
    turns: int = 0
    trail_rows: int = 0
    decisions: int = 0
    steps: int = 0
    suite_runs: int = 0
    suite_cases: int = 0
    # The trail row that recorded the purge (none on a dry run or when nothing went).
    trail_row: int | None = field(default=None, compare=False)

    def add(self, name: str, count: int) -> None:
        setattr(self, name, getattr(self, name) + count)

    @property
    def rows(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trail_row"}

    @property
    def empty(self) -> bool:
        return not any(self.rows.values())

    def sentence(self) -> str:
        """The counts for people: `3 threads, 40 messages, …` (every kind, zero too)."""
        return ", ".join(f"{count} {name.replace('_', ' ')}" for name, count in self.rows.items())


def old_tester_threads(*, business_id: int, cut: datetime) -> QuerySet[Thread]:
    """The business's tester-owned threads created before `cut`, with no message since, no run
    holding them and no branch made from them (R24: it points at their messages), in id
    order."""
    return (
        Thread.objects.filter(project__business_id=business_id, owner=TESTER, created_at__lt=cut)
        .exclude(Exists(Message.objects.filter(thread_id=OuterRef("pk"), created_at__gte=cut)))
        .exclude(
            Exists(ThreadClaim.objects.filter(thread_id=OuterRef("pk"), ended_at__isnull=True))
        )
        .exclude(Exists(Thread.objects.filter(branched_from=OuterRef("pk"))))
        .order_by("pk")
    )


def old_suite_runs(*, business_id: int, cut: datetime) -> QuerySet[SuiteRun]:
    """The business's suite runs (all the tester's) started before `cut`, in id order."""
    return SuiteRun.objects.filter(business_id=business_id, started_at__lt=cut).order_by("pk")


def purge_tester_data(
    *, cut: datetime, dry_run: bool = False, batch: int = BATCH
) -> dict[str, PurgeCounts]:
    """Delete (dry: count) every business's tester data older than `cut`, `batch` threads or
    runs per transaction; the counts by business slug. Each business with something deleted
    gets one `tester.purged` trail row."""
    purged = {}
    for business in Business.objects.order_by("slug"):
        counts = PurgeCounts()
        chosen = old_tester_threads(business_id=business.pk, cut=cut)
        _purge_in_batches(chosen, THREAD_ROWS, counts, dry_run=dry_run, batch=batch)
        runs = old_suite_runs(business_id=business.pk, cut=cut)
        _purge_in_batches(
            runs, SUITE_ROWS, counts, dry_run=dry_run, batch=batch, first=_forget_baselines
        )
        if not dry_run and not counts.empty:
            counts.trail_row = do_record_purge(business.pk, counts=counts).pk
        purged[business.slug] = counts
    return purged


def do_record_purge(business_id: int, *, counts: PurgeCounts) -> TrailRow:
    """The purge's trail row: the system to the tester, what went. Trusted: records, checks
    nothing."""
    system = Actor.system(business_id=business_id)
    with appending(business_id):
        return do_record_trail(
            system,
            business_id=business_id,
            thread=None,
            message=None,
            to_role=TESTER,
            text=f"purged old tester data: {counts.sentence()}",
            kind=TrailKind.TESTER_PURGED,
        )


def _purge_in_batches(
    chosen: QuerySet[Any],
    order: PurgeOrder,
    counts: PurgeCounts,
    *,
    dry_run: bool,
    batch: int,
    first: Callable[[list[int]], None] | None = None,
) -> None:
    """Delete (dry: count) the `order` rows of `chosen`'s rows, `batch` of them per transaction,
    adding to `counts`. `first` runs on each batch's ids before its deletes."""
    after = 0
    while True:
        with transaction.atomic():
            # Locked, and chosen again under the lock: a turn sent meanwhile keeps its thread.
            ids = list(
                chosen.filter(pk__gt=after)
                .select_for_update(of=("self",))
                .values_list("pk", flat=True)[:batch]
            )
            if not ids:
                return
            after = ids[-1]
            if dry_run:
                for name, model, column in order:
                    counts.add(
                        name, model._default_manager.filter(**{f"{column}__in": ids}).count()
                    )
                continue
            with purge_permit():
                if first is not None:
                    first(ids)
                for name, model, column in order:
                    counts.add(name, _delete(model, column, ids))


def _forget_baselines(run_ids: list[int]) -> None:
    """A kept run compared with a purged one keeps its cases' changes, as computed then; it
    names no baseline any more."""
    SuiteRun.objects.filter(baseline_id__in=run_ids).exclude(pk__in=run_ids).update(baseline=None)


def _delete(model: type[Model], column: str, ids: list[int]) -> int:
    """Delete the rows of `model` whose `column` is one of `ids`; how many went.

    A plain DELETE: the ORM's would read every row first to follow relations that the order of
    the steps has already emptied.
    """
    quote = connection.ops.quote_name
    placeholders = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {quote(model._meta.db_table)} WHERE {quote(column)} IN ({placeholders})",
            ids,
        )
        return int(cursor.rowcount)


@contextmanager
def purge_permit() -> Iterator[None]:
    """Hold a purge permit for the current transaction (`broker.guards`), and delete it before
    the transaction commits: no permit is ever committed. On an error the rollback takes it."""
    txid = None
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT txid_current()")
            (txid,) = cursor.fetchone()
    permit = PurgePermit.objects.create(txid=txid)
    yield
    permit.delete()
