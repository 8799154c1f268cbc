"""The comparison section of the `--html` page of a compared test run, drawn from what the
listener answered (`comparison.read_comparison`).

The cases by change in the listener's order, regressions first and the cases that stayed the
same last. A regressed, fixed or changed case tells the baseline's `k/N` → this run's, its
p-value (or why there is none) and, turn by turn, the sent texts and replies of the repeat the
listener shows of each run: two columns, the baseline's on the left, one column on a phone,
each cell labelled with its side so a stacked pair still reads. New cases, cases the test run
lacks and the same ones are a table each. What was not read is said where it would be. Every
text is escaped and shown as text, its lines kept and wrapped anywhere, as on the rest of the
page; a reply is cut at REPLY_SHOWN characters (its thread has all of it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from .comparison import ComparedCase, Comparison, Result, ShownRepeat, TurnText
from .console_links import thread_link
from .reports import clipped, p_value_text, rate_moved

REPLY_SHOWN = 4000
# Each change's group, and its count's words in the section's first line (a change this client
# does not know is shown by its own word).
GROUP_TITLES = {
    "regressed": "Regressed",
    "fixed": "Fixed",
    "changed": "Changed since the baseline",
    "new": "New: not in the baseline",
    "missing": "Not in this test run",
    "same": "The same",
}
COUNTED = {"missing": "not in this test run"}
# A turn's state when its reply came: a side without its text then had it, but it was not read.
ANSWERED = "answered"

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
    not_stored: Sequence[str] = (),
) -> str:
    """The section, `anchors` naming each stored case's place on the page by its id;
    `not_stored` names this run's cases the listener never stored, so never compared."""
    baseline = comparison.baseline
    counts = ", ".join(
        f"{count} {COUNTED.get(change, change)}" for change, count in comparison.counts.items()
    )
    notes = list(comparison.notes)
    if not_stored:
        notes.append(f"not compared, their records not stored: {', '.join(not_stored)}")
    parts = [
        '<section class="comparison" aria-labelledby="compared">',
        f'<h2 id="compared">Compared with run {baseline}</h2>',
        *([f'<p class="muted">{escape(counts)}</p>'] if counts else []),
        *(f'<p class="note">{escape(note)}</p>' for note in notes),
    ]
    for change in dict.fromkeys(case.change for case in comparison.cases):
        cases = [case for case in comparison.cases if case.change == change]
        title = f"{GROUP_TITLES.get(change, change)} ({len(cases)})"
        parts.append(
            f'<section class="group" data-change="{escape(change)}"><h3>{escape(title)}</h3>'
        )
        parts += [
            _side_by_side(case, baseline, several, anchors, console_url)
            for case in cases
            if case.side_by_side
        ]
        listed = [case for case in cases if not case.side_by_side]
        if listed:
            parts.append(_table(listed, several, anchors))
        parts.append("</section>")
    parts.append("</section>")
    return "\n".join(parts)


def _link(case: ComparedCase, several: bool, anchors: Mapping[int, str]) -> str:
    """The case's name, linked to its section of the page when it has one."""
    name = f"{case.suite} · {case.case}"
    if several and case.instance:
        name += f" [{case.instance}]"
    shown = f'<span class="name">{escape(name)}</span>'
    anchor = anchors.get(case.id) if case.now is not None else None
    return f'<a href="#{escape(anchor)}">{shown}</a>' if anchor else shown


def _tally(result: Result | None) -> str:
    return "—" if result is None else f"{result.passed_runs}/{result.runs} {result.verdict}"


def _tallies(case: ComparedCase) -> str:
    return f"{_tally(case.other)} → {_tally(case.now)}"


def evidence(case: ComparedCase) -> str:
    """What the change rests on: `p = 0.014`, `within noise (p = 0.2)`, or why there is none."""
    if case.change == "missing":
        return "not in this test run"
    if case.change == "new":
        return "not in the baseline"
    if case.change == "changed":
        return "not compared: its definition changed"
    if case.change == "same":
        moved = case.now and case.other and rate_moved(case.other.tally, case.now.tally)
        if moved and case.p_value is not None:
            return f"within noise (p = {p_value_text(case.p_value)})"
        return "the same pass rate"
    return "—" if case.p_value is None else f"p = {p_value_text(case.p_value)}"


def _table(cases: list[ComparedCase], several: bool, anchors: Mapping[int, str]) -> str:
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
    case: ComparedCase,
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
    ]
    replies = case.replies
    if replies is None:
        parts += [f'<p class="muted">The replies: {escape(case.unread or "not read")}</p>']
        return "\n".join([*parts, "</section>"])
    kept = {
        "before": any(turn.other is not None for turn in replies.turns),
        "now": any(turn.now is not None for turn in replies.turns),
    }
    parts += [
        '<div class="pair">',
        _head(replies.other, f"run {baseline}", "before", kept["before"], console_url),
        _head(replies.now, "this run", "now", kept["now"], console_url),
        "</div>",
    ]
    if not replies.turns:
        parts.append('<p class="muted">The records keep no turns of these repeats.</p>')
    for turn in replies.turns:
        parts += [
            f'<div class="pair" data-turn="{turn.turn}">',
            _cell(turn.other, replies.other, f"run {baseline}", turn.turn, "before"),
            _cell(turn.now, replies.now, "this run", turn.turn, "now"),
            "</div>",
        ]
    if replies.more:
        last = replies.turns[-1].turn if replies.turns else 0
        parts.append(f'<p class="muted">The turns after turn {last} were not read.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _head(
    repeat: ShownRepeat | None, whose: str, which: str, kept: bool, console_url: str | None
) -> str:
    """The side's repeat: its number, whether it passed, its thread, and why its texts are
    not there when they are not."""
    if repeat is None:
        label, unread = escape(f"{whose}: its record keeps no repeat of this case"), None
    else:
        state = {True: ": passed", False: ": did not pass", None: ""}[repeat.passed]
        thread = "" if repeat.thread is None else f" · {thread_link(repeat.thread, console_url)}"
        label = f"{escape(whose)}, repeat {repeat.repeat}{state}{thread}"
        unread = None
        if not kept:
            unread = "its record keeps no turns of this repeat"
        elif not repeat.readable:
            unread = "its thread could not be read (deleted since, or not the tester's)"
    told = "" if unread is None else f'<p class="facts">{escape(unread)}</p>'
    return (
        f'<div class="side {which}" data-side="{which}"><div class="label">{label}</div>'
        f"{told}</div>"
    )


def _cell(
    said: TurnText | None, repeat: ShownRepeat | None, whose: str, number: int, which: str
) -> str:
    label = f'<div class="label">{escape(whose)}, turn {number}</div>'
    if said is None:
        return (
            f'<div class="side {which}" data-side="{which}">{label}'
            '<p class="facts">no such turn</p></div>'
        )
    sent = "(not read)" if said.sent is None else clipped(said.sent, REPLY_SHOWN)
    parts = [
        f'<div class="side {which}" data-side="{which}">{label}',
        f'<div class="said user">{escape(sent or "")}</div>',
    ]
    missed = " missed" if said.passed is False else ""
    readable = repeat is not None and repeat.readable
    if said.reply is not None:
        reply = clipped(said.reply, REPLY_SHOWN) or ""
        parts.append(f'<div class="said assistant{missed}">{escape(reply)}</div>')
    elif readable and said.state and said.state != ANSWERED:
        parts.append(f'<p class="facts{missed}">no reply: the turn is {escape(said.state)}</p>')
    else:
        parts.append(f'<p class="facts{missed}">(reply not read)</p>')
    parts.append("</div>")
    return "".join(parts)
