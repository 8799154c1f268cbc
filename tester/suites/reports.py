"""How a test run is told: a line per case and a summary, JSON lines, JUnit XML.

Every case is one line or record per instance, with `k/N` (repeats passed of repeats run), its
verdict and, when the test run is compared with an earlier one, its change. The records sent to
the stored history (`stored_record`) are the JSON records without the conversation's texts:
those stay in the threads the record names.

Tokens and cost are told per case and per test run (`costs.Spend`): what is known, and how many
turns recorded no usage or have no price, never a zero in their place.

`--json` records and JUnit properties write `k` and `N` as `passed_repeats` and `repeat_count`,
and again, with the same values, under their deprecated names `passed_runs` and `runs`; the
stored record keeps the listener's names for them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from .costs import Spend, money, plain
from .judge import QUOTED, quoted
from .runner import (
    COST_LIMIT,
    ERROR,
    FAIL,
    FLAKY,
    PASS,
    VERDICTS,
    CaseReport,
    Plan,
    Repeat,
    TestRun,
    TurnRecord,
)
from .statistics import can_show_a_drop, repeats_to_show_a_drop, smallest_drop_p_value
from .steps import Step, describe_steps
from .visible import visible, visible_json

# The longest text of a failure (its sent text: STORED_SENT), and of a judge's reason, kept in
# the stored history; the thread and the --json report hold all of it.
STORED_TEXT = 2000
STORED_SENT = 500
STORED_REASON = 500
# What one case's stored record may hold of its texts: its failures and repeats together, as
# JSON written in ASCII (`record_size`). The listener refuses a record over it (the broker's
# CASE_RECORD_MAX, the same number, which a test holds equal), and a record within it fits the
# listener's default request limit. Failures take at most half of it.
STORED_RECORD = 200_000
# The error code a repeat keeps when nothing else of it fits, and how many failed repeats keep
# their turns when a case's repeats are too many for the record.
STORED_CODE = 40
STORED_FULL_MISSES = 10
# The longest arguments of a step kept in the stored history, as JSON text; longer ones are
# kept as that text, cut.
STORED_ARGUMENTS = 500
LABELS = {PASS: "PASS", FLAKY: "FLAKY", FAIL: "FAIL", ERROR: "ERROR"}
# The legacy `status` of a JSON record: a flaky case passed.
STATUS = {PASS: "passed", FLAKY: "passed", FAIL: "failed", ERROR: "error"}


def asked(turn: TurnRecord, limit: int = QUOTED) -> str:
    """A turn as a report names it: what it sent, shown; a regenerated turn `regenerate “…”`,
    the text it asked again."""
    told = quoted(turn.sent, limit)
    return f"regenerate {told}" if turn.regenerated else told


def clipped(text: str | None, limit: int = STORED_TEXT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def name_of(report: CaseReport, *, with_instance: bool) -> str:
    if with_instance and report.instance:
        return f"{report.title} [{report.instance}]"
    return report.title


def interval_text(report: CaseReport) -> str:
    """The pass rate's 95% interval in whole percents: `95% interval 44–100%`."""
    low, high = report.interval
    return f"95% interval {low * 100:.0f}–{high * 100:.0f}%"


def within_noise(report: CaseReport) -> bool:
    """The case is `same` though its pass rate moved: the move is not significant."""
    if report.change != "same" or report.baseline_tally is None:
        return False
    return rate_moved(report.baseline_tally, (report.passed_repeats, report.repeat_count))


def rate_moved(before: tuple[int, int], now: tuple[int, int]) -> bool:
    """Two `k/N` tallies are different pass rates (2/4 and 1/2 are one rate)."""
    return Fraction(*before) != Fraction(*now)


def p_value_text(p_value: float) -> str:
    """A p-value as every report writes it, to two significant digits: `0.014`."""
    return f"{p_value:.2g}"


def change_text(report: CaseReport) -> str:
    """The change as a person reads it: `regressed (p = 0.014 against 4/4)`, `same, within
    noise (p = 0.2 against 2/3)`, `changed: …`, `new`."""
    change = report.change or ""
    evidence = ""
    if report.p_value is not None:
        evidence = f"p = {p_value_text(report.p_value)}"
        if report.baseline_tally is not None:
            evidence += f" against {report.baseline_tally[0]}/{report.baseline_tally[1]}"
    if change in ("regressed", "fixed") and evidence:
        return f"{change} ({evidence})"
    if within_noise(report):
        return f"same, within noise ({evidence})"
    if change == "changed":
        return "changed: its definition is not the baseline's, so it is not compared"
    return change


def tally(report: CaseReport, *, compared: bool) -> str:
    """`k/N verdict` with the 95% interval, and the change when the test run is compared."""
    told = (
        f"{report.passed_repeats}/{report.repeat_count} {report.verdict}, {interval_text(report)}"
    )
    if compared and report.change:
        told += f" · {change_text(report)}"
    return told


def place(report: CaseReport, repeat: Repeat) -> str:
    """Where a repeat went wrong: `repeat R, turn N “sent”` (the repeat only when there are
    several); a problem at no turn in particular names the repeat only."""
    where = f"repeat {repeat.number}, " if report.repeat_count > 1 else ""
    if repeat.failed_turn is None:
        return f"{where}the conversation" if repeat.problem is None else where.rstrip(", ")
    turn = repeat.turns[repeat.failed_turn - 1]
    return f"{where}turn {repeat.failed_turn} {asked(turn, 60)}"


def miss(report: CaseReport) -> str:
    """Where the first repeat that did not pass went wrong, on one line."""
    repeat = report.first_miss
    if repeat is None:
        return ""
    if repeat.problem is not None:
        where = place(report, repeat)
        return f"{where}: {repeat.problem}" if where else str(repeat.problem)
    assert repeat.failure is not None
    return (
        f"{place(report, repeat)}: expected {repeat.failure.expected}; "
        f"got {quoted(repeat.failure.actual)}"
    )


def miss_lines(report: CaseReport) -> list[str]:
    """The same on several lines, what came in full (a pytest failure)."""
    repeat = report.first_miss
    if repeat is None or repeat.failure is None:
        return [miss(report)]
    return [
        place(report, repeat),
        f"expected: {repeat.failure.expected}",
        f"actual: {repeat.failure.actual}",
    ]


def line(report: CaseReport, *, with_instance: bool = False, compared: bool = False) -> str:
    """One line: its verdict, the case, where it first went wrong, `k/N verdict`, and, when its
    suite file prices models or a turn of it was priced, its tokens and cost (the summary tells
    them in any case)."""
    label = f"{LABELS[report.verdict]:<5}"
    name = name_of(report, with_instance=with_instance)
    spend = report.spend
    spent = f" · {spend.told()}" if report.plan.suite.pricing or spend.priced else ""
    if report.verdict == PASS:
        turns = max(len(repeat.turns) for repeat in report.repeats)
        return (
            f"{label} {name} ({turns} turn{'s' if turns != 1 else ''}) "
            f"· {tally(report, compared=compared)}{spent}"
        )
    return f"{label} {name}: {miss(report)} · {tally(report, compared=compared)}{spent}"


def not_run_line(plan: Plan, *, with_instance: bool = False) -> str:
    name = plan.title + (f" [{plan.instance}]" if with_instance and plan.instance else "")
    return f"SKIP  {name}: not run"


def too_few_repeats_note(planned: Sequence[Plan], alpha: float) -> str | None:
    """Said once, before a compared test run: its fewest repeats of a case, compared with as
    many, cannot make any drop significant at `alpha`; and the `repeat` that could. None when
    every case's repeats can."""
    few = sorted({plan.repeat for plan in planned if not can_show_a_drop(plan.repeat, alpha)})
    if not few:
        return None
    fewest = few[0]
    cases = sum(plan.repeat in few for plan in planned)
    smallest = float(smallest_drop_p_value(fewest))
    return (
        f"note: with repeat = {fewest}, no drop can be significant at alpha {alpha:g} "
        f"(even {fewest}/{fewest} → 0/{fewest} has p = {smallest:.2g}), so "
        f"{cases} case{'s' if cases != 1 else ''} cannot regress; "
        f"repeat = {repeats_to_show_a_drop(alpha)} could show one"
    )


def coverage_note(test_run: TestRun, baseline: int | None) -> str | None:
    """When the baseline lacks some of the test run's cases, or some changed since: `compared
    with run 12 on 1 of 6 cases; 5 not in run 12`. None when every case was compared."""
    if baseline is None or not test_run.reports:
        return None
    new = sum(report.change == "new" for report in test_run.reports)
    changed = sum(report.change == "changed" for report in test_run.reports)
    if not new and not changed:
        return None
    total = len(test_run.reports)
    told = f"compared with run {baseline} on {total - new - changed} of {total} cases"
    if new:
        told += f"; {new} not in run {baseline}"
    if changed:
        told += f"; {changed} changed since run {baseline}"
    return told


def stopped(test_run: TestRun) -> str | None:
    """What `--max-cost` stopped, when the test run reached it; None when it did not."""
    if not test_run.max_cost_reached or test_run.max_cost is None:
        return None
    cut = sum(
        repeat.problem is not None and repeat.problem.code == COST_LIMIT
        for report in test_run.reports
        for repeat in report.repeats
    )
    not_run = len(test_run.not_run)
    return (
        f"the test run reached --max-cost {money(test_run.max_cost)} "
        f"({money(test_run.spend.amount)} counted) and sent no turn after it: "
        f"{cut} repeat{'s' if cut != 1 else ''} cut short, {not_run} "
        f"case{'s' if not_run != 1 else ''} not run"
    )


def stop_line(test_run: TestRun) -> str | None:
    """`STOP  …`, said before the cases not run, when `--max-cost` stopped the test run."""
    told = stopped(test_run)
    return None if told is None else f"STOP  {told}"


def summary(test_run: TestRun, seconds: float, *, run_id: int | None, baseline: int | None) -> str:
    """The last line: the verdicts' counts, the regressions against the baseline, what was not
    run, the stored test run's id, its time, and its tokens and cost once any turn was sent."""
    parts = [f"{test_run.count(verdict)} {verdict}" for verdict in VERDICTS]
    told = ", ".join(parts)
    if baseline is not None:
        told += f"; {test_run.regressed} regressed against run {baseline}"
    if test_run.not_run:
        told += f"; {len(test_run.not_run)} not run"
    if run_id is not None:
        told += f" (run {run_id})"
    told += f" in {seconds:.1f} s"
    spend = test_run.spend
    return f"{told}; {spend.told()}" if spend.turns else told


def instance_matrix(reports: Sequence[CaseReport]) -> list[str]:
    """The cases down, the instances across, `verdict k/N` in each cell: empty when every case
    ran on one instance."""
    instances = list(dict.fromkeys(report.instance for report in reports))
    if len(instances) < 2:
        return []
    cases = list(dict.fromkeys(report.title for report in reports))
    cells = {
        (r.title, r.instance): f"{r.verdict} {r.passed_repeats}/{r.repeat_count}" for r in reports
    }
    rows = [["", *instances]]
    rows += [[title, *(cells.get((title, i), "—") for i in instances)] for title in cases]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


# --- records ---------------------------------------------------------------------------------


def turn_record(turn: TurnRecord, *, texts: bool) -> dict[str, Any]:
    outcome = turn.outcome
    reply = outcome.reply
    record: dict[str, Any] = {
        "turn": turn.number,
        "id": turn.turn_id,
        "state": outcome.state,
        "reply_id": reply.message.get("id") if reply else None,
        "seconds": round(reply.seconds if reply else outcome.seconds, 3),
        "first_token_seconds": round(reply.first_token_seconds, 3) if reply else None,
        "usage": reply.usage if reply else None,
        "model": reply.model if reply else None,
        "finish_reason": reply.finish_reason if reply else None,
        "passed": turn.failure is None,
        # At the price of the model the reply recorded; null when unknown.
        "cost": _amount(turn.cost.amount),
        # A new version of the turn before, asked again (R24).
        "regenerate": turn.regenerated,
        "judge": [vote.as_json() for vote in turn.votes],
        "steps": [step.as_json() if texts else stored_step(step) for step in turn.outcome.steps],
    }
    if texts:
        record["sent"] = turn.sent
        record["reply"] = reply.body if reply else None
    return record


def _amount(amount: float | None) -> float | None:
    return None if amount is None else round(amount, 10)


def stored_step(step: Step) -> dict[str, Any]:
    """A step as the stored history keeps it: the call and how it ended, its arguments within
    `STORED_ARGUMENTS` characters; what it answered stays in the thread."""
    arguments = step.arguments
    written = json.dumps(arguments, ensure_ascii=False)
    if len(written) > STORED_ARGUMENTS:
        arguments = clipped(written, STORED_ARGUMENTS)
    return {
        "call_id": step.call_id,
        "round": step.round,
        "tool": step.tool,
        "arguments": arguments,
        "outcome": step.outcome,
        "code": step.code,
    }


def steps_lines(report: CaseReport) -> list[str]:
    """Each turn that made steps, `repeat R, turn N “sent”: call outcome; …`, in every repeat."""
    lines = []
    for repeat in report.repeats:
        where = f"repeat {repeat.number}, " if report.repeat_count > 1 else ""
        for turn in repeat.turns:
            if turn.outcome.steps:
                lines.append(
                    f"{where}turn {turn.number} {asked(turn, 60)}: "
                    f"{describe_steps(turn.outcome.steps)}"
                )
    return lines


def repeat_record(repeat: Repeat, *, texts: bool) -> dict[str, Any]:
    failure = repeat.failure
    return {
        "repeat": repeat.number,
        "thread": repeat.thread,
        "passed": repeat.passed,
        "error": repeat.problem.code if repeat.problem else None,
        "detail": repeat.problem.detail if repeat.problem else None,
        "failed_turn": repeat.failed_turn,
        "expected": failure.expected if failure else None,
        "actual": (failure.actual if texts else clipped(failure.actual)) if failure else None,
        "seconds": round(repeat.seconds, 3),
        "turns": [turn_record(turn, texts=texts) for turn in repeat.turns],
        "judge": [vote.as_json() for vote in repeat.conversation_votes],
    }


def failures(report: CaseReport, limit: int = STORED_TEXT) -> list[dict[str, Any]]:
    """Each repeat's miss: where, what was expected, what came (a problem is what came)."""
    return [failure for failure, _ in misses(report, limit)]


def misses(
    report: CaseReport, limit: int = STORED_TEXT
) -> list[tuple[dict[str, Any], TurnRecord | None]]:
    """Each repeat's miss (`failures`), with the turn that missed (None: the conversation);
    each text clipped to `limit` characters, the sent text to STORED_SENT at most."""
    found = []
    for repeat in report.repeats:
        if repeat.passed:
            continue
        turn = repeat.turns[repeat.failed_turn - 1] if repeat.failed_turn else None
        if repeat.failure is not None:
            expected, actual = repeat.failure.expected, repeat.failure.actual
        else:
            expected, actual = "a verdict", str(repeat.problem)
        failure = {
            "repeat": repeat.number,
            "turn": repeat.failed_turn,
            "sent": clipped(turn.sent if turn else None, min(limit, STORED_SENT)),
            "expected": clipped(expected, limit),
            "actual": clipped(actual, limit),
        }
        found.append((failure, turn))
    return found


def stored_record(report: CaseReport) -> dict[str, Any]:
    """What the stored history keeps of a case (`POST /api/suite-runs/ID/cases`): its failures
    and each repeat's turns with their timings, tokens, model and the judge's reasons, within
    STORED_RECORD together (`stored_texts`); the texts stay in the threads. Its tokens and cost
    (`cost`, as `--json` writes them) go beside them, outside that bound: a few numbers, kept
    when a record too big drops its turns. The counts and the repeats go under the names every
    listener takes, `passed_runs`, `runs` and `attempts` (a listener also takes `repeats`, but
    one older than that name would refuse it)."""
    found, repeats = stored_texts(report)
    return {
        "suite": report.plan.suite.name,
        "case": report.plan.case.name,
        "instance": report.instance,
        "verdict": report.verdict,
        "passed_runs": report.passed_repeats,
        "runs": report.repeat_count,
        "threads": report.threads,
        "failures": found,
        "attempts": repeats,
        **statistics_record(report),
        "definition_hash": report.plan.definition_hash,
        "cost": report.spend.as_json(),
    }


def statistics_record(report: CaseReport) -> dict[str, Any]:
    """The case's statistics as its records carry them: `pass_rate`, `interval: [lo, hi]`
    (95% Wilson) and `pass_hat_k` (null when fewer repeats ran than the case's `repeat`)."""
    return {
        "pass_rate": report.pass_rate,
        "interval": list(report.interval),
        "pass_hat_k": report.pass_hat_k,
    }


def record_size(failures: object, repeats: object) -> int:
    """A stored record's size as the listener measures it (the broker's `record_size`): its
    failures and repeats, each as JSON written in ASCII, in characters."""
    return len(json.dumps(failures)) + len(json.dumps(repeats))


def stored_texts(report: CaseReport) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The record's failures and repeats, within STORED_RECORD together: the failures in at
    most half of it, their texts halved until they fit (down to the "…" of a text cut at its
    start), and the repeats in the rest (`stored_repeats`)."""
    limit = STORED_TEXT
    found = failures(report, limit)
    while record_size(found, []) > STORED_RECORD // 2 and limit > 1:
        limit //= 2
        found = failures(report, limit)
    return found, stored_repeats(report.repeats, beside=found)


def stored_repeats(
    repeats: Sequence[Repeat], *, beside: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """Every repeat's record without texts (its failure is in `failures`), within what
    STORED_RECORD leaves beside the failures `beside`. A case too big for it keeps the turns of
    its first repeats that did not pass, and of none that did; then no turns at all; then only
    what every repeat is: its thread, verdict, error code and time."""
    records = []
    for repeat in repeats:
        record = repeat_record(repeat, texts=False)
        del record["expected"], record["actual"]
        for turn in record["turns"]:
            for vote in turn["judge"]:
                vote["reason"] = clipped(vote["reason"], STORED_REASON)
        records.append(record)

    def fits() -> bool:
        return record_size(list(beside), records) <= STORED_RECORD

    if fits():
        return records
    kept = 0
    for record in records:
        if record["passed"] or kept >= STORED_FULL_MISSES:
            record["turns"] = []
        else:
            kept += 1
    if fits():
        return records
    for record in records:
        record["turns"] = []
    if fits():
        return records
    for record in records:
        record |= {"judge": [], "detail": None, "error": clipped(record["error"], STORED_CODE)}
    return records


def as_json(report: CaseReport) -> dict[str, Any]:
    """One case on one instance as one JSON object (`--json`)."""
    first = report.first_miss
    failure = first.failure if first else None
    problem = first.problem if first else None
    turn = first.turns[first.failed_turn - 1] if first and first.failed_turn else None
    return {
        "suite": report.plan.suite.name,
        "case": report.plan.case.name,
        # The row of a dataset the case was made of, each column's value; None: no dataset.
        "vars": dict(report.plan.case.vars) or None,
        "file": report.plan.suite.file,
        "instance": report.instance,
        "verdict": report.verdict,
        "passed_repeats": report.passed_repeats,
        "passed_runs": report.passed_repeats,
        "repeat_count": report.repeat_count,
        "runs": report.repeat_count,
        **statistics_record(report),
        "change": report.change,
        "p_value": report.p_value,
        "baseline_passed_repeats": report.baseline_tally[0] if report.baseline_tally else None,
        "baseline_repeat_count": report.baseline_tally[1] if report.baseline_tally else None,
        "definition_hash": report.plan.definition_hash,
        "status": STATUS[report.verdict],
        "thread": first.thread if first else next(iter(report.threads), None),
        "threads": report.threads,
        "turn": first.failed_turn if first else None,
        "sent": turn.sent if turn else None,
        "regenerate": turn.regenerated if turn else None,
        "expected": failure.expected if failure else None,
        "actual": failure.actual if failure else None,
        "error": problem.code if problem else None,
        "detail": problem.detail if problem else None,
        "seconds": round(report.seconds, 3),
        "cost": report.spend.as_json(),
        "repeats": [repeat_record(repeat, texts=True) for repeat in report.repeats],
    }


def json_line(report: CaseReport) -> str:
    """The case's JSON record on one line, its texts exact and safe to print (`visible_json`)."""
    return visible_json(as_json(report))


def summary_record(
    test_run: TestRun, *, run_id: int | None, notes: Sequence[str] = ()
) -> dict[str, Any]:
    counts: dict[str, Any] = {"run": run_id}
    counts |= {verdict: test_run.count(verdict) for verdict in VERDICTS}
    counts |= {"regressed": test_run.regressed, "not_run": len(test_run.not_run)}
    counts["notes"] = list(notes)
    counts |= {
        "cost": test_run.spend.as_json(),
        "max_cost": test_run.max_cost,
        "max_cost_reached": test_run.max_cost_reached,
    }
    return {"summary": counts}


def json_summary(test_run: TestRun, *, run_id: int | None, notes: Sequence[str] = ()) -> str:
    return json.dumps(summary_record(test_run, run_id=run_id, notes=notes), ensure_ascii=False)


# --- JUnit -----------------------------------------------------------------------------------


def junit(test_run: TestRun, every: Sequence[Plan]) -> ElementTree.ElementTree:
    """JUnit XML: one `testsuite` per suite, one `testcase` per case and instance, with the
    verdict, `k/N`, the change, the statistics, tokens and cost as properties, a `failure` with
    what was expected and what came (or an `error` with the refusal); every planned case not
    run is `skipped`, so every case of the files appears."""
    root = ElementTree.Element("testsuites", name="testassistant")
    suites: dict[tuple[str, str], ElementTree.Element] = {}
    with_instance = len({plan.instance for plan in every}) > 1
    reported = {(r.plan.suite.file, r.plan.case.name, r.plan.instance): r for r in test_run.reports}
    tallies: dict[ElementTree.Element, list[str]] = {}
    for plan in every:
        key = (plan.suite.file, plan.suite.name)
        if key not in suites:
            suites[key] = ElementTree.SubElement(
                root, "testsuite", name=plan.suite.name, file=plan.suite.file
            )
            tallies[suites[key]] = []
        report = reported.get((plan.suite.file, plan.case.name, plan.instance))
        name = plan.case.name + (f" [{plan.instance}]" if with_instance and plan.instance else "")
        case = ElementTree.SubElement(
            suites[key],
            "testcase",
            classname=plan.suite.name,
            name=name,
            file=plan.suite.file,
            line=str(plan.case.line),
            time=f"{report.seconds:.3f}" if report else "0.000",
        )
        if report is None:
            ElementTree.SubElement(case, "skipped", message="not run")
            tallies[suites[key]].append("skipped")
            continue
        _properties(case, report)
        tallies[suites[key]].append(report.verdict)
        first = report.first_miss
        if report.verdict == FAIL and first is not None and first.failure is not None:
            failure = ElementTree.SubElement(
                case, "failure", type="expectation", message=miss(report)
            )
            failure.text = "\n".join(
                f"repeat {f['repeat']}, turn {f['turn']}: "
                f"{'regenerate' if turn and turn.regenerated else 'sent'} {f['sent']}\n"
                f"expected: {f['expected']}\nactual: {f['actual']}"
                for f, turn in misses(report)
            )
        elif report.verdict == ERROR and first is not None and first.problem is not None:
            error = ElementTree.SubElement(
                case, "error", type=first.problem.code, message=first.problem.detail
            )
            error.text = str(first.problem)
        steps = steps_lines(report)
        if steps:
            # The calls each turn made, passing or not: what the assistant did, beside the
            # verdict on what it said.
            ElementTree.SubElement(case, "system-out").text = "steps:\n" + "\n".join(steps)
    for (file, _), testsuite in suites.items():
        spent = [r.spend for r in test_run.reports if r.plan.suite.file == file]
        _cost_properties(testsuite, sum(spent, Spend()), first=True)
    for element, verdicts in [(root, [v for vs in tallies.values() for v in vs]), *tallies.items()]:
        element.set("tests", str(len(verdicts)))
        element.set("failures", str(verdicts.count(FAIL)))
        element.set("errors", str(verdicts.count(ERROR)))
        element.set("skipped", str(verdicts.count("skipped")))
    written_visibly(root)
    ElementTree.indent(root)
    return ElementTree.ElementTree(root)


def written_visibly(root: ElementTree.Element) -> None:
    """Every text and attribute under `root` through `visible`: a reply's control characters
    are characters XML 1.0 forbids, and a file holding one is not XML that any reader parses."""
    for element in root.iter():
        element.attrib = {name: visible(value) for name, value in element.attrib.items()}
        if element.text:
            element.text = visible(element.text)
        if element.tail:
            element.tail = visible(element.tail)


def _properties(case: ElementTree.Element, report: CaseReport) -> None:
    properties = ElementTree.SubElement(case, "properties")
    shown_properties = {
        "verdict": report.verdict,
        "passed_repeats": report.passed_repeats,
        "passed_runs": report.passed_repeats,
        "repeat_count": report.repeat_count,
        "runs": report.repeat_count,
        "change": report.change or "",
        "instance": report.instance,
        "threads": " ".join(str(thread) for thread in report.threads),
    }
    for name, value in (shown_properties | statistics_properties(report)).items():
        ElementTree.SubElement(properties, "property", name=name, value=str(value))
    _cost_properties(case, report.spend)


def statistics_properties(report: CaseReport) -> dict[str, str]:
    """The case's statistics as JUnit (and pytest) properties, each the number its records
    carry (`statistics_record`): `pass_rate`, the 95% interval as `interval_low` and
    `interval_high`, `pass_hat_k` (`unknown` when fewer repeats ran than the case's `repeat`);
    and when the case was compared, the `p_value` its change rests on and the baseline's `k/N`
    as `baseline_passed_repeats` and `baseline_repeat_count`. A number is written as the
    shortest decimal that reads back as itself (`repr`), so a tiny p-value keeps its digits."""
    low, high = report.interval
    told = {
        "pass_rate": repr(float(report.pass_rate)),
        "interval_low": repr(float(low)),
        "interval_high": repr(float(high)),
        "pass_hat_k": "unknown" if report.pass_hat_k is None else repr(float(report.pass_hat_k)),
    }
    if report.p_value is not None:
        told["p_value"] = repr(float(report.p_value))
    if report.baseline_tally is not None:
        passed, repeats = report.baseline_tally
        told |= {"baseline_passed_repeats": str(passed), "baseline_repeat_count": str(repeats)}
    return told


def cost_properties(spend: Spend) -> dict[str, str]:
    """Tokens and cost as JUnit (and pytest) properties: `unknown` where nothing is known,
    and how many turns are not counted."""
    return {
        "prompt_tokens": str(spend.prompt_tokens) if spend.with_usage else "unknown",
        "completion_tokens": str(spend.completion_tokens) if spend.with_usage else "unknown",
        "cost": plain(spend.amount) if spend.priced else "unknown",
        "turns_without_usage": str(spend.without_usage),
        "turns_without_price": str(spend.without_price),
    }


def _cost_properties(element: ElementTree.Element, spend: Spend, *, first: bool = False) -> None:
    """`spend` as properties of a testcase (after its others) or, `first`, of a testsuite."""
    properties = element.find("properties")
    if properties is None:
        properties = ElementTree.Element("properties")
        element.insert(0 if first else len(element), properties)
    for name, value in cost_properties(spend).items():
        ElementTree.SubElement(properties, "property", name=name, value=value)


def write_report(path: str | Path, text: str) -> None:
    """A report's text written to `path` in UTF-8, its folder made when missing."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def write_junit(test_run: TestRun, every: Sequence[Plan], path: str | Path) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    junit(test_run, every).write(target, encoding="utf-8", xml_declaration=True)
