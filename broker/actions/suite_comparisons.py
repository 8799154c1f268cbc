"""Two stored test runs compared case by case, and one case's replies side by side.

A reviewer reads what changed between a run and another of the business: its baseline, or any
run they choose. The rule of a case's change is `suite_runs.case_change` (Fisher's test, from
`broker.significance`), applied here to any two runs, so no second copy of it exists: against
the run's own baseline the change each case stored when it was recorded is read as it is;
against any other run it is computed by the same function at the run's alpha. Reads only, the
tester's alone (R22: each verb counts as `suite_run.read`).

Bounded by design: a comparison reads the columns it needs of both runs' cases (at most
RUN_CASES_MAX each, never their failures or repeats) and answers a page of them; a case's
replies are read from its repeats' threads a few turns at a time, and a page of them stops near
RUN_PAGE_SIZE_MAX characters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from broker import fields, refusals, suite_fields, thread_rows
from broker.access import access_thread, verb
from broker.actions.suite_runs import (
    CaseResult,
    case_change,
    counted_suite_run,
    halt_silent_runs,
)
from broker.actors import Actor
from broker.models import Message, SuiteCase, SuiteChange, SuiteRun
from broker.refusals import Refusal
from broker.significance import Tally

# A case of the other run that this run does not have: the opposite of `new`.
MISSING = "missing"
# The order a reviewer reads a comparison in: what got worse first, what did not move last.
# Plain strings, not the enum's members: the schema is also served as YAML, which cannot write
# an enum.
ORDER: tuple[str, ...] = (
    SuiteChange.REGRESSED.value,
    SuiteChange.FIXED.value,
    SuiteChange.CHANGED.value,
    SuiteChange.NEW.value,
    MISSING,
    SuiteChange.SAME.value,
)
_RANK = {change: rank for rank, change in enumerate(ORDER)}
# The columns a comparison reads of a case: never its failures or repeats.
CASE_COLUMNS = (
    "pk",
    "suite",
    "case",
    "instance",
    "verdict",
    "passed_runs",
    "runs",
    "definition_hash",
    "change",
    "p_value",
)
# Cases read from the database at a time, and a repeat's turns whose texts are read at once.
CASES_READ_AT_ONCE = 500
TURNS_READ_AT_ONCE = 10
# A turn's state as a record names it ("result", "failed", "stopped"): a word, not a text.
STATE_MAX = 40

CaseKey = tuple[str, str, str]
T = TypeVar("T")


@dataclass(frozen=True)
class CaseRow:
    """What a comparison reads of a stored case (CASE_COLUMNS)."""

    id: int
    suite: str
    case: str
    instance: str
    verdict: str
    passed_runs: int
    runs: int
    definition_hash: str
    change: str
    p_value: float | None

    @classmethod
    def of(cls, case: SuiteCase) -> CaseRow:
        return cls(*(getattr(case, column) for column in CASE_COLUMNS))

    @property
    def key(self) -> CaseKey:
        return (self.suite, self.case, self.instance)

    @property
    def result(self) -> CaseResult:
        return CaseResult(
            verdict=self.verdict,
            tally=Tally(self.passed_runs, self.runs),
            definition_hash=self.definition_hash,
        )


@dataclass(frozen=True)
class ComparedCase:
    """A case of one run or both, with its change from the other run to this one (`MISSING`:
    the other run's only) and the p-value it rests on (None: nothing compared)."""

    now: CaseRow | None
    other: CaseRow | None
    change: str
    p_value: float | None

    @property
    def row(self) -> CaseRow:
        found = self.now or self.other
        assert found is not None  # a compared case is in one run at least
        return found

    @property
    def id(self) -> int:
        """The comparison's cursor: this run's case, or the other's when this run has none."""
        return self.row.id


@dataclass(frozen=True)
class SuiteComparison:
    """Two runs with their counts; how many of their cases each change counts; a page of
    them in ORDER (the `same` ones alone, or every other), `more` when more follow."""

    run: SuiteRun
    other: SuiteRun
    counts: dict[str, int]
    cases: list[ComparedCase]
    more: bool


@dataclass(frozen=True)
class StoredTurn:
    """A turn as a repeat's record keeps it: its number, its message and its reply's (None:
    not named), its state and whether it passed (None: not said)."""

    number: int
    turn_id: int | None
    reply_id: int | None
    state: str | None
    passed: bool | None


@dataclass(frozen=True)
class StoredRepeat:
    """The repeat of a case a comparison shows, as its record keeps it; `readable`: its
    thread is named and is the actor's own to read (R1)."""

    number: int
    thread: int | None
    passed: bool | None
    turns: tuple[StoredTurn, ...]
    readable: bool = False


@dataclass(frozen=True)
class TurnTexts:
    """One run's side of a turn: what was sent, the reply (None: none came, or its thread
    cannot be read), its state and whether it passed."""

    sent: str | None
    reply: str | None
    state: str | None
    passed: bool | None


@dataclass(frozen=True)
class ComparedTurn:
    """A turn of both shown repeats, by number (a side is None: its repeat had no such turn)."""

    turn: int
    now: TurnTexts | None
    other: TurnTexts | None


@dataclass(frozen=True)
class CaseReplies:
    """A case of this run, compared; the repeat shown of it and of the other run's same case
    (None: no such case, or a record with no repeats); a page of their turns side by side."""

    case: ComparedCase
    now: StoredRepeat | None
    other: StoredRepeat | None
    turns: list[ComparedTurn]
    more: bool


# --- pure rules ----------------------------------------------------------------------------


def compared(
    now: CaseRow | None, other: CaseRow | None, *, alpha: float, as_recorded: bool
) -> ComparedCase:
    """A case's change from the other run to this one. `as_recorded`: the other run is this
    run's baseline, so the change the case stored when it was recorded is the answer (what
    the run's own list and the client's gate said); otherwise `case_change` decides, at this
    run's `alpha`."""
    if now is None:
        return ComparedCase(now, other, MISSING, None)
    if as_recorded:
        return ComparedCase(now, other, now.change, now.p_value)
    found = case_change(
        baseline=None if other is None else other.result, now=now.result, alpha=alpha
    )
    p_value = None if found.p_value is None else float(found.p_value)
    return ComparedCase(now, other, found.change, p_value)


def compare_rows(
    mine: Sequence[CaseRow], theirs: Sequence[CaseRow], *, alpha: float, as_recorded: bool
) -> list[ComparedCase]:
    """Every case of either run, matched by (suite, case, instance), in ORDER and within each
    change by id."""
    unmatched = {row.key: row for row in theirs}
    found = [
        compared(row, unmatched.pop(row.key, None), alpha=alpha, as_recorded=as_recorded)
        for row in mine
    ]
    found += [
        compared(None, row, alpha=alpha, as_recorded=as_recorded) for row in unmatched.values()
    ]
    return sorted(found, key=lambda case: (_RANK[case.change], case.id))


def page_after(items: Sequence[T], *, position: int | None, size: int) -> tuple[list[T], bool]:
    """`size` items from after `position` (None: from the first), and whether more follow."""
    start = 0 if position is None else position + 1
    return list(items[start : start + size]), len(items) > start + size


def _stored_id(value: object) -> int | None:
    """An id a record names, if it is one the databases can hold; the record is the client's
    JSON, so anything else is taken as not named."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 1 <= value <= suite_fields.INTEGER_MAX else None


def _stored_turns(value: object) -> tuple[StoredTurn, ...]:
    if not isinstance(value, list):
        return ()
    turns: dict[int, StoredTurn] = {}
    for index, turn in enumerate(value, start=1):
        if not isinstance(turn, dict):
            continue
        number = _stored_id(turn.get("turn")) or index
        state = turn.get("state")
        passed = turn.get("passed")
        turns.setdefault(
            number,
            StoredTurn(
                number=number,
                turn_id=_stored_id(turn.get("id")),
                reply_id=_stored_id(turn.get("reply_id")),
                state=state if isinstance(state, str) and len(state) <= STATE_MAX else None,
                passed=passed if isinstance(passed, bool) else None,
            ),
        )
    return tuple(sorted(turns.values(), key=lambda turn: turn.number))


def shown_repeat(repeats: object) -> StoredRepeat | None:
    """The repeat a comparison shows of a case: its last failing one, else its last (None:
    the record keeps no repeat). A repeat fails when its record says `passed: false`."""
    records = [
        (index, record)
        for index, record in enumerate(repeats if isinstance(repeats, list) else [], start=1)
        if isinstance(record, dict)
    ]
    if not records:
        return None
    failing = [(index, record) for index, record in records if record.get("passed") is False]
    index, record = (failing or records)[-1]
    passed = record.get("passed")
    return StoredRepeat(
        number=_stored_id(record.get("repeat")) or index,
        thread=_stored_id(record.get("thread")),
        passed=passed if isinstance(passed, bool) else None,
        turns=_stored_turns(record.get("turns")),
    )


# --- reads ---------------------------------------------------------------------------------


def _both_runs(actor: Actor, *, run_id: object, other_id: object) -> tuple[SuiteRun, SuiteRun]:
    """The two runs of a comparison with their counts, both of the actor's business (else
    `not-found`) and not one run twice (`invalid`); silent runs halted first, as every
    suite-run verb does."""
    halt_silent_runs(actor.business_id)
    run = counted_suite_run(actor, run_id=run_id)
    other = counted_suite_run(actor, run_id=other_id)
    if run.pk == other.pk:
        raise Refusal(refusals.INVALID, "A run is compared with another run, not with itself.")
    return run, other


def _case_rows(run: SuiteRun) -> list[CaseRow]:
    """Every case of `run`, the columns a comparison reads: at most RUN_CASES_MAX small rows."""
    rows = SuiteCase.objects.filter(run=run).order_by("pk").values_list(*CASE_COLUMNS)
    return [CaseRow(*row) for row in rows.iterator(chunk_size=CASES_READ_AT_ONCE)]


@verb("suite_run.compare", counts_as="suite_run.read")
def compare_suite_runs(
    actor: Actor,
    *,
    run_id: object,
    other_id: object,
    same: bool = False,
    after: int | None = None,
    limit: int | None = None,
) -> SuiteComparison:
    """Run `run_id` compared with run `other_id`, both of the actor's business (else
    `not-found`; one run twice is `invalid`): how many cases each change counts, and a page
    of the cases (`limit`, default 100, at most 500) in ORDER, either every case but the
    `same` ones or (`same`) those alone; `after` is the last case of the page before (a
    compared case's `id`), `invalid` when it is none of this part."""
    size = fields.clean_limit(limit)
    cursor = fields.clean_cursor(after, what="after")
    run, other = _both_runs(actor, run_id=run_id, other_id=other_id)
    cases = compare_rows(
        _case_rows(run),
        _case_rows(other),
        alpha=run.alpha,
        as_recorded=run.baseline_id == other.pk,
    )
    counts = dict.fromkeys(ORDER, 0)
    for case in cases:
        counts[case.change] += 1
    part = [case for case in cases if (case.change == SuiteChange.SAME) == same]
    position = None
    if cursor is not None:
        position = next((at for at, case in enumerate(part) if case.id == cursor), None)
        if position is None:
            raise Refusal(
                refusals.INVALID, "The after cursor must be a case of this part of the comparison."
            )
    page, more = page_after(part, position=position, size=size)
    return SuiteComparison(run=run, other=other, counts=counts, cases=page, more=more)


def _readable(actor: Actor, repeat: StoredRepeat | None) -> StoredRepeat | None:
    """The repeat, `readable` when its thread is the actor's own (R1, `access_thread`): a
    thread since deleted, or not the tester's, leaves its texts unread, not the read refused."""
    if repeat is None or repeat.thread is None:
        return repeat
    try:
        access_thread(actor, thread_id=repeat.thread)
    except Refusal as refusal:
        if refusal.code not in (refusals.NOT_FOUND, refusals.THREAD_NOT_OWNED):
            raise
        return repeat
    return StoredRepeat(repeat.number, repeat.thread, repeat.passed, repeat.turns, readable=True)


def _bodies(repeat: StoredRepeat | None, turns: Sequence[StoredTurn | None]) -> dict[int, str]:
    """The texts of `turns` and their replies, read from the repeat's own thread only."""
    if repeat is None or not repeat.readable or repeat.thread is None:
        return {}
    ids = {
        message
        for turn in turns
        if turn is not None
        for message in (turn.turn_id, turn.reply_id)
        if message is not None
    }
    if not ids:
        return {}
    rows = Message.objects.filter(thread_rows.in_thread(repeat.thread), pk__in=ids)
    return dict(rows.values_list("pk", "body"))


def _texts(turn: StoredTurn | None, bodies: dict[int, str]) -> TurnTexts | None:
    if turn is None:
        return None
    return TurnTexts(
        sent=None if turn.turn_id is None else bodies.get(turn.turn_id),
        reply=None if turn.reply_id is None else bodies.get(turn.reply_id),
        state=turn.state,
        passed=turn.passed,
    )


def _text_size(turn: ComparedTurn) -> int:
    """A turn's texts, measured as `suite_fields.record_size` measures a record."""
    sides = (turn.now, turn.other)
    return len(json.dumps([[side.sent, side.reply] for side in sides if side is not None]))


def _turns_side_by_side(
    now: StoredRepeat | None, other: StoredRepeat | None, *, after: int | None
) -> Iterator[ComparedTurn]:
    """Both repeats' turns by number, after turn `after`, their texts read TURNS_READ_AT_ONCE
    turns at a time, so a page that ends early has read little past its end."""
    mine = {turn.number: turn for turn in now.turns} if now else {}
    theirs = {turn.number: turn for turn in other.turns} if other else {}
    numbers = sorted(
        number for number in mine.keys() | theirs.keys() if after is None or number > after
    )
    for start in range(0, len(numbers), TURNS_READ_AT_ONCE):
        chunk = numbers[start : start + TURNS_READ_AT_ONCE]
        here = [mine.get(number) for number in chunk]
        there = [theirs.get(number) for number in chunk]
        my_bodies, their_bodies = _bodies(now, here), _bodies(other, there)
        for number, turn, counterpart in zip(chunk, here, there, strict=True):
            yield ComparedTurn(number, _texts(turn, my_bodies), _texts(counterpart, their_bodies))


@verb("suite_run.compare_case", counts_as="suite_run.read")
def compare_suite_case(
    actor: Actor,
    *,
    run_id: object,
    other_id: object,
    case_id: object,
    after: int | None = None,
    limit: int | None = None,
) -> CaseReplies:
    """Case `case_id` of run `run_id` (else `not-found`) beside the same (suite, case, instance)
    of run `other_id`: its change, the repeat `shown_repeat` picks of each, and a page of their
    turns side by side by number, each with what was sent and its reply as the repeat's
    thread holds them (R1: the tester's own threads only). `after` is the last turn number of
    the page before; a page holds `limit` turns (default 100, at most 500) or fewer, ending
    before a turn whose texts would take it past RUN_PAGE_SIZE_MAX (one turn at least)."""
    size = fields.clean_limit(limit)
    cursor = fields.clean_cursor(after, what="after")
    run, other = _both_runs(actor, run_id=run_id, other_id=other_id)
    found = (
        SuiteCase.objects.filter(run=run, pk=suite_fields.clean_run_id(case_id, what="case"))
        .defer("failures")
        .first()
    )
    if found is None:
        raise Refusal(refusals.NOT_FOUND, "No such case in this suite run.")
    counterpart = (
        SuiteCase.objects.filter(
            run=other, suite=found.suite, case=found.case, instance=found.instance
        )
        .defer("failures")
        .first()
    )
    case = compared(
        CaseRow.of(found),
        None if counterpart is None else CaseRow.of(counterpart),
        alpha=run.alpha,
        as_recorded=run.baseline_id == other.pk,
    )
    now = _readable(actor, shown_repeat(found.attempts))
    then = None if counterpart is None else _readable(actor, shown_repeat(counterpart.attempts))
    turns: list[ComparedTurn] = []
    taken = 0
    more = False
    for turn in _turns_side_by_side(now, then, after=cursor):
        measured = _text_size(turn)
        if len(turns) == size or (turns and taken + measured > suite_fields.RUN_PAGE_SIZE_MAX):
            more = True
            break
        turns.append(turn)
        taken += measured
    return CaseReplies(case=case, now=now, other=then, turns=turns, more=more)
