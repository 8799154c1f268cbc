"""The comparison section of the `--html` page of a compared test run (`comparison`).

The cases grouped by change, regressions first and the cases that stayed the same last. A
regressed, fixed or changed case tells the baseline's `k/N` → this run's, its p-value (or why
there is none) and, turn by turn, the shown repeat's sent texts and replies beside the
baseline's: two columns, the baseline's on the left, one column on a phone, each cell labelled
with its side so a stacked pair still reads. New cases, cases the test run lacks and the same
ones are a table each. Every text is escaped and shown as text, its lines kept and wrapped
anywhere, as on the rest of the page; a reply is cut at REPLY_SHOWN characters (the case's
transcript below, or its thread, has all of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from .comparison import (
    CHANGES_IN_ORDER,
    MISSING,
    NOT_READ,
    NOT_STORED,
    SIDE_BY_SIDE,
    Compared,
    Comparison,
    Said,
    Side,
    before_tally,
    evidence,
    now_tally,
    paired,
)
from .console_links import thread_link
from .reports import clipped, name_of

REPLY_SHOWN = 4000
# Each change's group, and its count's words in the section's first line.
GROUP_TITLES = {
    "regressed": "Regressed",
    "fixed": "Fixed",
    "changed": "Changed since the baseline",
    "new": "New: not in the baseline",
    MISSING: "Not in this test run",
    "same": "The same",
    NOT_STORED: "Not compared: not stored",
}
COUNTED = {MISSING: "not in this test run", NOT_STORED: "not stored"}

STYLE = """
.comparison h3 { font-size: 1.05rem; margin: 1.25rem 0 .25rem; }
.compared { border-top: 1px solid var(--line); padding: .75rem 0; }
.compared h4 { font-size: 1rem; margin: 0; }
.change { font-weight: 700; text-transform: uppercase; font-size: .8rem; }
.change.regressed { color: var(--fail); } .change.fixed { color: var(--pass); }
.change.changed { color: var(--flaky); }
.pair { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: .75rem;
  margin: .4rem 0; }
@media (max-width: 40rem) { .pair { grid-template-columns: minmax(0, 1fr); } }
.side { min-width: 0; border-left: 3px solid var(--line); padding-left: .5rem; }
.side.now { border-left-color: var(--muted); }
.side .label { font-size: .8rem; font-weight: 700; color: var(--muted); }
.said.missed { outline: 2px solid var(--fail); }
"""


def comparison_section(
    comparison: Comparison,
    *,
    several: bool,
    anchors: Mapping[int, str],
    console_url: str | None = None,
) -> str:
    """The section, `anchors` naming each report's place on the page by its `id()`."""
    baseline = comparison.baseline
    counts = ", ".join(
        f"{comparison.count(change)} {COUNTED.get(change, change)}"
        for change in CHANGES_IN_ORDER
        if change != NOT_STORED or comparison.count(change)
    )
    parts = [
        '<section class="comparison" aria-labelledby="compared">',
        f'<h2 id="compared">Compared with run {baseline}</h2>',
        f'<p class="muted">{escape(counts)}</p>',
        *(f'<p class="note">{escape(note)}</p>' for note in comparison.notes),
    ]
    changes = list(dict.fromkeys(case.change for case in comparison.cases))
    for change in changes:
        cases = [case for case in comparison.cases if case.change == change]
        title = f"{GROUP_TITLES[change]} ({len(cases)})"
        parts.append(
            f'<section class="group" data-change="{escape(change)}"><h3>{escape(title)}</h3>'
        )
        for case in cases:
            if change in SIDE_BY_SIDE:
                parts.append(_side_by_side(case, baseline, several, anchors, console_url))
        if change not in SIDE_BY_SIDE:
            parts.append(_table(cases, several, anchors))
        parts.append("</section>")
    parts.append("</section>")
    return "\n".join(parts)


def _name(case: Compared, several: bool) -> str:
    if case.report is not None:
        return name_of(case.report, with_instance=several)
    assert case.baseline is not None
    stored = case.baseline
    name = f"{stored.suite} · {stored.case}"
    return f"{name} [{stored.instance}]" if several and stored.instance else name


def _link(case: Compared, several: bool, anchors: Mapping[int, str]) -> str:
    """The case's name, linked to its section of the page when it has one."""
    name = f'<span class="name">{escape(_name(case, several))}</span>'
    anchor = anchors.get(id(case.report)) if case.report is not None else None
    return f'<a href="#{escape(anchor)}">{name}</a>' if anchor else name


def _tallies(case: Compared) -> str:
    return f"{before_tally(case)} → {now_tally(case)}"


def _table(cases: list[Compared], several: bool, anchors: Mapping[int, str]) -> str:
    rows = ["<table><tr><th>case</th><th>baseline → this run</th><th>change</th></tr>"]
    for case in cases:
        rows.append(
            f'<tr data-change="{escape(case.change)}">'
            f"<td>{_link(case, several, anchors)}</td>"
            f"<td>{escape(_tallies(case))}</td><td>{escape(evidence(case))}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _side_by_side(
    case: Compared,
    baseline: int,
    several: bool,
    anchors: Mapping[int, str],
    console_url: str | None,
) -> str:
    change = escape(case.change)
    parts = [
        f'<section class="compared" data-change="{change}">',
        f'<h4><span class="change {change}">{change}</span> {_link(case, several, anchors)}</h4>',
        f'<p class="facts">{escape(_tallies(case))} · {escape(evidence(case))}</p>',
        '<div class="pair">',
        _head(case.before, f"run {baseline}", "before", console_url),
        _head(case.now, "this run", "now", console_url),
        "</div>",
    ]
    if case.before is None:
        parts.append('<p class="muted">The baseline\'s replies are not shown.</p>')
    elif case.before.unread is not None:
        parts.append(f'<p class="muted">The baseline\'s replies: {escape(case.before.unread)}</p>')
    for number, before, now in paired(case.before, case.now):
        parts.append(f'<div class="pair" data-turn="{number}">')
        parts.append(_cell(before, f"run {baseline}", number, "before"))
        parts.append(_cell(now, "this run", number, "now"))
        parts.append("</div>")
    parts.append("</section>")
    return "\n".join(parts)


def _head(side: Side | None, whose: str, which: str, console_url: str | None) -> str:
    """The side's repeat: its number, whether it passed, its thread, and why it did not pass."""
    if side is None:
        return f'<div class="side {which}"><div class="label">{escape(whose)}</div></div>'
    state = "passed" if side.passed else "did not pass"
    thread = f" · {thread_link(side.thread, console_url)}" if side.thread is not None else ""
    why = f'<p class="miss">{escape(side.why)}</p>' if side.why else ""
    return (
        f'<div class="side {which}" data-side="{which}"><div class="label">{escape(whose)}, '
        f"repeat {side.repeat}: {state}{thread}</div>{why}</div>"
    )


def _cell(said: Said | None, whose: str, number: int, which: str) -> str:
    label = f'<div class="label">{escape(whose)}, turn {number}</div>'
    if said is None:
        return (
            f'<div class="side {which}" data-side="{which}">{label}'
            '<p class="facts">no such turn</p></div>'
        )
    again = '<span class="again">regenerate</span> ' if said.regenerated else ""
    sent = "(not read)" if said.sent is None else clipped(said.sent, REPLY_SHOWN)
    parts = [
        f'<div class="side {which}" data-side="{which}">{label}',
        f'<div class="said user">{again}{escape(sent or "")}</div>',
    ]
    missed = " missed" if said.missed else ""
    if said.reply is not None:
        reply = clipped(said.reply, REPLY_SHOWN) or ""
        parts.append(f'<div class="said assistant{missed}">{escape(reply)}</div>')
    elif said.state == NOT_READ:
        parts.append('<p class="facts">(reply not read)</p>')
    else:
        parts.append(f'<p class="facts{missed}">no reply: the turn is {escape(said.state)}</p>')
    parts.append("</div>")
    return "".join(parts)
