"""A compared test run as the listener compares it, read for the `--html` page.

The listener holds every rule of a comparison (docs/decisions/run-comparison.md): each case's
change, the order a reviewer reads (regressions first), which repeat each side shows, how turns
are matched, and how much one answer holds. This module only reads its answers, the stored run
against its baseline: every compared case (`GET /api/suite-runs/ID/comparison/OTHER`, the
`same` ones last, at most COMPARISON_PAGES_MAX pages), then both runs' replies side by side for
each regressed, fixed or changed case (`…/cases/CASEID`, one page of turns each, for at most
SIDE_BY_SIDE_MAX cases). Both columns come from that one read, this run's as much as the
baseline's, so the page shows what the Console shows.

What could not be read (a refusal, a cut at a bound) is said where it is missing, never raised:
the report is written whatever was read, and the test run's status does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from .client import ListenerError, TesterClient

# The changes shown with both runs' replies: a case both runs have, and it moved or was edited.
SIDE_BY_SIDE = ("regressed", "fixed", "changed")
# The most cases whose replies are read (a request each).
SIDE_BY_SIDE_MAX = 50
# The most pages of compared cases read: each holds 500 small rows (no texts), and a comparison
# holds at most twice the 2,000 cases of a run, so this bound is only met by a listener that
# never says it is done.
COMPARISON_PAGES_MAX = 10

T = TypeVar("T")


@dataclass(frozen=True)
class Result:
    """One run's result of a compared case: its verdict and `k/N`."""

    verdict: str
    passed_runs: int
    runs: int

    @property
    def tally(self) -> tuple[int, int]:
        return (self.passed_runs, self.runs)


@dataclass(frozen=True)
class ShownRepeat:
    """The repeat the listener shows of one run's case; `readable`: its thread could be read."""

    repeat: int
    thread: int | None
    passed: bool | None
    readable: bool


@dataclass(frozen=True)
class TurnText:
    """One run's side of a turn: what was sent and the reply (None: not there, or not read),
    the turn's state and whether it passed (None: not said)."""

    sent: str | None
    reply: str | None
    state: str | None
    passed: bool | None


@dataclass(frozen=True)
class ComparedTurn:
    """A turn by number, each run's side (None: that run's shown repeat had no such turn)."""

    turn: int
    now: TurnText | None
    other: TurnText | None


@dataclass(frozen=True)
class Replies:
    """A case's replies side by side: each run's shown repeat (None: no repeat kept) and the
    first page of their turns; `more`: later turns were not read."""

    now: ShownRepeat | None
    other: ShownRepeat | None
    turns: tuple[ComparedTurn, ...]
    more: bool


@dataclass(frozen=True)
class ComparedCase:
    """A case of either run, as the listener compared it: its change from the baseline to this
    run, each run's result (None: not in that run), the p-value the change rests on; its
    replies once read, or why they are not shown (`unread`). `id` is this run's stored case
    (the baseline's for a `missing` one)."""

    id: int
    suite: str
    case: str
    instance: str
    change: str
    now: Result | None
    other: Result | None
    p_value: float | None
    replies: Replies | None = None
    unread: str | None = None

    @property
    def side_by_side(self) -> bool:
        return self.change in SIDE_BY_SIDE and self.now is not None and self.other is not None


@dataclass(frozen=True)
class Comparison:
    """Run `run` compared with run `baseline`: how many cases each change counts (all of them,
    whatever was read), the cases read in the listener's order, and what was not read."""

    run: int
    baseline: int
    counts: dict[str, int]
    cases: tuple[ComparedCase, ...]
    notes: tuple[str, ...] = ()


def read_comparison(client: TesterClient, *, run_id: int, baseline: int) -> Comparison:
    """Stored run `run_id` compared with run `baseline` by the listener: every case, a page at
    a time, then the replies of the first SIDE_BY_SIDE_MAX cases shown side by side."""
    counts, cases, notes = _compared_cases(client, run_id=run_id, baseline=baseline)
    read = []
    asked = 0
    for case in cases:
        if case.side_by_side and asked < SIDE_BY_SIDE_MAX:
            asked += 1
            case = _with_replies(client, case, run_id=run_id, baseline=baseline)
        elif case.side_by_side:
            case = replace(
                case,
                unread=f"not read: the replies of the first {SIDE_BY_SIDE_MAX} regressed, fixed "
                "or changed cases are read, and this case comes after them",
            )
        read.append(case)
    skipped = sum(case.side_by_side for case in cases) - asked
    if skipped:
        notes.append(
            f"the replies are shown for the first {SIDE_BY_SIDE_MAX} regressed, fixed or "
            f"changed cases, not for the {skipped} after them"
        )
    return Comparison(run_id, baseline, counts, tuple(read), tuple(notes))


def _compared_cases(
    client: TesterClient, *, run_id: int, baseline: int
) -> tuple[dict[str, int], list[ComparedCase], list[str]]:
    """The counts and every compared case, the `same` part after the rest, in at most
    COMPARISON_PAGES_MAX pages; and the notes of what was not read."""
    counts: dict[str, int] = {}
    cases: list[ComparedCase] = []
    pages = 0
    for same in (False, True):
        after: int | None = None
        while True:
            if pages == COMPARISON_PAGES_MAX:
                cut = (
                    f"only the first {len(cases)} of the {sum(counts.values())} compared cases "
                    f"were read ({COMPARISON_PAGES_MAX} pages): the rest are counted, not listed"
                )
                return counts, cases, [cut]
            pages += 1
            try:
                asked = partial(client.comparison_page, run_id, baseline, same=same, after=after)
                counts, found, more = _read(asked, _page)
            except ListenerError as refusal:
                whose = f"the comparison of this test run with run {baseline}"
                read = f"; {len(cases)} cases read before it" if cases else ""
                return counts, cases, [f"{whose} could not be read ({refusal}){read}"]
            cases += found
            if not more or not found:
                break
            after = found[-1].id
    return counts, cases, []


def _with_replies(
    client: TesterClient, case: ComparedCase, *, run_id: int, baseline: int
) -> ComparedCase:
    try:
        replies = _read(partial(client.compared_case, run_id, baseline, case.id), _replies)
    except ListenerError as refusal:
        return replace(case, unread=f"could not be read ({refusal})")
    return replace(case, replies=replies)


def _read(ask: Callable[[], Mapping[str, Any]], parse: Callable[[Mapping[str, Any]], T]) -> T:
    """An answer asked for and parsed; one in a shape this client does not read (a listener of
    another version) is refused like any read."""
    answer = ask()
    try:
        return parse(answer)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ListenerError(
            "unreadable", f"an answer this client does not read ({error!r})"
        ) from None


def _page(answer: Mapping[str, Any]) -> tuple[dict[str, int], list[ComparedCase], bool]:
    counts = {str(change): int(count) for change, count in answer["counts"].items()}
    return counts, [_compared_case(case) for case in answer["cases"]], bool(answer["more"])


def _replies(answer: Mapping[str, Any]) -> Replies:
    return Replies(
        now=_shown(answer["now"]),
        other=_shown(answer["other"]),
        turns=tuple(_turn(turn) for turn in answer["turns"]),
        more=bool(answer["more"]),
    )


def _compared_case(case: Mapping[str, Any]) -> ComparedCase:
    return ComparedCase(
        id=int(case["id"]),
        suite=str(case["suite"]),
        case=str(case["case"]),
        instance=str(case["instance"]),
        change=str(case["change"]),
        now=_result(case["now"]),
        other=_result(case["other"]),
        p_value=None if case["p_value"] is None else float(case["p_value"]),
    )


def _result(side: Mapping[str, Any] | None) -> Result | None:
    if side is None:
        return None
    return Result(str(side["verdict"]), int(side["passed_runs"]), int(side["runs"]))


def _shown(repeat: Mapping[str, Any] | None) -> ShownRepeat | None:
    if repeat is None:
        return None
    thread = repeat["thread"]
    return ShownRepeat(
        repeat=int(repeat["repeat"]),
        thread=None if thread is None else int(thread),
        passed=repeat["passed"],
        readable=bool(repeat["readable"]),
    )


def _turn(turn: Mapping[str, Any]) -> ComparedTurn:
    return ComparedTurn(int(turn["turn"]), _text(turn["now"]), _text(turn["other"]))


def _text(side: Mapping[str, Any] | None) -> TurnText | None:
    if side is None:
        return None
    return TurnText(side["sent"], side["reply"], side["state"], side["passed"])
