"""`--markdown FILE`: a test run summarised for a pull-request comment.

The verdicts counted, the changes against the baseline counted, the regressions with their
p-values, the baseline's `k/N` → this run's and where each first went wrong, the fixed cases,
the test run's tokens and cost (unknown told as unknown, never as zero: `costs.Spend`), the
stored test run's id and what it was compared with, and the `mosaic-test` command that runs it
again.

Case names and replies are another party's text, and a comment renders what it is given. So
every text, ours included, goes through `markdown_text`: on one line, its control characters
as escapes (`visible`), and every ASCII punctuation character escaped with a backslash. That
leaves nothing Markdown reads as markup: no `|` ends a table's cell, no backtick opens code, no
`<` opens HTML, no `[` or `![` a link or an image, no `:` or `www.` an autolink, no `$` maths,
no `#`, `>`, `-` or `1.` a block; each shows as the character it is. The command goes in a code
block fenced longer than any run of backticks in it, so nothing in it can close the fence.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from .reports import clipped, miss, name_of, p_value_text, stopped
from .runner import VERDICTS, CaseReport, TestRun
from .visible import visible

# The changes the summary counts, in the order it counts them.
CHANGES = ("regressed", "fixed", "changed", "new", "same")
# The longest excerpt of where a regression went wrong.
EXCERPT = 200
PROGRAM = "mosaic-test"
ASCII_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def markdown_text(text: str, limit: int | None = None) -> str:
    """`text` as Markdown shows it, literally and on one line: its control characters as
    escapes, its runs of white space (line breaks among them) as one space, cut at `limit`
    characters, and each ASCII punctuation character after a backslash."""
    line = " ".join(visible(text).split())
    if limit is not None:
        line = clipped(line, limit) or ""
    return ASCII_PUNCTUATION.sub(r"\\\1", line)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A table of texts, each cell through `markdown_text`."""

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(markdown_text(cell) for cell in cells) + " |"

    return [row(header), "|" + " --- |" * len(header), *(row(cells) for cells in rows)]


def command(argv: Sequence[str]) -> str:
    """`mosaic-test` with `argv`, each argument quoted for a POSIX shell; a control character
    in one shown as its escape, as everywhere (that argument no longer reproduces exactly)."""
    return visible(shlex.join([PROGRAM, *argv]))


def fenced(text: str) -> list[str]:
    """`text` in a code block whose fence is longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}sh", text, fence]


def summary(
    test_run: TestRun,
    *,
    run_id: int | None,
    baseline: int | None,
    compare: str | int | None,
    alpha: float,
    argv: Sequence[str],
    notes: Sequence[str] = (),
    several: bool = False,
) -> str:
    """The comment, as Markdown text."""
    title = f"Conversation tests: run {run_id}" if run_id is not None else "Conversation tests"
    lines = [f"### {markdown_text(title)}", ""]
    lines += [markdown_text(_compared_with(run_id, baseline, compare, alpha)), ""]
    counts = [str(test_run.count(verdict)) for verdict in VERDICTS]
    lines += table([*VERDICTS, "not run"], [[*counts, str(len(test_run.not_run))]])
    if baseline is not None:
        changes = [str(sum(r.change == change for r in test_run.reports)) for change in CHANGES]
        lines += ["", *table(CHANGES, [changes])]
    for change, heading in (("regressed", "Regressed"), ("fixed", "Fixed")):
        found = [report for report in test_run.reports if report.change == change]
        if found:
            lines += ["", f"#### {markdown_text(heading)}", ""]
            lines += _changed(found, several=several, with_miss=change == "regressed")
    lines += ["", markdown_text(f"Tokens and cost: {test_run.spend.told()}")]
    stop = stopped(test_run)
    told = [*notes, *([stop] if stop is not None else [])]
    if told:
        lines += ["", *(f"- {markdown_text(note)}" for note in told)]
    lines += ["", markdown_text("Run it again:"), "", *fenced(command(argv))]
    return "\n".join(lines) + "\n"


def _compared_with(
    run_id: int | None, baseline: int | None, compare: str | int | None, alpha: float
) -> str:
    run = f"Run {run_id}" if run_id is not None else "This test run"
    if compare is None:
        return f"{run}, not compared with an earlier run."
    if baseline is None:
        return f"{run}, compared with no run: none matched --compare {compare}."
    asked = "" if compare == baseline else f" (--compare {compare})"
    return f"{run}, compared with run {baseline}{asked} at alpha {alpha:g}."


def _changed(reports: Sequence[CaseReport], *, several: bool, with_miss: bool) -> list[str]:
    """The regressed or fixed cases: `k/N` before and now, the p-value, and for a regression
    where it first went wrong."""
    header = ["case", "baseline", "this run", "p-value"]
    rows = []
    for report in reports:
        before = "unknown"
        if report.baseline_tally is not None:
            before = f"{report.baseline_tally[0]}/{report.baseline_tally[1]}"
        row = [
            name_of(report, with_instance=several),
            before,
            f"{report.passed_repeats}/{report.repeat_count} {report.verdict}",
            p_value_text(report.p_value) if report.p_value is not None else "—",
        ]
        rows.append([*row, clipped(miss(report), EXCERPT) or ""] if with_miss else row)
    return table([*header, "where it first went wrong"] if with_miss else header, rows)
