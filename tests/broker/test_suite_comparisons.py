"""Two stored test runs compared (`broker.actions.suite_comparisons`): every case of either run
with its change, regressions first; against the run's own baseline the change each case stored,
against any other run the same rule (`case_change`, Fisher's test) at the run's alpha; and a
case's replies side by side, read from the tester's own threads only (R1), a page at a time.
"""

from __future__ import annotations

from typing import Any

import pytest

from broker import actions, refusals, suite_fields
from broker.actions import suite_comparisons, suite_runs
from broker.actions.suite_comparisons import MISSING, CaseRow, compare_rows, shown_repeat
from broker.actors import Actor
from broker.models import Business, SuiteChange, SuiteRun, SuiteVerdict, Thread
from broker.refusals import Refusal
from broker.significance import Tally, drop_p_value
from tests.broker import factories

PASS, FLAKY, FAIL = SuiteVerdict.PASS, SuiteVerdict.FLAKY, SuiteVerdict.FAIL


def row(id: int, case: str, verdict: str, passed: int, runs: int, **more: Any) -> CaseRow:
    values: dict[str, Any] = {
        "suite": "smoke",
        "case": case,
        "instance": "assistant",
        "verdict": verdict,
        "passed_runs": passed,
        "runs": runs,
        "definition_hash": "",
        "change": SuiteChange.NEW,
        "p_value": None,
    }
    return CaseRow(id=id, **{**values, **more})


def record(tester: Actor, run: SuiteRun, case: str, passed: int, runs: int, **more: Any) -> int:
    """`smoke · case` with `passed` of `runs` repeats: pass when all passed, else fail."""
    verdict = PASS if passed == runs else FAIL
    stored = suite_runs.record_suite_case(
        tester,
        run_id=run.pk,
        suite="smoke",
        case=case,
        instance=more.pop("instance", ""),
        verdict=verdict,
        passed_runs=passed,
        runs=runs,
        **more,
    )
    return stored.pk


def ended(tester: Actor, cases: list[tuple[str, int, int]], compare: int | None = None) -> SuiteRun:
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare=compare)
    for case, passed, runs in cases:
        record(tester, run, case, passed, runs)
    return suite_runs.end_suite_run(tester, run_id=run.pk)


def compare(tester: Actor, run: SuiteRun, other: SuiteRun, **query: Any) -> Any:
    return suite_comparisons.compare_suite_runs(tester, run_id=run.pk, other_id=other.pk, **query)


# --- the order and the rule ------------------------------------------------------------------


def test_compare_rows_puts_regressions_first_and_same_last() -> None:
    """Regressed, fixed, changed, new, missing, same; within each change by id."""
    mine = [
        row(11, "same", PASS, 5, 5),
        row(12, "new", PASS, 1, 1),
        row(13, "regressed", FAIL, 0, 5),
        row(14, "fixed", PASS, 5, 5),
        row(15, "changed", PASS, 5, 5, definition_hash="b" * 64),
        row(16, "also regressed", FAIL, 0, 5),
    ]
    theirs = [
        row(1, "same", PASS, 5, 5),
        row(2, "regressed", PASS, 5, 5),
        row(3, "fixed", FAIL, 0, 5),
        row(4, "changed", FAIL, 0, 5, definition_hash="a" * 64),
        row(5, "missing", PASS, 1, 1),
        row(6, "also regressed", PASS, 5, 5),
    ]
    found = compare_rows(mine, theirs, alpha=0.05, as_recorded=False)
    assert [(case.row.case, case.change) for case in found] == [
        ("regressed", SuiteChange.REGRESSED),
        ("also regressed", SuiteChange.REGRESSED),
        ("fixed", SuiteChange.FIXED),
        ("changed", SuiteChange.CHANGED),
        ("new", SuiteChange.NEW),
        ("missing", MISSING),
        ("same", SuiteChange.SAME),
    ]
    regressed = found[0]
    assert (regressed.id, regressed.now, regressed.other) == (13, mine[2], theirs[1])
    assert regressed.p_value == float(drop_p_value(Tally(5, 5), Tally(0, 5)))
    missing = found[5]
    assert (missing.id, missing.now, missing.other, missing.p_value) == (5, None, theirs[4], None)


def test_compare_rows_as_recorded_reads_the_stored_change() -> None:
    """Against the run's own baseline the stored change and p-value are the answer, even where
    the rule today would say otherwise (a record of an older rule)."""
    mine = [row(11, "greets", FAIL, 0, 3, change=SuiteChange.REGRESSED, p_value=0.05)]
    theirs = [row(1, "greets", PASS, 3, 3)]
    [recorded] = compare_rows(mine, theirs, alpha=0.05, as_recorded=True)
    assert (recorded.change, recorded.p_value) == (SuiteChange.REGRESSED, 0.05)
    [computed] = compare_rows(mine, theirs, alpha=0.05, as_recorded=False)
    assert (computed.change, computed.p_value) == (SuiteChange.SAME, 0.05)


def test_shown_repeat_is_the_last_failing_else_the_last() -> None:
    repeats = [
        {"repeat": 1, "passed": False, "thread": 7},
        {"repeat": 2, "passed": False, "thread": 8},
        {"repeat": 3, "passed": True, "thread": 9},
    ]
    shown = shown_repeat(repeats)
    assert shown is not None and (shown.number, shown.thread, shown.passed) == (2, 8, False)
    passed = shown_repeat([{**repeat, "passed": True} for repeat in repeats])
    assert passed is not None and (passed.number, passed.thread) == (3, 9)
    assert shown_repeat([]) is None


@pytest.mark.parametrize(
    "repeats",
    [
        None,
        "text",
        [1, "two", None],
        [{"repeat": True, "thread": 2**64, "passed": "no", "turns": "none"}],
        [{"turns": [None, {"turn": -1, "id": "5", "reply_id": 1.5, "state": "x" * 41}]}],
    ],
    ids=["null", "text", "no objects", "bad values", "bad turns"],
)
def test_shown_repeat_of_a_malformed_record_takes_nothing_it_cannot_use(repeats: Any) -> None:
    """A record's repeats are the client's JSON: what is not an id, a flag or a short state is
    taken as not said, never trusted nor refused."""
    shown = shown_repeat(repeats)
    if shown is None:
        return
    assert (shown.number, shown.thread, shown.passed) == (1, None, None)
    for turn in shown.turns:
        assert (turn.turn_id, turn.reply_id, turn.state, turn.passed) == (None, None, None, None)


# --- two runs compared -----------------------------------------------------------------------


def test_compare_with_the_baseline_answers_the_stored_changes_and_counts(tester: Actor) -> None:
    """Run 2 against its baseline: greets regressed, refuses fixed, remembers new, forgets
    missing, thanks the same; the same case apart, asked for with `same`."""
    first = ended(
        tester, [("greets", 10, 10), ("refuses", 0, 5), ("forgets", 1, 1), ("thanks", 3, 3)]
    )
    second = ended(
        tester,
        [("thanks", 3, 3), ("greets", 2, 10), ("refuses", 5, 5), ("remembers", 1, 1)],
        compare=first.pk,
    )
    found = compare(tester, second, first)
    assert found.counts == {
        "regressed": 1,
        "fixed": 1,
        "changed": 0,
        "new": 1,
        "missing": 1,
        "same": 1,
    }
    assert [(case.row.case, case.change) for case in found.cases] == [
        ("greets", "regressed"),
        ("refuses", "fixed"),
        ("remembers", "new"),
        ("forgets", "missing"),
    ]
    assert found.more is False
    stored = second.cases.get(case="greets")
    assert found.cases[0].p_value == stored.p_value
    same = compare(tester, second, first, same=True)
    assert [(case.row.case, case.change) for case in same.cases] == [("thanks", "same")]


def test_compare_with_the_baseline_keeps_what_each_case_recorded(tester: Actor) -> None:
    """A baseline still recording when the run recorded greets: greets was `new` then, and the
    comparison with that baseline says so, as the run's own list does, though the baseline
    has greets now; against the same baseline taken as any other run, the rule decides
    afresh."""
    baseline = suite_runs.start_suite_run(tester, suites=["smoke"])
    run = suite_runs.start_suite_run(tester, suites=["smoke"], compare=baseline.pk)
    record(tester, run, "greets", 0, 5)
    record(tester, baseline, "greets", 5, 5)
    [recorded] = compare(tester, run, baseline).cases
    assert (recorded.change, recorded.other is not None) == (SuiteChange.NEW, True)
    found = suite_comparisons.compare_rows(
        [CaseRow.of(case) for case in run.cases.all()],
        [CaseRow.of(case) for case in baseline.cases.all()],
        alpha=run.alpha,
        as_recorded=False,
    )
    assert [case.change for case in found] == [SuiteChange.REGRESSED]


def test_compare_with_any_earlier_run_decides_by_the_same_rule(tester: Actor) -> None:
    """A run without a baseline compared with an earlier run: the broker's rule decides, at
    this run's alpha, as it would have had that run been its baseline."""
    first = ended(tester, [("greets", 10, 10), ("answers", 3, 3)])
    unrelated = ended(tester, [("greets", 2, 10), ("answers", 0, 3)])
    recorded = ended(tester, [("greets", 2, 10), ("answers", 0, 3)], compare=first.pk)
    found = compare(tester, unrelated, first)
    expected = compare(tester, recorded, first)
    assert [(case.row.case, case.change, case.p_value) for case in found.cases] == [
        (case.row.case, case.change, case.p_value) for case in expected.cases
    ]
    assert [case.change for case in found.cases] == ["regressed"]
    assert found.counts["same"] == 1


def test_compare_pages_each_part_after_a_compared_case(tester: Actor) -> None:
    first = ended(tester, [(f"case {n}", 5, 5) for n in range(5)])
    second = ended(tester, [(f"case {n}", 0, 5) for n in range(5)])
    page = compare(tester, second, first, limit=2)
    assert ([case.row.case for case in page.cases], page.more) == (["case 0", "case 1"], True)
    rest = compare(tester, second, first, limit=3, after=page.cases[-1].id)
    assert ([case.row.case for case in rest.cases], rest.more) == (
        ["case 2", "case 3", "case 4"],
        False,
    )
    with pytest.raises(Refusal) as refusal:
        compare(tester, second, first, same=True, after=page.cases[0].id)
    assert refusal.value.code == refusals.INVALID


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": 501}, {"after": -1}], ids=repr)
def test_compare_bad_query_is_invalid(tester: Actor, query: dict[str, int]) -> None:
    first, second = ended(tester, []), ended(tester, [])
    with pytest.raises(Refusal) as refusal:
        compare(tester, second, first, **query)
    assert refusal.value.code == refusals.INVALID


def test_compare_a_run_with_itself_is_invalid(tester: Actor) -> None:
    run = ended(tester, [])
    with pytest.raises(Refusal) as refusal:
        compare(tester, run, run)
    assert refusal.value.code == refusals.INVALID


def test_compare_with_another_business_run_is_not_found(
    tester: Actor, other_business: Business
) -> None:
    mine = ended(tester, [])
    theirs = ended(Actor.tester(business_id=other_business.pk), [])
    for run, other in ((mine, theirs), (theirs, mine)):
        with pytest.raises(Refusal) as refusal:
            compare(tester, run, other)
        assert refusal.value.code == refusals.NOT_FOUND


# --- a case's replies side by side ----------------------------------------------------------


def conversation(
    tester: Actor, run: Actor, thread: Thread, turns: list[tuple[str, str | None]]
) -> list[dict[str, Any]]:
    """The turns sent in `thread` and the replies to them (None: none came), as a repeat's
    record names them."""
    records = []
    for number, (sent, answer) in enumerate(turns, start=1):
        turn = actions.send_to_thread(tester, thread_id=thread.pk, body=sent).message
        reply = None if answer is None else factories.reply(run, turn, answer)
        records.append(
            {
                "turn": number,
                "id": turn.pk,
                "reply_id": None if reply is None else reply.pk,
                "state": "answered" if reply else "failed",
                "passed": True,
            }
        )
    return records


def repeat(number: int, thread: int, turns: list[dict[str, Any]], *, passed: bool) -> Any:
    """A repeat as the client's record keeps it."""
    return {"repeat": number, "thread": thread, "passed": passed, "turns": turns}


def record_repeats(
    tester: Actor, run: SuiteRun, name: str, passed: int, runs: int, *, thread: Thread, kept: Any
) -> int:
    """`smoke · name` on the assistant, in `thread`, its record keeping the repeats `kept`."""
    return record(
        tester, run, name, passed, runs, instance="assistant", threads=[thread.pk], attempts=kept
    )


@pytest.fixture
def project(human: Actor) -> Any:
    return factories.project(human)


def test_compare_case_shows_last_failing_repeats_turn_by_turn(
    tester: Actor, assistant_run: Actor, project: Any
) -> None:
    """The regressed case: this run's last failing repeat beside the baseline's last repeat
    (none failed there), each turn's sent text and both replies, read from their threads; a
    turn only one side had is there with the other side null."""
    before = factories.thread(tester, project, "before")
    failing = factories.thread(tester, project, "failing")
    later = factories.thread(tester, project, "later")
    old_turns = conversation(
        tester, assistant_run, before, [("hello", "Hello!"), ("task?", "Created")]
    )
    new_turns = conversation(
        tester, assistant_run, failing, [("hello", "Goodbye"), ("task?", None), ("more", "x")]
    )
    new_turns[0]["passed"] = False
    first = suite_runs.start_suite_run(tester, suites=["smoke"])
    record_repeats(
        tester,
        first,
        "greets",
        1,
        1,
        thread=before,
        kept=[repeat(1, before.pk, old_turns, passed=True)],
    )
    suite_runs.end_suite_run(tester, run_id=first.pk)
    second = suite_runs.start_suite_run(tester, suites=["smoke"], compare=first.pk)
    case_id = record_repeats(
        tester,
        second,
        "greets",
        1,
        2,
        thread=failing,
        kept=[
            repeat(1, failing.pk, new_turns, passed=False),
            repeat(2, later.pk, [], passed=True),
        ],
    )
    found = suite_comparisons.compare_suite_case(
        tester, run_id=second.pk, other_id=first.pk, case_id=case_id
    )
    assert found.case.change == SuiteChange.SAME
    assert found.now is not None and found.other is not None
    assert (found.now.number, found.now.thread, found.now.readable) == (1, failing.pk, True)
    assert (found.other.number, found.other.thread, found.other.passed) == (1, before.pk, True)
    shown = [
        (
            turn.turn,
            None if turn.other is None else (turn.other.sent, turn.other.reply),
            None if turn.now is None else (turn.now.sent, turn.now.reply, turn.now.state),
        )
        for turn in found.turns
    ]
    assert shown == [
        (1, ("hello", "Hello!"), ("hello", "Goodbye", "answered")),
        (2, ("task?", "Created"), ("task?", None, "failed")),
        (3, None, ("more", "x", "answered")),
    ]
    assert found.turns[0].now is not None and found.turns[0].now.passed is False
    page = suite_comparisons.compare_suite_case(
        tester, run_id=second.pk, other_id=first.pk, case_id=case_id, after=1, limit=1
    )
    assert ([turn.turn for turn in page.turns], page.more) == ([2], True)


def test_compare_case_reads_no_text_outside_the_testers_own_repeat_thread(
    human: Actor, tester: Actor, assistant_run: Actor, project: Any
) -> None:
    """R1: a record naming the human's thread, or a message of another thread, reads no text
    of it: the repeat is shown unreadable, the turn's texts null; nothing is refused."""
    mine = factories.thread(tester, project, "mine")
    theirs = factories.thread(human, project, "the human's")
    secret = actions.send_to_thread(human, thread_id=theirs.pk, body="the human's secret").message
    turns = conversation(tester, assistant_run, mine, [("hello", "Hello!")])
    stolen = [{**turns[0], "id": secret.pk}]
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    case_id = record_repeats(
        tester,
        run,
        "greets",
        0,
        2,
        thread=mine,
        kept=[
            # Its own thread, but a turn naming the human's message.
            repeat(1, mine.pk, stolen, passed=False),
            # The human's thread.
            repeat(2, theirs.pk, stolen, passed=False),
        ],
    )
    other = ended(tester, [])
    found = suite_comparisons.compare_suite_case(
        tester, run_id=run.pk, other_id=other.pk, case_id=case_id
    )
    assert found.now is not None and (found.now.thread, found.now.readable) == (theirs.pk, False)
    assert found.other is None
    [turn] = found.turns
    assert turn.now is not None and (turn.now.sent, turn.now.reply) == (None, None)

    run_two = suite_runs.start_suite_run(tester, suites=["smoke"])
    own = record_repeats(
        tester,
        run_two,
        "greets",
        0,
        1,
        thread=mine,
        kept=[repeat(1, mine.pk, stolen, passed=False)],
    )
    found = suite_comparisons.compare_suite_case(
        tester, run_id=run_two.pk, other_id=other.pk, case_id=own
    )
    [turn] = found.turns
    assert turn.now is not None and (turn.now.sent, turn.now.reply) == (None, "Hello!")


def test_compare_case_page_ends_before_the_size_bound(
    tester: Actor, assistant_run: Actor, project: Any
) -> None:
    """Turns of long texts: a page stops before a turn that would take it past
    RUN_PAGE_SIZE_MAX, and `more` says the rest follows; one turn at least."""
    thread = factories.thread(tester, project, "long")
    long = "y" * 30_000
    turns = conversation(tester, assistant_run, thread, [(f"turn {n}", long) for n in range(20)])
    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    case_id = record_repeats(
        tester, run, "long", 0, 1, thread=thread, kept=[repeat(1, thread.pk, turns, passed=False)]
    )
    other = ended(tester, [])
    seen: list[int] = []
    after = None
    while True:
        page = suite_comparisons.compare_suite_case(
            tester, run_id=run.pk, other_id=other.pk, case_id=case_id, after=after
        )
        size = sum(len(turn.now.reply or "") for turn in page.turns if turn.now)
        assert 0 < size <= suite_fields.RUN_PAGE_SIZE_MAX
        seen += [turn.turn for turn in page.turns]
        if not page.more:
            break
        after = seen[-1]
    assert seen == list(range(1, 21)) and len(seen) > len(page.turns)


def test_compare_case_of_another_run_is_not_found(tester: Actor) -> None:
    first = suite_runs.start_suite_run(tester, suites=["smoke"])
    elsewhere = record(tester, first, "greets", 1, 1)
    second = ended(tester, [])
    for case_id in (elsewhere, suite_fields.INTEGER_MAX):
        with pytest.raises(Refusal) as refusal:
            suite_comparisons.compare_suite_case(
                tester, run_id=second.pk, other_id=first.pk, case_id=case_id
            )
        assert refusal.value.code == refusals.NOT_FOUND
