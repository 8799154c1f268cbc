"""A compared test run, case by case: what changed against the baseline, worst first, and each
changed case's replies beside the baseline's, turn by turn.

The listener decides each case's `change` and its p-value (SPEC §6.3); this module only orders
the cases (`CHANGES_IN_ORDER`: regressions first, the cases that stayed the same last), finds the
baseline's cases that this test run lacks (`missing`), and pairs the turns of one repeat of each
side: the last repeat that did not pass, else the last repeat (`shown_repeat`).

The baseline's stored records keep no texts (`reports.stored_record`: the texts stay in the
threads). So its cases are read a page at a time (`TesterClient.stored_cases`, at most
`STORED_PAGES_MAX` pages), and the sent texts and replies of the repeat shown are read from that
repeat's thread, one page of messages a case, for at most `SIDE_BY_SIDE_MAX` cases. What could
not be read (a refusal, a purged thread, a record trimmed to fit) is said where it is missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from .client import ListenerError, TesterClient
from .judge import quoted
from .reports import p_value_text, within_noise
from .runner import CaseReport, Repeat

REGRESSED = "regressed"
FIXED = "fixed"
CHANGED = "changed"
NEW = "new"
SAME = "same"
# A case of the baseline that this test run lacks: removed from its file since, or not run.
MISSING = "missing"
# A case of this test run whose record the listener did not store, so has no change.
NOT_STORED = "not-stored"
CHANGES_IN_ORDER = (REGRESSED, FIXED, CHANGED, NEW, MISSING, SAME, NOT_STORED)
# The changes shown with both sides' replies; `new` and `missing` have one side, and `same` is
# summarised.
SIDE_BY_SIDE = (REGRESSED, FIXED, CHANGED)
# The most cases whose baseline replies are read (a request each).
SIDE_BY_SIDE_MAX = 50
# The state of a baseline turn whose reply is not among the messages read.
NOT_READ = "not read"


@dataclass(frozen=True)
class Said:
    """One turn of a repeat: what was sent and what came (None: not read, or no reply, `state`
    telling why), and whether the repeat went wrong at it."""

    number: int
    sent: str | None
    reply: str | None
    state: str
    missed: bool = False
    regenerated: bool = False


@dataclass(frozen=True)
class Side:
    """One side's shown repeat: its number, thread, whether it passed and why not (`why`), and
    its turns; `unread` says why its turns are not there."""

    repeat: int
    thread: int | None
    passed: bool
    turns: tuple[Said, ...] = ()
    why: str | None = None
    unread: str | None = None


@dataclass(frozen=True)
class StoredTurn:
    number: int
    turn_id: int
    reply_id: int | None
    state: str
    regenerated: bool


@dataclass(frozen=True)
class StoredRepeat:
    number: int
    thread: int | None
    passed: bool
    failed_turn: int | None
    turns: tuple[StoredTurn, ...]
    why: str | None


@dataclass(frozen=True)
class StoredCase:
    """A case of the baseline as the listener stored it: `k/N` and its verdict, and its repeats
    without their texts."""

    suite: str
    case: str
    instance: str
    verdict: str
    passed: int
    runs: int
    repeats: tuple[StoredRepeat, ...]

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.suite, self.case, self.instance)


@dataclass(frozen=True)
class Compared:
    """One case of the comparison: its change, this test run's report (None: `missing`), the
    baseline's case (None: not in the baseline, or not read), and the two shown repeats."""

    change: str
    report: CaseReport | None
    baseline: StoredCase | None
    before: Side | None = None
    now: Side | None = None


@dataclass(frozen=True)
class Comparison:
    """A test run compared with run `baseline`: its cases in order, and what was not read."""

    baseline: int
    cases: tuple[Compared, ...]
    notes: tuple[str, ...] = ()

    def count(self, change: str) -> int:
        return sum(case.change == change for case in self.cases)


class HasPassed(Protocol):
    @property
    def passed(self) -> bool: ...


Shown = TypeVar("Shown", bound=HasPassed)


def shown_repeat(repeats: Sequence[Shown]) -> Shown | None:
    """The repeat a comparison shows: the last that did not pass, else the last."""
    for repeat in reversed(repeats):
        if not repeat.passed:
            return repeat
    return repeats[-1] if repeats else None


def key_of(report: CaseReport) -> tuple[str, str, str]:
    """A case as the stored history names it: suite, case and the instance it talked to."""
    return (report.plan.suite.name, report.plan.case.name, report.instance)


def miss_text(expected: object, actual: object) -> str:
    return f"expected {expected}; got {quoted(str(actual))}"


def stored_case(record: Mapping[str, Any]) -> StoredCase:
    """A case as `GET /api/suite-runs/ID` serves it. Its repeats are the client's own record
    (`reports.stored_repeats`), read leniently: a record of an older client, or one trimmed to
    fit, may lack what a newer one keeps."""
    failures = {
        failure.get("repeat"): miss_text(failure.get("expected"), failure.get("actual"))
        for failure in _dicts(record.get("failures"))
    }
    repeats = []
    for number, repeat in enumerate(_dicts(record.get("repeats")), start=1):
        number = _int(repeat.get("repeat")) or number
        error = repeat.get("error")
        why = f"{error}: {repeat.get('detail')}" if error else failures.get(number)
        turns = tuple(
            StoredTurn(
                number=_int(turn.get("turn")) or index,
                turn_id=_int(turn.get("id")) or 0,
                reply_id=_int(turn.get("reply_id")),
                state=str(turn.get("state") or "unknown"),
                regenerated=bool(turn.get("regenerate")),
            )
            for index, turn in enumerate(_dicts(repeat.get("turns")), start=1)
        )
        repeats.append(
            StoredRepeat(
                number=number,
                thread=_int(repeat.get("thread")),
                passed=bool(repeat.get("passed")),
                failed_turn=_int(repeat.get("failed_turn")),
                turns=turns,
                why=why,
            )
        )
    return StoredCase(
        suite=str(record["suite"]),
        case=str(record["case"]),
        instance=str(record["instance"]),
        verdict=str(record["verdict"]),
        passed=int(record["passed_runs"]),
        runs=int(record["runs"]),
        repeats=tuple(repeats),
    )


def _dicts(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def compared_cases(
    reports: Sequence[CaseReport], stored: Sequence[StoredCase]
) -> tuple[Compared, ...]:
    """Every case of the test run and every case of the baseline it lacks, in the order of
    `CHANGES_IN_ORDER`, each group in the order the cases ran (or were stored)."""
    baseline = {case.key: case for case in stored}
    found = [
        Compared(report.change or NOT_STORED, report, baseline.get(key_of(report)))
        for report in reports
    ]
    ran = {key_of(report) for report in reports}
    found += [Compared(MISSING, None, case) for case in stored if case.key not in ran]
    return tuple(sorted(found, key=lambda case: CHANGES_IN_ORDER.index(case.change)))


def before_tally(case: Compared) -> str:
    """The baseline's `k/N verdict` (`k/N` alone when only the listener's answer told it)."""
    if case.baseline is not None:
        return f"{case.baseline.passed}/{case.baseline.runs} {case.baseline.verdict}"
    if case.report is not None and case.report.baseline_tally is not None:
        passed, runs = case.report.baseline_tally
        return f"{passed}/{runs}"
    return "—"


def now_tally(case: Compared) -> str:
    report = case.report
    if report is None:
        return "—"
    return f"{report.passed_repeats}/{report.repeat_count} {report.verdict}"


def evidence(case: Compared) -> str:
    """What the change rests on: `p = 0.014`, `within noise (p = 0.2)`, or why there is none."""
    report = case.report
    if case.change == MISSING or report is None:
        return "not in this test run"
    if case.change in (REGRESSED, FIXED) and report.p_value is not None:
        return f"p = {p_value_text(report.p_value)}"
    if case.change == SAME:
        if within_noise(report) and report.p_value is not None:
            return f"within noise (p = {p_value_text(report.p_value)})"
        return "the same pass rate"
    if case.change == CHANGED:
        return "not compared: its definition changed"
    if case.change == NEW:
        return "not in the baseline"
    return "not compared: its record was not stored"


def now_side(report: CaseReport) -> Side | None:
    """This test run's shown repeat, with every text it holds."""
    repeat = shown_repeat(report.repeats)
    if repeat is None:
        return None
    turns = tuple(
        Said(
            number=turn.number,
            sent=turn.sent,
            reply=turn.outcome.reply.body if turn.outcome.reply is not None else None,
            state=turn.outcome.state,
            missed=turn.number == repeat.failed_turn,
            regenerated=turn.regenerated,
        )
        for turn in repeat.turns
    )
    return Side(repeat.number, repeat.thread, repeat.passed, turns, why=_why(repeat))


def _why(repeat: Repeat) -> str | None:
    if repeat.problem is not None:
        return str(repeat.problem)
    if repeat.failure is not None:
        return miss_text(repeat.failure.expected, repeat.failure.actual)
    return None


def before_side(repeat: StoredRepeat, messages: Mapping[int, Mapping[str, Any]]) -> Side:
    """The baseline's shown repeat, its texts taken from its thread's `messages` by id (a text
    not among them is None: not read)."""

    def body(message_id: int | None) -> str | None:
        message = messages.get(message_id) if message_id is not None else None
        return str(message["body"]) if message is not None else None

    def said(turn: StoredTurn) -> Said:
        reply = body(turn.reply_id)
        return Said(
            number=turn.number,
            sent=body(turn.turn_id),
            reply=reply,
            state=NOT_READ if reply is None and turn.reply_id is not None else turn.state,
            missed=turn.number == repeat.failed_turn,
            regenerated=turn.regenerated,
        )

    turns = tuple(said(turn) for turn in repeat.turns)
    return Side(repeat.number, repeat.thread, repeat.passed, turns, why=repeat.why)


def paired(before: Side | None, now: Side | None) -> list[tuple[int, Said | None, Said | None]]:
    """The two sides' turns by number: `(number, the baseline's, this run's)`, None where a side
    has no such turn."""
    sides = [{said.number: said for said in side.turns} if side else {} for side in (before, now)]
    numbers = sorted(set(sides[0]) | set(sides[1]))
    return [(number, sides[0].get(number), sides[1].get(number)) for number in numbers]


def read_comparison(
    client: TesterClient, reports: Sequence[CaseReport], *, baseline: int
) -> Comparison:
    """The test run compared with run `baseline`, read from the listener: its cases, then the
    replies of each shown repeat of the first SIDE_BY_SIDE_MAX cases that changed. A refusal is
    told in the comparison's notes, never raised: the report is written whatever was read."""
    notes = []
    try:
        records, complete = client.stored_cases(baseline)
    except ListenerError as refusal:
        records, complete = [], True
        notes.append(f"the cases of run {baseline} could not be read ({refusal})")
    if not complete:
        notes.append(
            f"only the first {len(records)} cases of run {baseline} were read: any later one "
            "this test run lacks is not listed, and later ones have no replies shown"
        )
    cases = compared_cases(reports, [stored_case(record) for record in records])
    read = unread = 0
    shown = []
    for case in cases:
        if case.change in SIDE_BY_SIDE and case.report is not None:
            before = None
            if case.baseline is not None and read < SIDE_BY_SIDE_MAX:
                read += 1
                before = read_before(client, case.baseline)
            elif case.baseline is not None:
                unread += 1
            case = replace(case, before=before, now=now_side(case.report))
        shown.append(case)
    if unread:
        notes.append(
            f"the baseline's replies are shown for the first {SIDE_BY_SIDE_MAX} changed cases, "
            f"not for the {unread} after them"
        )
    return Comparison(baseline, tuple(shown), tuple(notes))


def read_before(client: TesterClient, case: StoredCase) -> Side | None:
    """The baseline's shown repeat of `case` with its texts, read from its thread: one page of
    messages from its first turn. None when the record keeps no repeat."""
    repeat = shown_repeat(case.repeats)
    if repeat is None:
        return None
    side = before_side(repeat, {})
    if repeat.thread is None or not repeat.turns:
        return replace(side, unread="the stored record keeps no turns of this repeat")
    first = min(turn.turn_id for turn in repeat.turns)
    try:
        page = client.message_page(repeat.thread, after=first - 1)
    except ListenerError as refusal:
        return replace(side, unread=f"its thread {repeat.thread} could not be read ({refusal})")
    return before_side(repeat, {int(message["id"]): message for message in page})
