"""The `--html` comparison's reading of the listener's answers (`tester/suites/comparison.py`) and
its section of the page (`comparison_html.py`), the listener a stand-in that answers from a
table, refuses what it is told to and keeps what it was asked (pure). The rules those answers
follow are the listener's, pinned in tests/broker/test_suite_comparisons.py."""

from __future__ import annotations

from typing import Any

import pytest

from tester.suites import comparison
from tester.suites.client import PAGE, ListenerError, TesterClient
from tester.suites.comparison import read_comparison
from tester.suites.html_report import page
from tester.suites.runner import TestRun
from tests.support.comparisons import (
    HOSTILE,
    Listener,
    compared,
    compared_run,
    repeat,
    replies,
    report,
    said,
    shown,
)
from tests.support.html_outline import outline

HOSTILE_NAME = "p|q <img src=x onerror=alert(1)>"
COUNTS = {"regressed": 2, "fixed": 1, "changed": 0, "new": 1, "missing": 0, "same": 1}


def read(listener: Listener) -> comparison.Comparison:
    return read_comparison(listener, run_id=10, baseline=9)  # type: ignore[arg-type]


def test_read_comparison_follows_the_pages_and_keeps_the_listeners_order() -> None:
    """Every page of the changes, then the same ones, each after the last case read; the cases
    in the order served, not sorted again; the counts as the listener counted them."""
    listener = Listener(
        COUNTS,
        {
            False: [
                [compared(5, "b", "regressed", now=(0, 4), other=(4, 4), p=0.014)],
                [
                    compared(3, "a", "regressed", now=(0, 4), other=(4, 4), p=0.014),
                    compared(4, "c", "fixed", now=(4, 4), other=(0, 4), p=0.014),
                ],
                [compared(6, "d", "new", now=(1, 1), other=None)],
            ],
            True: [[compared(2, "e", "same", now=(4, 4), other=(4, 4), p=1.0)]],
        },
        {case_id: replies(None, None) for case_id in (3, 4, 5)},
    )
    told = read(listener)
    assert listener.asked[:5] == [
        "10/9 same=False after=None",
        "10/9 same=False after=5",
        "10/9 same=False after=4",
        "10/9 same=True after=None",
        "10/9 case 5",
    ]
    assert [(case.id, case.change) for case in told.cases] == [
        (5, "regressed"),
        (3, "regressed"),
        (4, "fixed"),
        (6, "new"),
        (2, "same"),
    ]
    assert told.counts == COUNTS and told.notes == ()


def test_read_comparison_asks_replies_of_the_cases_both_runs_have_that_moved() -> None:
    """Regressed, fixed and changed cases: one read each, both columns from it; a new, missing
    or same case costs no read."""
    listener = Listener(
        COUNTS,
        {
            False: [
                [
                    compared(1, "a", "regressed", now=(0, 4), other=(4, 4), p=0.014),
                    compared(2, "b", "changed", now=(4, 4), other=(0, 4)),
                    compared(3, "c", "new", now=(1, 1), other=None),
                    compared(8, "d", "missing", now=None, other=(1, 1)),
                ]
            ],
            True: [[compared(4, "e", "same", now=(4, 4), other=(4, 4), p=1.0)]],
        },
        {
            1: replies(
                shown(2, 80, passed=False),
                shown(4, 70, passed=True),
                (said("ask", "Marseille.", passed=False), said("ask", "Paris.")),
            ),
            2: replies(shown(1, 81, passed=True), shown(1, 71, passed=False)),
        },
    )
    told = read(listener)
    assert [asked for asked in listener.asked if "case" in asked] == ["10/9 case 1", "10/9 case 2"]
    first = told.cases[0].replies
    assert first is not None and first.now is not None and first.other is not None
    assert (first.now.repeat, first.now.passed, first.other.repeat) == (2, False, 4)
    assert [(turn.turn, turn.other, turn.now) for turn in first.turns] == [
        (
            1,
            comparison.TurnText("ask", "Paris.", "answered", True),
            comparison.TurnText("ask", "Marseille.", "answered", False),
        )
    ]
    assert [case.replies is None for case in told.cases] == [False, False, True, True, True]


def test_read_comparison_reads_the_replies_of_at_most_side_by_side_max_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(comparison, "SIDE_BY_SIDE_MAX", 2)
    cases = [compared(n, f"c{n}", "regressed", now=(0, 1), other=(1, 1)) for n in range(1, 5)]
    listener = Listener(COUNTS, {False: [cases]}, {n: replies(None, None) for n in range(1, 5)})
    told = read(listener)
    assert [asked for asked in listener.asked if "case" in asked] == ["10/9 case 1", "10/9 case 2"]
    assert [case.replies is not None for case in told.cases] == [True, True, False, False]
    assert told.cases[3].unread == (
        "not read: the replies of the first 2 regressed, fixed or changed cases are read, and "
        "this case comes after them"
    )
    assert told.notes == (
        "the replies are shown for the first 2 regressed, fixed or changed cases, not for the "
        "2 after them",
    )


def test_read_comparison_reads_at_most_comparison_pages_max_pages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listener that never says it is done is read COMPARISON_PAGES_MAX pages deep; the
    counts stay whole."""
    monkeypatch.setattr(comparison, "COMPARISON_PAGES_MAX", 3)
    pages = [[compared(n, f"c{n}", "new", now=(1, 1), other=None)] for n in range(1, 6)]
    listener = Listener({"new": 5, "same": 2}, {False: pages}, {})
    told = read(listener)
    assert len(listener.asked) == 3 and [case.id for case in told.cases] == [1, 2, 3]
    assert told.counts == {"new": 5, "same": 2}
    assert told.notes == (
        "only the first 3 of the 7 compared cases were read (3 pages): the rest are counted, "
        "not listed",
    )


def test_read_comparison_tells_what_it_could_not_read_in_place() -> None:
    """A refused comparison is a note and no case; a refused or unreadable case's replies are
    said in that case; nothing is raised."""
    refused = Listener(COUNTS, {}, {})
    refused.comparison_page = _refuse  # type: ignore[method-assign]
    told = read(refused)
    assert (told.cases, told.counts) == ((), {})
    assert told.notes == (
        "the comparison of this test run with run 9 could not be read "
        "(not-found: No such suite run.)",
    )
    listener = Listener(
        COUNTS,
        {
            False: [
                [
                    compared(1, "a", "regressed", now=(0, 1), other=(1, 1)),
                    compared(2, "b", "fixed", now=(1, 1), other=(0, 1)),
                ]
            ]
        },
        {1: ListenerError("unreachable", "down"), 2: {"turns": "no"}},
    )
    told = read(listener)
    first, second = told.cases
    assert first.replies is None and first.unread == "could not be read (unreachable: down)"
    assert second.replies is None and second.unread is not None
    assert second.unread.startswith("could not be read (unreadable: an answer this client")


def _refuse(*args: Any, **kwargs: Any) -> dict[str, Any]:
    raise ListenerError("not-found", "No such suite run.")


def test_client_reads_the_comparison_routes_of_the_stored_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def answer(self: TesterClient, method: str, path: str, *args: Any) -> tuple[int, Any]:
        asked.append(f"{method} {path}")
        return 200, {"cases": []}

    monkeypatch.setattr(TesterClient, "request", answer)
    client = TesterClient("http://127.0.0.1:9")
    client.comparison_page(10, 9, same=False, after=None)
    client.comparison_page(10, 9, same=True, after=31)
    client.compared_case(10, 9, 31)
    assert asked == [
        f"GET /api/suite-runs/10/comparison/9?limit={PAGE}",
        f"GET /api/suite-runs/10/comparison/9?limit={PAGE}&same=true&after=31",
        f"GET /api/suite-runs/10/comparison/9/cases/31?limit={PAGE}",
    ]


# --- the HTML section ----------------------------------------------------------------------


def compared_page() -> str:
    test_run, told = compared_run()
    plans = [report.plan for report in test_run.reports]
    return page(test_run, plans, run_id=10, baseline=9, comparison=told)


def test_html_comparison_comes_first_with_regressions_first() -> None:
    text = compared_page()
    found = outline(text)
    assert found.groups == ["regressed", "fixed", "missing", "same"]
    assert [(case.change, case.name) for case in found.cases] == [
        ("regressed", "smoke · capital"),
        ("fixed", "smoke · weather"),
        ("missing", "smoke · gone"),
        ("same", "smoke · greets"),
    ]
    # Before the table of every case.
    assert text.index('id="compared"') < text.index("<table><tr><th>case</th><th>verdict")
    assert "1 regressed, 1 fixed, 0 changed, 0 new, 1 not in this test run, 1 same" in text
    assert "4/4 pass → 0/1 fail · p = 0.014" in text
    assert "within noise" not in text and "the same pass rate" in text


def test_html_comparison_shows_the_replies_side_by_side_as_text() -> None:
    """The baseline's reply on the left, this run's on the right, in the same turn's pair; a
    hostile reply is text: no script, no image, its escape sequence kept for the reader."""
    text = compared_page()
    found = outline(text)
    regressed, fixed = found.cases[:2]
    assert regressed.texts["before"][-1] == "Paris." and regressed.texts["now"][-1] == HOSTILE
    assert "Rain." in fixed.texts["before"] and "Sunny." in fixed.texts["now"]
    assert "Paris." not in regressed.texts["now"] and HOSTILE not in found.texts("before")
    assert "script" not in found.tags and "img" not in found.tags
    assert '<div class="said assistant missed">Rain.</div>' in text
    assert "run 9, repeat 1: did not pass · thread 72" in text
    # Each of this run's cases links to its section below, found by its stored id.
    assert 'href="#case-2"><span class="name">smoke · capital</span></a>' in text
    assert 'id="case-2"' in text


def test_html_comparison_escapes_a_hostile_name_and_says_what_was_not_read() -> None:
    """A case's name is text; a thread that could not be read, a record without turns, turns
    past the page and replies not read are each said where the texts would be."""
    hostile = compared(1, HOSTILE_NAME, "regressed", now=(0, 2), other=(2, 2), p=0.1)
    listener = Listener(
        COUNTS,
        {
            False: [
                [
                    hostile,
                    compared(2, "trimmed", "regressed", now=(0, 1), other=(1, 1)),
                    compared(3, "refused", "fixed", now=(1, 1), other=(0, 1)),
                ]
            ]
        },
        {
            1: replies(
                shown(2, 80, passed=False),
                shown(2, 70, passed=True, readable=False),
                (said("ask", "Lyon.", passed=False), said(None, None)),
                more=True,
            ),
            2: replies(shown(1, 81, passed=False), shown(1, 71, passed=True)),
            3: ListenerError("not-found", "No such case in this suite run."),
        },
    )
    made = report("x", "regressed", repeat(1, "Lyon.", missed=1))
    text = page(
        TestRun(reports=[made]), [made.plan], run_id=10, baseline=9, comparison=read(listener)
    )
    found = outline(text)
    assert [case.name for case in found.cases] == [
        f"smoke · {HOSTILE_NAME}",
        "smoke · trimmed",
        "smoke · refused",
    ]
    assert "img" not in found.tags
    before = found.cases[0].texts["before"]
    assert "its thread could not be read (deleted since, or not the tester's)" in before
    assert before[-2:] == ["(not read)", "(reply not read)"]
    assert found.cases[1].texts["now"][-1] == "its record keeps no turns of this repeat"
    assert "The turns after turn 1 were not read." in text
    assert "The records keep no turns of these repeats." in text
    assert "The replies: could not be read (not-found: No such case in this suite run.)" in text
    # The case of this run the listener never stored is named, not compared.
    assert "not compared, their records not stored: smoke · x" in text


def test_html_without_comparison_has_no_section() -> None:
    made = report("greets", None, repeat(1, "Hi."))
    test_run = TestRun(reports=[made])
    assert 'id="compared"' not in page(test_run, [made.plan], run_id=3, baseline=None)
