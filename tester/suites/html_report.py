"""`--html PATH`: one self-contained page of a test run, readable offline from a file.

Every case on every instance, its verdict, `k/N`, the pass rate's 95% interval and pass^k, its
change (with its p-value, or "within noise"), tokens and cost, and under it each repeat's
transcript with each turn's steps (the tool calls made answering it), its timings, tokens, cost,
model and the judge's votes (`pass`, `fail` or `invalid`, each with its reason); a turn the judge
could not grade is there with its reply. The page carries its own style and no script, image or
font: opening it fetches nothing. Each text is escaped; a reply is shown as the text it is,
never rendered, its lines kept and a line too long for the page wrapped anywhere (a page showing
a reply of one 120,000-character line is as wide as the window). Threads link to the tester
Console, which is only followed when clicked.

A compared test run's page opens with the listener's comparison of it with its baseline
(`comparison`, drawn by `comparison_html`): the cases by change, regressions first, each changed
case's replies beside the baseline's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from .comparison import Comparison
from .comparison_html import STYLE as COMPARISON_STYLE
from .comparison_html import comparison_section
from .console_links import thread_link
from .costs import money
from .reports import (
    change_text,
    instance_matrix,
    interval_text,
    miss,
    name_of,
    stopped,
    write_report,
)
from .runner import VERDICTS, CaseReport, Plan, Repeat, TestRun, TurnRecord
from .steps import describe_step

STYLE = """
:root { color-scheme: light dark; --line: #d0d4da; --muted: #5b6470; --pass: #1a7f37;
  --flaky: #9a6700; --fail: #cf222e; --error: #8250df; --bubble: #f3f4f6; }
@media (prefers-color-scheme: dark) { :root { --line: #3a4048; --muted: #9aa4b0;
  --pass: #4ac26b; --flaky: #d4a72c; --fail: #ff7b72; --error: #c297ff; --bubble: #22272e; } }
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
  padding: 0 1rem; overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
.muted { color: var(--muted); }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .7rem; text-align: left; }
.verdict { font-weight: 700; text-transform: uppercase; font-size: .8rem; }
.pass { color: var(--pass); } .flaky { color: var(--flaky); }
.fail { color: var(--fail); } .error { color: var(--error); }
section.case { border-top: 1px solid var(--line); padding: .75rem 0; }
section.case h2 { font-size: 1.05rem; margin: 0; }
details { margin: .5rem 0 .5rem 1rem; }
.turn { margin: .5rem 0; }
.said { white-space: pre-wrap; background: var(--bubble);
  border-radius: .5rem; padding: .4rem .6rem; margin: .2rem 0; }
.said.user { margin-left: 3rem; }
.facts { font-size: .85rem; color: var(--muted); }
.again { font-size: .8rem; font-weight: 700; color: var(--muted); }
.miss { border-left: 3px solid var(--fail); padding-left: .6rem; margin: .4rem 0;
  white-space: pre-wrap; }
.note { border-left: 3px solid var(--flaky); padding-left: .6rem; }
.steps { font-size: .85rem; margin: .2rem 0; padding-left: 1.5rem; overflow-wrap: anywhere; }
.steps .refused, .steps .error { color: var(--fail); }
"""


def write_html(
    test_run: TestRun,
    every: Sequence[Plan],
    path: str | Path,
    *,
    run_id: int | None,
    baseline: int | None,
    console_url: str | None = None,
    notes: Sequence[str] = (),
    comparison: Comparison | None = None,
) -> None:
    written = page(
        test_run,
        every,
        run_id=run_id,
        baseline=baseline,
        console_url=console_url,
        notes=notes,
        comparison=comparison,
    )
    write_report(path, written)


def page(
    test_run: TestRun,
    every: Sequence[Plan],
    *,
    run_id: int | None,
    baseline: int | None,
    console_url: str | None = None,
    notes: Sequence[str] = (),
    comparison: Comparison | None = None,
) -> str:
    """The page; with `comparison`, its section comes first after the notes."""
    title = f"Conversation tests — run {run_id}" if run_id is not None else "Conversation tests"
    counts = ", ".join(f"{test_run.count(verdict)} {verdict}" for verdict in VERDICTS)
    compared = f"; {test_run.regressed} regressed against run {baseline}" if baseline else ""
    spend = test_run.spend
    spent = f"; {spend.told()}" if spend.turns else ""
    several = len({plan.instance for plan in every}) > 1
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # Nothing from anywhere: the page works from a file, offline.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">",
        f"<title>{escape(title)}</title><style>{STYLE}{COMPARISON_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{escape(counts + compared + spent)}; written '
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC</p>",
        *(f'<p class="note">{escape(note)}</p>' for note in notes),
    ]
    stop = stopped(test_run)
    if stop is not None:
        parts.append(f'<p class="miss">{escape(stop)}</p>')
    anchors = {id(report): f"case-{index}" for index, report in enumerate(test_run.reports)}
    if comparison is not None:
        stored = {r.case_id: anchors[id(r)] for r in test_run.reports if r.case_id is not None}
        not_stored = [
            name_of(report, with_instance=several)
            for report in test_run.reports
            if report.case_id is None
        ]
        parts.append(
            comparison_section(
                comparison,
                several=several,
                anchors=stored,
                console_url=console_url,
                not_stored=not_stored,
            )
        )
    matrix = instance_matrix(test_run.reports)
    if matrix:
        parts.append(_matrix(test_run.reports))
    parts.append(_overview(test_run, several))
    for report in test_run.reports:
        parts.append(_case(report, several, console_url, anchors[id(report)]))
    for plan in test_run.not_run:
        parts.append(
            f'<section class="case"><h2>{escape(plan.title)}</h2>'
            '<p class="muted">not run</p></section>'
        )
    parts.append("</body></html>")
    return "\n".join(parts)


def _badge(verdict: str) -> str:
    return f'<span class="verdict {escape(verdict)}">{escape(verdict)}</span>'


def _matrix(reports: Sequence[CaseReport]) -> str:
    instances = list(dict.fromkeys(report.instance for report in reports))
    cases = list(dict.fromkeys(report.title for report in reports))
    cells = {(r.title, r.instance): r for r in reports}
    rows = ["<table><caption>Instances side by side</caption><tr><th>case</th>"]
    rows += [f"<th>{escape(instance)}</th>" for instance in instances]
    rows.append("</tr>")
    for title in cases:
        rows.append(f"<tr><td>{escape(title)}</td>")
        for instance in instances:
            report = cells.get((title, instance))
            cell = "—"
            if report:
                cell = f"{_badge(report.verdict)} {report.passed_repeats}/{report.repeat_count}"
            rows.append(f"<td>{cell}</td>")
        rows.append("</tr>")
    rows.append("</table>")
    return "".join(rows)


def _pass_hat_k(report: CaseReport) -> str:
    """`pass^5 0.00`, or `pass^5 —` when fewer repeats ran than k."""
    value = report.pass_hat_k
    return f"pass^{report.plan.repeat} {'—' if value is None else f'{value:.2f}'}"


def _overview(test_run: TestRun, several: bool) -> str:
    rows = [
        "<table><tr><th>case</th><th>verdict</th><th>repeats</th>"
        "<th>pass rate (95% interval)</th><th>pass^k</th><th>change</th>"
        "<th>tokens and cost</th></tr>"
    ]
    for report in test_run.reports:
        low, high = report.interval
        rows.append(
            f"<tr><td>{escape(name_of(report, with_instance=several))}</td>"
            f"<td>{_badge(report.verdict)}</td>"
            f"<td>{report.passed_repeats}/{report.repeat_count}</td>"
            f"<td>{report.pass_rate:.0%} ({low * 100:.0f}–{high * 100:.0f}%)</td>"
            f"<td>{escape(_pass_hat_k(report))}</td>"
            f"<td>{escape(change_text(report))}</td>"
            f"<td>{escape(report.spend.told())}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _case(report: CaseReport, several: bool, console_url: str | None, anchor: str) -> str:
    heading = escape(name_of(report, with_instance=several))
    change = f" · {escape(change_text(report))}" if report.change else ""
    parts = [
        f'<section class="case" id="{anchor}"><h2>{_badge(report.verdict)} {heading}</h2>',
        f'<p class="facts">{report.passed_repeats}/{report.repeat_count} passed, '
        f"{escape(interval_text(report))}, {escape(_pass_hat_k(report))}{change} · "
        f"instance {escape(report.instance or 'default')} · {report.seconds:.1f} s · "
        f"{escape(report.spend.told())}</p>",
    ]
    if report.first_miss is not None:
        parts.append(f'<p class="miss">{escape(miss(report))}</p>')
    for repeat in report.repeats:
        parts.append(_repeat(repeat, console_url, open_it=not repeat.passed))
    parts.append("</section>")
    return "\n".join(parts)


def _repeat(repeat: Repeat, console_url: str | None, *, open_it: bool) -> str:
    state = "passed" if repeat.passed else ("error" if repeat.problem else "failed")
    thread = f" · {thread_link(repeat.thread, console_url)}" if repeat.thread is not None else ""
    parts = [
        f"<details{' open' if open_it else ''}><summary>repeat {repeat.number}: {state}"
        f" · {repeat.seconds:.1f} s{thread}</summary>"
    ]
    if repeat.problem is not None and repeat.failed_turn is None:
        # A problem at a turn is told under that turn, beside its reply.
        parts.append(f'<p class="miss">{escape(str(repeat.problem))}</p>')
    for turn in repeat.turns:
        parts.append(_turn(turn))
    if repeat.failure is not None and repeat.failed_turn is None:
        parts.append(
            f'<p class="miss">the conversation: expected {escape(repeat.failure.expected)}; '
            f"got {escape(repeat.failure.actual)}</p>"
        )
    for vote in repeat.conversation_votes:
        parts.append(
            f'<p class="facts">judge of the conversation: {vote.label} — {escape(vote.reason)}</p>'
        )
    parts.append("</details>")
    return "\n".join(parts)


def _turn(turn: TurnRecord) -> str:
    reply = turn.outcome.reply
    # A regenerated turn is its text asked again (R24), said so before it.
    again = '<span class="again">regenerate</span> ' if turn.regenerated else ""
    parts = [f'<div class="turn"><div class="said user">{again}{escape(turn.sent)}</div>']
    if turn.outcome.steps:
        items = "".join(
            f'<li class="{escape(step.outcome or "running")}">'
            f"{escape(describe_step(step, with_result=True))}</li>"
            for step in turn.outcome.steps
        )
        parts.append(f'<ol class="steps" aria-label="steps">{items}</ol>')
    if reply is not None:
        parts.append(f'<div class="said assistant">{escape(reply.body)}</div>')
        usage = reply.usage or {}
        facts = [
            f"{reply.seconds:.2f} s",
            f"first token {reply.first_token_seconds:.2f} s",
        ]
        if usage:
            facts.append(
                f"tokens {usage.get('prompt_tokens', '?')} in, "
                f"{usage.get('completion_tokens', '?')} out"
            )
        if reply.model:
            facts.append(f"model {reply.model}")
        if reply.finish_reason:
            facts.append(f"finish {reply.finish_reason}")
        cost = turn.cost
        amount = cost.amount
        facts.append(
            f"cost {money(amount)}" if amount is not None else f"cost unknown: {cost.unknown}"
        )
        parts.append(f'<div class="facts">{escape(" · ".join(facts))}</div>')
    else:
        parts.append(
            f'<div class="facts">no reply: the turn is {escape(turn.outcome.state)} after '
            f"{turn.outcome.seconds:.1f} s</div>"
        )
    for vote in turn.votes:
        parts.append(f'<div class="facts">judge: {vote.label} — {escape(vote.reason)}</div>')
    if turn.failure is not None:
        parts.append(
            f'<p class="miss">expected {escape(turn.failure.expected)}; '
            f"got {escape(turn.failure.actual)}</p>"
        )
    parts.append("</div>")
    return "\n".join(parts)
