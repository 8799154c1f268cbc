"""A compared test run case by case (`tester/suites/comparison.py`) and its section of the HTML
page (`comparison_html.py`), from reports and stored records built by hand, the listener a
stand-in that answers from a table and counts what it was asked (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from tester.suites import client as client_module
from tester.suites import comparison
from tester.suites.client import ListenerError, TesterClient
from tester.suites.comparison import (
    Compared,
    Said,
    Side,
    StoredRepeat,
    compared_cases,
    evidence,
    paired,
    read_comparison,
    shown_repeat,
    stored_case,
)
from tester.suites.html_report import page
from tester.suites.runner import TestRun
from tests.support.comparisons import HOSTILE, compared_run, repeat, report
from tests.support.html_outline import outline


def record(name: str, repeats: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    """A case as `GET /api/suite-runs/ID` serves it."""
    passed = sum(bool(r["passed"]) for r in repeats)
    return {
        "id": more.pop("id", 1),
        "suite": "smoke",
        "case": name,
        "instance": "alpha",
        "verdict": "pass" if passed == len(repeats) else "fail",
        "passed_runs": passed,
        "runs": len(repeats),
        "failures": more.pop("failures", []),
        "repeats": repeats,
        **more,
    }


def stored_repeat(number: int, thread: int, *turn_ids: int, passed: bool) -> dict[str, Any]:
    return {
        "repeat": number,
        "thread": thread,
        "passed": passed,
        "error": None,
        "detail": None,
        "failed_turn": None if passed else len(turn_ids),
        "turns": [
            {"turn": index, "id": turn_id, "reply_id": turn_id + 1, "state": "answered"}
            for index, turn_id in enumerate(turn_ids, start=1)
        ],
    }


def test_shown_repeat_is_the_last_that_did_not_pass_else_the_last() -> None:
    assert shown_repeat([repeat(1, "a"), repeat(2, "b", missed=1), repeat(3, "c")]).number == 2
    failing = [repeat(1, "a", missed=1), repeat(2, "b"), repeat(3, "c", missed=1)]
    assert shown_repeat(failing).number == 3
    assert shown_repeat([repeat(1, "a"), repeat(2, "b")]).number == 2
    assert shown_repeat([]) is None


def test_stored_case_reads_the_record_and_tells_why_a_repeat_did_not_pass() -> None:
    made = stored_case(
        record(
            "greets",
            [
                stored_repeat(1, 70, 10, passed=True),
                stored_repeat(2, 71, 20, 22, passed=False),
                {"repeat": 3, "thread": 72, "passed": False, "error": "judge", "detail": "no vote"},
            ],
            failures=[{"repeat": 2, "turn": 2, "expected": "Paris", "actual": "Lyon."}],
        )
    )
    assert (made.key, made.verdict, made.passed, made.runs) == (
        ("smoke", "greets", "alpha"),
        "fail",
        1,
        3,
    )
    second, third = made.repeats[1], made.repeats[2]
    assert [(t.number, t.turn_id, t.reply_id) for t in second.turns] == [(1, 20, 21), (2, 22, 23)]
    assert (second.thread, second.failed_turn, second.why) == (71, 2, "expected Paris; got “Lyon.”")
    # A record trimmed to fit keeps no turns; an error says itself.
    assert (third.turns, third.why) == ((), "judge: no vote")


def test_stored_case_of_an_older_client_without_repeats_has_none() -> None:
    made = stored_case(record("greets", []) | {"repeats": None, "passed_runs": 2, "runs": 2})
    assert made.repeats == ()


def test_compared_cases_put_regressions_first_and_the_same_last() -> None:
    """The groups in the order a reviewer reads them; each in the order the cases ran; a
    baseline case this run lacks is `missing`; a report never stored comes last."""
    reports = [
        report("a same", "same", repeat(1, "x")),
        report("b fixed", "fixed", repeat(1, "x")),
        report("c regressed", "regressed", repeat(1, "x", missed=1)),
        report("d unknown", None, repeat(1, "x")),
        report("e new", "new", repeat(1, "x")),
        report("f changed", "changed", repeat(1, "x")),
        report("g regressed", "regressed", repeat(1, "x", missed=1)),
    ]
    stored = [stored_case(record(name, [])) for name in ("a same", "gone", "c regressed")]
    found = compared_cases(reports, stored)
    assert [(case.change, name(case)) for case in found] == [
        ("regressed", "c regressed"),
        ("regressed", "g regressed"),
        ("fixed", "b fixed"),
        ("changed", "f changed"),
        ("new", "e new"),
        ("missing", "gone"),
        ("same", "a same"),
        ("not-stored", "d unknown"),
    ]
    assert found[0].baseline is stored[2] and found[1].baseline is None


def name(case: Compared) -> str:
    if case.report is not None:
        return case.report.plan.case.name
    assert case.baseline is not None
    return case.baseline.case


@pytest.mark.parametrize(
    ("change", "p", "before", "told"),
    [
        ("regressed", 1 / 70, (4, 4), "p = 0.014"),
        ("fixed", 0.0286, (0, 4), "p = 0.029"),
        ("same", 0.2, (3, 4), "within noise (p = 0.2)"),
        ("same", 1.0, (1, 1), "the same pass rate"),
        ("changed", None, (4, 4), "not compared: its definition changed"),
        ("new", None, None, "not in the baseline"),
    ],
)
def test_evidence_tells_the_p_value_or_why_there_is_none(
    change: str, p: float | None, before: tuple[int, int] | None, told: str
) -> None:
    made = report("greets", change, repeat(1, "x"), p=p)
    made.baseline_tally = before
    assert evidence(Compared(change, made, None)) == told
    assert evidence(Compared("missing", None, stored_case(record("x", [])))) == (
        "not in this test run"
    )


def test_paired_lines_up_the_turns_by_number() -> None:
    said = [Said(n, f"s{n}", f"r{n}", "answered") for n in (1, 2, 3)]
    before = Side(4, 70, True, tuple(said[:2]))
    now = Side(2, 80, False, (said[0], said[2]))
    assert paired(before, now) == [
        (1, said[0], said[0]),
        (2, said[1], None),
        (3, None, said[2]),
    ]
    assert paired(None, now) == [(1, None, said[0]), (3, None, said[2])]


class Listener:
    """`TesterClient`'s reads of a baseline, answered from a table; what was asked, kept."""

    def __init__(self, pages: list[list[dict[str, Any]]], threads: dict[int, list[dict[str, Any]]]):
        self.pages = pages
        self.threads = threads
        self.asked: list[str] = []

    def stored_cases(self, run_id: int) -> tuple[list[dict[str, Any]], bool]:
        self.asked.append(f"run {run_id}")
        return [case for page in self.pages for case in page], True

    def message_page(self, thread_id: int, *, after: int) -> list[dict[str, Any]]:
        self.asked.append(f"thread {thread_id} after {after}")
        if thread_id not in self.threads:
            raise ListenerError("not-found", "No thread.")
        return [m for m in self.threads[thread_id] if m["id"] > after]


def messages(*texts: tuple[int, str]) -> list[dict[str, Any]]:
    return [{"id": message_id, "body": body} for message_id, body in texts]


def test_read_comparison_shows_each_changed_case_beside_the_baselines_repeat() -> None:
    """The regression's failing repeat beside the baseline's last repeat (all passed), the
    fix's last repeat beside the baseline's last failing one, each read from its thread; the
    same case has no sides and costs no read."""
    regressed = report(
        "capital", "regressed", repeat(1, "Paris."), repeat(2, "Marseille.", missed=1)
    )
    fixed = report("weather", "fixed", repeat(1, "Sunny."), repeat(2, "Sunny."))
    same = report("greets", "same", repeat(1, "Hi."))
    listener = Listener(
        [
            [
                record("capital", [stored_repeat(1, 70, 10, passed=True)], id=1),
                record("greets", [stored_repeat(1, 71, 30, passed=True)], id=2),
            ],
            [
                record(
                    "weather",
                    [stored_repeat(1, 72, 40, passed=False), stored_repeat(2, 73, 50, passed=True)],
                    id=3,
                )
            ],
        ],
        {
            70: messages((10, "ask 1"), (11, "Paris.")),
            72: messages((40, "ask 1"), (41, "Rain.")),
        },
    )
    told = read_comparison(listener, [same, fixed, regressed], baseline=9)  # type: ignore[arg-type]
    assert listener.asked == ["run 9", "thread 70 after 9", "thread 72 after 39"]
    first, second, third = told.cases
    assert (first.change, second.change, third.change) == ("regressed", "fixed", "same")
    assert first.before is not None and first.now is not None
    assert [(n, b and b.reply, w and w.reply) for n, b, w in paired(first.before, first.now)] == [
        (1, "Paris.", "Marseille.")
    ]
    assert (first.now.repeat, first.now.passed, first.now.turns[0].missed) == (2, False, True)
    assert first.now.why == "expected the reply contains 'Paris'; got “Marseille.”"
    assert second.before is not None and (second.before.repeat, second.before.passed) == (1, False)
    assert second.before.turns[0] == Said(1, "ask 1", "Rain.", "answered", missed=True)
    assert third.before is None and third.now is None
    assert told.notes == ()


def test_read_comparison_tells_what_it_could_not_read() -> None:
    """A thread no longer there, a record without turns, and a refused read of the cases: each
    said where it is missing, never raised."""
    regressed = report("capital", "regressed", repeat(1, "Marseille.", missed=1))
    trimmed = report("trimmed", "regressed", repeat(1, "Marseille.", missed=1))
    listener = Listener(
        [
            [
                record("capital", [stored_repeat(1, 70, 10, passed=True)]),
                record("trimmed", [stored_repeat(1, 71, passed=True)]),
            ]
        ],
        {},
    )
    told = read_comparison(listener, [regressed, trimmed], baseline=9)  # type: ignore[arg-type]
    gone, kept_none = told.cases
    assert gone.before is not None and gone.before.unread == (
        "its thread 70 could not be read (not-found: No thread.)"
    )
    assert kept_none.before is not None
    assert kept_none.before.unread == "the stored record keeps no turns of this repeat"

    class Refusing(Listener):
        def stored_cases(self, run_id: int) -> tuple[list[dict[str, Any]], bool]:
            raise ListenerError("not-found", "No such run.")

    told = read_comparison(Refusing([], {}), [regressed], baseline=9)  # type: ignore[arg-type]
    assert told.notes == ("the cases of run 9 could not be read (not-found: No such run.)",)
    assert [case.change for case in told.cases] == ["regressed"]
    assert told.cases[0].before is None and told.cases[0].now is not None


def test_read_comparison_reads_at_most_side_by_side_max_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(comparison, "SIDE_BY_SIDE_MAX", 2)
    reports = [report(f"c{n}", "regressed", repeat(1, "no", missed=1)) for n in range(4)]
    records = [record(f"c{n}", [stored_repeat(1, 70 + n, 10, passed=True)]) for n in range(4)]
    listener = Listener([records], {70 + n: messages((10, "ask"), (11, "yes")) for n in range(4)})
    told = read_comparison(listener, reports, baseline=9)  # type: ignore[arg-type]
    assert len([asked for asked in listener.asked if asked.startswith("thread")]) == 2
    assert [case.before is not None for case in told.cases] == [True, True, False, False]
    assert told.notes == (
        "the baseline's replies are shown for the first 2 changed cases, not for the 2 after them",
    )


def test_stored_cases_reads_pages_until_the_last_and_at_most_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages follow the last case's id; a run that never ends is read `pages` pages deep."""
    asked: list[str] = []

    def answer(self: TesterClient, method: str, path: str, *args: Any) -> tuple[int, Any]:
        asked.append(path)
        after = int(path.rsplit("after=", 1)[1])
        more = after < 4 if "/7?" in path else True
        return 200, {"run": {}, "cases": [{"id": after + 1}, {"id": after + 2}], "more": more}

    monkeypatch.setattr(TesterClient, "request", answer)
    client = TesterClient("http://127.0.0.1:9")
    cases, complete = client.stored_cases(7)
    assert ([case["id"] for case in cases], complete) == ([1, 2, 3, 4, 5, 6], True)
    assert asked == [
        f"/api/suite-runs/7?limit={client_module.PAGE}&after={after}" for after in (0, 2, 4)
    ]
    cases, complete = client.stored_cases(8, pages=3)
    assert (len(cases), complete) == (6, False)
    assert client_module.STORED_PAGES_MAX == 40


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
    assert "4/4 → 0/1 fail · p = 0.014" in text
    assert "within noise" not in text and "the same pass rate" in text


def test_html_comparison_shows_the_replies_side_by_side_as_text() -> None:
    """The baseline's reply on the left, this run's on the right, in the same turn's pair; a
    hostile reply is text: no script, no image, its escape sequence kept for the reader."""
    text = compared_page()
    found = outline(text)
    regressed, fixed = found.cases[:2]
    assert "Paris." in regressed.texts["before"] and HOSTILE in regressed.texts["now"]
    assert "Rain." in fixed.texts["before"] and "Sunny." in fixed.texts["now"]
    assert "Paris." not in regressed.texts["now"] and HOSTILE not in found.texts("before")
    assert "script" not in found.tags and "img" not in found.tags
    assert '<div class="said assistant missed">Rain.</div>' in text
    assert "run 9, repeat 1: did not pass · thread 72" in text
    assert 'href="#case-2"><span class="name">smoke · capital</span></a>' in text
    assert 'id="case-2"' in text


def test_html_without_comparison_has_no_section() -> None:
    made = report("greets", None, repeat(1, "Hi."))
    test_run = TestRun(reports=[made])
    assert 'id="compared"' not in page(test_run, [made.plan], run_id=3, baseline=None)


def test_before_side_tells_a_reply_not_read_apart_from_one_never_given() -> None:
    """A baseline turn whose reply is not among the messages read is `not read`; one that got
    no reply keeps its stored state."""
    turns = (
        comparison.StoredTurn(1, 10, 11, "answered", False),
        comparison.StoredTurn(2, 12, None, "failed", True),
    )
    stored = StoredRepeat(2, 70, False, 1, turns, "x")
    read = {10: {"id": 10, "body": "hello"}, 12: {"id": 12, "body": "again"}}
    assert comparison.before_side(stored, read).turns == (
        Said(1, "hello", None, comparison.NOT_READ, missed=True),
        Said(2, "again", None, "failed", regenerated=True),
    )
