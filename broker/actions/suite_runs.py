"""Stored suite runs: the tester's history of conversation-test runs, their writes and reads.

The runner (`manage.py testassistant`) speaks only to the tester listener, so its history is
stored through it: a run starts, names a baseline to compare with, records each case's result,
and ends. These are the tester's verbs only (R22's list names them; any other actor is told
`not-found`, as for a verb that does not exist). The rows are not bus traffic: no trail row,
no thread stream, nothing pushed.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from broker import fields, refusals, suite_fields
from broker.access import access_thread, verb
from broker.actors import Actor, ActorKind
from broker.models import (
    FAILING_VERDICTS,
    PASSING_VERDICTS,
    SuiteCase,
    SuiteChange,
    SuiteRun,
    SuiteVerdict,
)
from broker.refusals import Refusal

# `compare`'s word for the newest earlier ended run covering the same suites.
COMPARE_LAST = "last"


@dataclass(frozen=True)
class SuiteRunRead:
    """A run with its counts, and its cases in id order (at most RUN_CASES_MAX)."""

    run: SuiteRun
    cases: list[SuiteCase]


# --- pure rules and helpers ----------------------------------------------------------------


def case_change(*, baseline: str | None, verdict: str) -> SuiteChange:
    """How a case's verdict compares with the baseline's verdict for the same case (None: the
    baseline has no such case, or the run has no baseline)."""
    if baseline is None:
        return SuiteChange.NEW
    # It passed in the baseline and fails now.
    if baseline in PASSING_VERDICTS and verdict in FAILING_VERDICTS:
        return SuiteChange.REGRESSED
    # It failed in the baseline and passes now.
    if baseline in FAILING_VERDICTS and verdict in PASSING_VERDICTS:
        return SuiteChange.FIXED
    return SuiteChange.SAME


def with_counts(runs: QuerySet[SuiteRun]) -> QuerySet[SuiteRun]:
    """`runs` with their cases counted by verdict and regressions (`SuiteRun.counts`), in the
    same query however many runs."""
    counts = {
        f"{verdict}_count": Count("cases", filter=Q(cases__verdict=verdict))
        for verdict in SuiteVerdict.values
    }
    regressed = Count("cases", filter=Q(cases__change=SuiteChange.REGRESSED))
    # The annotations fill the attributes `SuiteRun` declares for them.
    return runs.annotate(**counts, regressed_count=regressed)


def access_suite_run(actor: Actor, *, run_id: object, lock: bool = False) -> SuiteRun:
    """A run of the actor's business, by id, or `not-found`: another business's run is answered
    as a missing one. `lock` holds its row until the transaction ends."""
    runs = SuiteRun.objects.filter(
        pk=suite_fields.clean_run_id(run_id), business_id=actor.business_id
    )
    if lock:
        runs = runs.select_for_update(of=("self",))
    run = runs.first()
    if run is None:
        raise Refusal(refusals.NOT_FOUND, "No such suite run.")
    return run


def _baseline(actor: Actor, *, suites: list[str], compare: object) -> SuiteRun | None:
    """The run `compare` names: None, `"last"` (the newest ended run covering exactly `suites`,
    None when there is none) or a run id of the actor's business."""
    if compare is None:
        return None
    if compare == COMPARE_LAST:
        return (
            SuiteRun.objects.filter(
                business_id=actor.business_id, ended_at__isnull=False, suites=suites
            )
            .order_by("-pk")
            .first()
        )
    if isinstance(compare, str):
        raise Refusal(refusals.INVALID, 'The compare must be null, "last" or a run id.')
    return access_suite_run(actor, run_id=compare)


# --- writes --------------------------------------------------------------------------------


@verb("suite_run.start", ActorKind.TESTER)
def start_suite_run(actor: Actor, *, suites: object, compare: object = None) -> SuiteRun:
    """A new run covering `suites` (stored sorted), compared with the run `compare` names:
    None (no baseline), `"last"` (the newest earlier ended run of the business covering the
    same suites; none, no baseline) or the id of one of the business's runs (else
    `not-found`)."""
    names = suite_fields.clean_suites(suites)
    with transaction.atomic():
        baseline = _baseline(actor, suites=names, compare=compare)
        return SuiteRun.objects.create(
            business_id=actor.business_id, suites=names, baseline=baseline
        )


@verb("suite_run.record", ActorKind.TESTER)
def record_suite_case(
    actor: Actor,
    *,
    run_id: object,
    suite: object,
    case: object,
    instance: object,
    verdict: object,
    passed_runs: object,
    runs: object,
    threads: object = (),
    failures: object = (),
    attempts: object = (),
) -> SuiteCase:
    """Record one case's result in a run of the business that has not ended (`invalid` once it
    has), with its `change` against the baseline's same (suite, case, instance).

    R1: every thread named must be the tester's own thread of the business, checked by the
    same `access_thread` as every thread verb, so the answers are the same (`not-found`,
    `thread-not-owned`); and each must have talked to `instance`. A case recorded twice in a
    run is `invalid`, as is a run that already holds RUN_CASES_MAX cases.
    """
    record = suite_fields.clean_case(
        suite=suite,
        case=case,
        instance=instance,
        verdict=verdict,
        passed_runs=passed_runs,
        runs=runs,
        threads=threads,
        failures=failures,
        attempts=attempts,
        verdicts=SuiteVerdict.values,
    )
    with transaction.atomic():
        # Locked: an end waits for the record, and a record after the end sees it.
        run = access_suite_run(actor, run_id=run_id, lock=True)
        if run.ended_at is not None:
            raise Refusal(refusals.INVALID, "This suite run has ended; it takes no more cases.")
        check_case_threads(actor, threads=record.threads, instance=record.instance)
        if SuiteCase.objects.filter(run=run).count() >= suite_fields.RUN_CASES_MAX:
            raise Refusal(
                refusals.INVALID, f"A suite run holds at most {suite_fields.RUN_CASES_MAX} cases."
            )
        try:
            with transaction.atomic():
                return do_record_case(run, record)
        except IntegrityError:
            # suite_case_unique_per_run: this case has its result in this run already.
            raise Refusal(
                refusals.INVALID, "This case is recorded in this suite run already."
            ) from None


def check_case_threads(actor: Actor, *, threads: list[int], instance: str) -> None:
    """R1: each thread is the actor's own thread of the business — `access_thread`, so the
    answers are every thread verb's (`not-found`, `thread-not-owned`) — and talked to
    `instance` (`invalid` otherwise)."""
    for thread_id in dict.fromkeys(threads):
        thread = access_thread(actor, thread_id=thread_id)
        if thread.instance.name != instance:
            raise Refusal(
                refusals.INVALID,
                f"Thread {thread_id} talked to {thread.instance.name}, "
                f"not to {instance or 'no instance'}.",
            )


def do_record_case(run: SuiteRun, record: suite_fields.CaseRecord) -> SuiteCase:
    """Store a case's result with its `change` against the baseline's same (suite, case,
    instance).

    Precondition: `run` is of the caller's business, locked and not ended; `record` is clean
    and its threads checked (`check_case_threads`).
    """
    baseline = (
        SuiteCase.objects.filter(
            run_id=run.baseline_id, suite=record.suite, case=record.case, instance=record.instance
        )
        .values_list("verdict", flat=True)
        .first()
        if run.baseline_id is not None
        else None
    )
    return SuiteCase.objects.create(
        run=run,
        suite=record.suite,
        case=record.case,
        instance=record.instance,
        verdict=record.verdict,
        passed_runs=record.passed_runs,
        runs=record.runs,
        change=case_change(baseline=baseline, verdict=record.verdict),
        threads=record.threads,
        failures=record.failures,
        attempts=record.attempts,
    )


@verb("suite_run.end", ActorKind.TESTER)
def end_suite_run(actor: Actor, *, run_id: object) -> SuiteRun:
    """End a run of the business: it takes no more cases. Ending it again changes nothing and
    answers the run as it is."""
    with transaction.atomic():
        run = access_suite_run(actor, run_id=run_id, lock=True)
        if run.ended_at is None:
            run.ended_at = timezone.now()
            run.save(update_fields=["ended_at"])
    return with_counts(SuiteRun.objects.filter(pk=run.pk)).get()


# --- reads ---------------------------------------------------------------------------------


@verb("suite_run.list", ActorKind.TESTER)
def list_suite_runs(
    actor: Actor, *, before: int | None = None, limit: int | None = None
) -> list[SuiteRun]:
    """The business's runs, newest first, with their counts: `limit` (default 100, at most
    500) of them, those with an id below `before` when given."""
    size = fields.clean_limit(limit)
    cursor = fields.clean_cursor(before, what="before")
    runs = SuiteRun.objects.filter(business_id=actor.business_id)
    if cursor is not None:
        runs = runs.filter(pk__lt=cursor)
    return list(with_counts(runs).order_by("-pk")[:size])


@verb("suite_run.read", ActorKind.TESTER)
def read_suite_run(actor: Actor, *, run_id: object) -> SuiteRunRead:
    """One run of the business with its counts and its cases, in id order."""
    run = with_counts(
        SuiteRun.objects.filter(pk=suite_fields.clean_run_id(run_id), business_id=actor.business_id)
    ).first()
    if run is None:
        raise Refusal(refusals.NOT_FOUND, "No such suite run.")
    return SuiteRunRead(run=run, cases=list(SuiteCase.objects.filter(run=run).order_by("pk")))
