"""Stored suite runs: the tester's history of conversation-test runs, their writes and reads.

The runner (`manage.py testassistant`) speaks only to the tester listener, so its history is
stored through it: a run starts, names a baseline to compare with, records each case's result,
and ends. These are the tester's verbs only (R22's list names them; any other actor is told
`not-found`, as for a verb that does not exist). The rows are not bus traffic: no trail row,
no thread stream, nothing pushed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from broker import fields, refusals, suite_fields
from broker.access import access_thread, verb
from broker.actors import Actor, ActorKind
from broker.models import (
    CASE_COST_COLUMNS,
    FAILING_VERDICTS,
    PASSING_VERDICTS,
    TESTER,
    SuiteCase,
    SuiteChange,
    SuiteRun,
    SuiteRunEnd,
    SuiteVerdict,
    Thread,
)
from broker.refusals import Refusal
from broker.significance import Tally, change_p_value, drop_p_value, rise_p_value, significant

# `compare`'s word for the newest earlier finished run of the same selection.
COMPARE_LAST = "last"


# Cases read from the database at a time while a page of them is measured: the read stops
# soon after the page is full, without loading the rest of the page's cases.
CASES_READ_AT_ONCE = 20


@dataclass(frozen=True)
class SuiteRunRead:
    """A run with its counts, and one page of its cases in id order; `more` when cases follow
    the page (read them `after` its last case)."""

    run: SuiteRun
    cases: list[SuiteCase]
    more: bool = False


# --- pure rules and helpers ----------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    """What the change rule reads of a case: its verdict, `k/N` and definition's hash ("":
    not sent)."""

    verdict: str
    tally: Tally
    definition_hash: str = ""


@dataclass(frozen=True)
class Compared:
    """A case's change against the baseline's same case, and the p-value it rests on (None:
    nothing compared: no such case, or its definition changed)."""

    change: SuiteChange
    p_value: Fraction | None = None


def case_change(*, baseline: CaseResult | None, now: CaseResult, alpha: float) -> Compared:
    """How a case compares with the baseline's same case (None: the baseline has no such case,
    or the run has no baseline). Regressed and fixed need both the verdict to cross between
    passing and failing and the pass rate's move to be significant at `alpha` (one-sided
    Fisher exact test, `broker.significance`); a move within noise is `same`."""
    if baseline is None:
        return Compared(SuiteChange.NEW)
    # Both hashed, and not alike: another test now, whose results say nothing of the old one.
    if (
        baseline.definition_hash
        and now.definition_hash
        and baseline.definition_hash != now.definition_hash
    ):
        return Compared(SuiteChange.CHANGED)
    # It passed in the baseline and fails now, by more than chance.
    if baseline.verdict in PASSING_VERDICTS and now.verdict in FAILING_VERDICTS:
        dropped = drop_p_value(baseline.tally, now.tally)
        if significant(dropped, alpha):
            return Compared(SuiteChange.REGRESSED, dropped)
    # It failed in the baseline and passes now, by more than chance.
    if baseline.verdict in FAILING_VERDICTS and now.verdict in PASSING_VERDICTS:
        rose = rise_p_value(baseline.tally, now.tally)
        if significant(rose, alpha):
            return Compared(SuiteChange.FIXED, rose)
    return Compared(SuiteChange.SAME, change_p_value(baseline.tally, now.tally))


def with_counts(runs: QuerySet[SuiteRun]) -> QuerySet[SuiteRun]:
    """`runs` with their cases counted by verdict and regressions (`SuiteRun.counts`), and
    their costs summed with the cases that recorded none counted (`SuiteRun.cost`), in the
    same query however many runs."""
    counts = {
        f"{verdict}_count": Count("cases", filter=Q(cases__verdict=verdict))
        for verdict in SuiteVerdict.values
    }
    regressed = Count("cases", filter=Q(cases__change=SuiteChange.REGRESSED))
    costs = {f"{column}_sum": Sum(f"cases__{column}") for column in CASE_COST_COLUMNS}
    uncounted = Count("cases", filter=Q(cases__cost_turns__isnull=True))
    # The annotations fill the attributes `SuiteRun` declares for them.
    return runs.annotate(**counts, regressed_count=regressed, **costs, cases_without_cost=uncounted)


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


def counted_suite_run(actor: Actor, *, run_id: object) -> SuiteRun:
    """A run of the actor's business with its counts (`with_counts`), by id, or `not-found`
    as `access_suite_run` answers."""
    run = with_counts(
        SuiteRun.objects.filter(pk=suite_fields.clean_run_id(run_id), business_id=actor.business_id)
    ).first()
    if run is None:
        raise Refusal(refusals.NOT_FOUND, "No such suite run.")
    return run


@dataclass(frozen=True)
class Selection:
    """What a run selected: its suites, the instances its cases were planned on, its `-k`."""

    suites: list[str]
    instances: list[str]
    keyword: str


def _baseline(actor: Actor, *, selection: Selection, compare: object) -> SuiteRun | None:
    """The run `compare` names: None, `"last"` (the newest finished run of the same selection,
    None when there is none) or a run id of the actor's business."""
    if compare is None:
        return None
    if compare == COMPARE_LAST:
        # Finished only: a halted run is missing cases, and a `-k` run is another selection.
        return (
            SuiteRun.objects.filter(
                business_id=actor.business_id,
                ended_how=SuiteRunEnd.FINISHED,
                suites=selection.suites,
                instances=selection.instances,
                keyword=selection.keyword,
            )
            .order_by("-pk")
            .first()
        )
    if isinstance(compare, str):
        raise Refusal(refusals.INVALID, 'The compare must be null, "last" or a run id.')
    return access_suite_run(actor, run_id=compare)


def halt_silent_runs(business_id: int) -> int:
    """Halt the business's runs that are still running but silent: no record for
    MOSAIC_SUITE_RUN_SILENCE_SECONDS, and no tester turn or reply in the business for as long
    (a client between records may be waiting on a long case's repeats). Their client is gone,
    or stuck; nothing stays `running` after it. Run by every suite-run verb before it reads or
    writes, so a run is halted whoever looks first. How many were halted."""
    seconds = float(settings.MOSAIC_SUITE_RUN_SILENCE_SECONDS)
    now = timezone.now()
    since = now - timedelta(seconds=seconds)
    silent = SuiteRun.objects.filter(
        business_id=business_id, ended_at__isnull=True, active_at__lt=since
    )
    if not silent.exists():
        return 0
    talking = Thread.objects.filter(
        project__business_id=business_id, owner=TESTER, active_at__gte=since
    )
    if talking.exists():
        return 0
    return silent.update(
        ended_at=now,
        ended_how=SuiteRunEnd.HALTED,
        end_reason=f"silent for more than {seconds:g} s: no record, and no tester turn; "
        "its client is gone",
    )


# --- writes --------------------------------------------------------------------------------


@verb("suite_run.start", ActorKind.TESTER)
def start_suite_run(
    actor: Actor,
    *,
    suites: object,
    compare: object = None,
    alpha: object = suite_fields.DEFAULT_ALPHA,
    instances: object = (),
    keyword: object = None,
) -> SuiteRun:
    """A new run covering `suites` (stored sorted), planned on `instances` (sorted; "" is the
    business's default) with the case selection `keyword` (None: every case), its changes
    significant at `alpha`, compared with the run `compare` names: None (no baseline),
    `"last"` (the newest finished run of the business with the same suites, instances and
    keyword; none, no baseline) or the id of one of the business's runs (else `not-found`)."""
    selection = Selection(
        suites=suite_fields.clean_suites(suites),
        instances=suite_fields.clean_instances(instances),
        keyword=suite_fields.clean_keyword(keyword),
    )
    level = suite_fields.clean_alpha(alpha)
    halt_silent_runs(actor.business_id)
    with transaction.atomic():
        baseline = _baseline(actor, selection=selection, compare=compare)
        return SuiteRun.objects.create(
            business_id=actor.business_id,
            suites=selection.suites,
            instances=selection.instances,
            keyword=selection.keyword,
            alpha=level,
            baseline=baseline,
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
    pass_rate: object = None,
    interval: object = None,
    pass_hat_k: object = None,
    definition_hash: object = None,
    cost: object = None,
) -> SuiteCase:
    """Record one case's result in a run of the business that has not ended (`invalid` once it
    has, or once it was halted), with its `change` against the baseline's same (suite, case,
    instance). The statistics (`pass_rate`, `interval`, `pass_hat_k`) come together or not at
    all and are checked, not recomputed; `definition_hash` is the client's sha256 of the
    case's definition; `cost` is what its replies used and cost as the client counted them
    (`suite_fields.clean_cost`; None: not counted).

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
        pass_rate=pass_rate,
        interval=interval,
        pass_hat_k=pass_hat_k,
        definition_hash=definition_hash,
        cost=cost,
    )
    halt_silent_runs(actor.business_id)
    with transaction.atomic():
        # Locked: an end waits for the record, and a record after the end sees it.
        run = access_suite_run(actor, run_id=run_id, lock=True)
        if run.ended_how == SuiteRunEnd.HALTED:
            raise Refusal(
                refusals.INVALID,
                f"This suite run was halted ({run.end_reason}); it takes no more cases.",
            )
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
    and its threads checked (`check_case_threads`). The run's activity moves to now.
    """
    found = (
        SuiteCase.objects.filter(
            run_id=run.baseline_id, suite=record.suite, case=record.case, instance=record.instance
        )
        .values_list("verdict", "passed_runs", "runs", "definition_hash")
        .first()
        if run.baseline_id is not None
        else None
    )
    baseline = (
        None
        if found is None
        else CaseResult(verdict=found[0], tally=Tally(found[1], found[2]), definition_hash=found[3])
    )
    now = CaseResult(
        verdict=record.verdict,
        tally=Tally(record.passed_runs, record.runs),
        definition_hash=record.definition_hash,
    )
    compared = case_change(baseline=baseline, now=now, alpha=run.alpha)
    statistics, cost = record.statistics, record.cost
    case = SuiteCase.objects.create(
        run=run,
        suite=record.suite,
        case=record.case,
        instance=record.instance,
        verdict=record.verdict,
        passed_runs=record.passed_runs,
        runs=record.runs,
        change=compared.change,
        threads=record.threads,
        failures=record.failures,
        attempts=record.attempts,
        pass_rate=statistics.pass_rate if statistics else None,
        interval_low=statistics.interval[0] if statistics else None,
        interval_high=statistics.interval[1] if statistics else None,
        pass_hat_k=statistics.pass_hat_k if statistics else None,
        definition_hash=record.definition_hash,
        baseline_passed_runs=baseline.tally.passed if baseline else None,
        baseline_runs=baseline.tally.repeats if baseline else None,
        p_value=None if compared.p_value is None else float(compared.p_value),
        cost_turns=cost.turns if cost else None,
        prompt_tokens=cost.prompt_tokens if cost else None,
        completion_tokens=cost.completion_tokens if cost else None,
        cost_amount=cost.amount if cost else None,
        turns_without_usage=cost.turns_without_usage if cost else None,
        turns_without_price=cost.turns_without_price if cost else None,
    )
    run.active_at = timezone.now()
    run.save(update_fields=["active_at"])
    return case


@verb("suite_run.end", ActorKind.TESTER)
def end_suite_run(actor: Actor, *, run_id: object, reason: object = None) -> SuiteRun:
    """End a run of the business: it takes no more cases. Without a `reason` it finished (a
    baseline for `"last"`); with one it was halted (refused, interrupted) and the reason is
    kept. Ending it again changes nothing and answers the run as it is."""
    halted_why = None if reason is None else suite_fields.clean_end_reason(reason)
    halt_silent_runs(actor.business_id)
    with transaction.atomic():
        run = access_suite_run(actor, run_id=run_id, lock=True)
        if run.ended_at is None:
            run.ended_at = timezone.now()
            run.ended_how = SuiteRunEnd.FINISHED if halted_why is None else SuiteRunEnd.HALTED
            run.end_reason = halted_why or ""
            run.save(update_fields=["ended_at", "ended_how", "end_reason"])
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
    halt_silent_runs(actor.business_id)
    runs = SuiteRun.objects.filter(business_id=actor.business_id)
    if cursor is not None:
        runs = runs.filter(pk__lt=cursor)
    return list(with_counts(runs).order_by("-pk")[:size])


@verb("suite_run.read", ActorKind.TESTER)
def read_suite_run(
    actor: Actor, *, run_id: object, after: int | None = None, limit: int | None = None
) -> SuiteRunRead:
    """One run of the business with its counts, and a page of its cases in id order: from its
    first case, or those with an id above `after`; at most `limit` of them (default 100, at
    most 500), and fewer when their records would pass RUN_PAGE_SIZE_MAX together (a page
    holds one case at least)."""
    size = fields.clean_limit(limit)
    cursor = fields.clean_cursor(after, what="after")
    halt_silent_runs(actor.business_id)
    run = counted_suite_run(actor, run_id=run_id)
    cases = SuiteCase.objects.filter(run=run).order_by("pk")
    if cursor is not None:
        cases = cases.filter(pk__gt=cursor)
    page, more = bounded_page(cases[: size + 1], size=size)
    return SuiteRunRead(run=run, cases=page, more=more)


def bounded_page(cases: QuerySet[SuiteCase], *, size: int) -> tuple[list[SuiteCase], bool]:
    """The first `size` of `cases`, or fewer: the page ends before a case whose record would
    take the page's past RUN_PAGE_SIZE_MAX (`record_size`), the first case always in it; and
    whether any case follows the page. Read CASES_READ_AT_ONCE at a time, so what is loaded
    past the page's end is a few cases, not the rest of a page of big ones."""
    page: list[SuiteCase] = []
    taken = 0
    for case in cases.iterator(chunk_size=CASES_READ_AT_ONCE):
        stored = suite_fields.record_size(case.failures, case.attempts)
        if len(page) == size or (page and taken + stored > suite_fields.RUN_PAGE_SIZE_MAX):
            # The iterator, left here, closes its cursor as it goes.
            return page, True
        page.append(case)
        taken += stored
    return page, False
