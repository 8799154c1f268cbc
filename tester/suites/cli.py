"""`mosaic-test FILE_OR_DIR...`: conversation tests for the assistant, run as the tester.

The same runner is `manage.py testassistant` inside the project. Every file is checked before
anything is sent. The cases then run through the tester listener over HTTP and WebSocket, as the
tester Console does: never as the human, never through the broker, so what passes is what the
listener serves. Each test run is stored through the listener (`/api/suite-runs`), compared
with an earlier one when asked, and its passed repeats' threads archived.

Exit status: 0 when no case is `fail` or `error` and `--max-cost` left no case unrun (with
`--fail-on-regression`: when no case regressed), 1 otherwise, 2 for a usage error, a refused
file, a refusal from the listener or a listener that does not answer, 130 when interrupted. A
stored test run that cannot finish (a refusal, an interruption, the client failing) is ended
`halted` with its reason. `--check` and `--list` send nothing: they check every file, telling
every mistake (2 when there is one, else 0), and `--list` then prints the cases as they would
run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, Protocol

from . import DEFAULT_PORT, reports
from .client import ListenerError, TesterClient
from .comparison import read_comparison
from .costs import PRICE_MAX, instance_prices
from .files import REPEAT_MAX, Suite, load_suites
from .history import halt, planned_instances, record
from .html_report import write_html
from .key_reader import SuiteFileRefused
from .markdown_report import summary as markdown_summary
from .runner import ERROR, FAIL, CaseReport, Plan, TestRun, plans, run_plans
from .statistics import DEFAULT_ALPHA
from .visible import visible, visible_json

FAILED_STATUS = 1
REFUSED_STATUS = 2
# A shell's status for a process ended by SIGINT (128 + 2).
INTERRUPTED_STATUS = 130
URL_VARIABLE = "MOSAIC_TESTER_URL"


def default_url(environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """`MOSAIC_TESTER_URL`, else the tester listener at `MOSAIC_TESTER_PORT` on loopback."""
    url = environ.get(URL_VARIABLE)
    if url:
        return url
    return f"http://127.0.0.1:{environ.get('MOSAIC_TESTER_PORT', DEFAULT_PORT)}"


def positive(limit: int) -> Any:
    def number(value: str) -> int:
        parsed = int(value)
        if not 1 <= parsed <= limit:
            raise ValueError(value)
        return parsed

    number.__name__ = f"a number from 1 to {limit}"
    return number


def alpha_level(value: str) -> float:
    """A significance level: more than 0 and less than 1."""
    parsed = float(value)
    if not math.isfinite(parsed) or not 0 < parsed < 1:
        raise ValueError(value)
    return parsed


def amount(value: str) -> float:
    """`--max-cost`: an amount more than 0, in the unit of the suite files' prices."""
    parsed = float(value)
    if not 0 < parsed <= PRICE_MAX:
        raise ValueError(value)
    return parsed


alpha_level.__name__ = "a number more than 0 and less than 1"
amount.__name__ = "an amount, more than 0"


def run_id(value: str) -> str | int:
    """`last`, or a stored test run's id."""
    if value == "last":
        return value
    parsed = int(value)
    if parsed < 1:
        raise ValueError(value)
    return parsed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="FILE_OR_DIR", help="suite files")
    parser.add_argument(
        "--url",
        metavar="URL",
        help=f"the tester listener (default: ${URL_VARIABLE}, else http://127.0.0.1:PORT)",
    )
    parser.add_argument("--junit", metavar="PATH", help="write a JUnit XML report here")
    parser.add_argument("--html", metavar="PATH", help="write a self-contained HTML report here")
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        help="write a summary for a pull-request comment here (Markdown)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per case instead"
    )
    parser.add_argument(
        "--jobs", type=positive(64), default=1, metavar="N", help="repeats run at once"
    )
    parser.add_argument(
        "-k", dest="keyword", metavar="SUBSTRING", help="only cases whose name contains it"
    )
    parser.add_argument(
        "--repeat",
        type=positive(REPEAT_MAX),
        metavar="N",
        help=f"run every case N times (1–{REPEAT_MAX})",
    )
    parser.add_argument(
        "--instance",
        dest="instances",
        action="append",
        default=[],
        metavar="NAME",
        help="run every case on this instance; give it again to compare instances side by side",
    )
    parser.add_argument(
        "--compare",
        type=run_id,
        metavar="last|RUN_ID",
        help="compare with the previous run of the same suites, or with run RUN_ID",
    )
    parser.add_argument(
        "--alpha",
        type=alpha_level,
        default=DEFAULT_ALPHA,
        metavar="P",
        help=f"a change is significant when its p-value is below P (default {DEFAULT_ALPHA})",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 only when a case regressed (compares with the last run unless --compare)",
    )
    parser.add_argument(
        "--max-cost",
        type=amount,
        metavar="AMOUNT",
        help="send no new turn once the replies cost this much, at the suite files' [pricing] "
        "(else the instances' prices in the business file)",
    )
    parser.add_argument(
        "--keep-threads",
        action="store_true",
        help="leave the threads of passed repeats unarchived",
    )
    sending_nothing = parser.add_mutually_exclusive_group()
    sending_nothing.add_argument(
        "--check",
        action="store_true",
        help="check every file and tell every mistake, sending nothing (exit 2 on any)",
    )
    sending_nothing.add_argument(
        "--list",
        action="store_true",
        help="check every file and list the cases, repeats and instances as they would run, "
        "sending nothing",
    )


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(
        prog="mosaic-test",
        description="Run conversation tests (suite files) against the assistant, as the tester.",
    )
    add_arguments(made)
    return made


class Writer(Protocol):
    def write(self, text: str, /) -> Any: ...

    def flush(self) -> Any: ...


class VisibleWriter:
    """A writer passing everything it is given through `visible` to the one it wraps: what the
    command prints quotes replies, judges and listeners, and none of it may act on a terminal."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer

    def write(self, text: str, /) -> Any:
        return self.writer.write(visible(text))

    def flush(self) -> Any:
        return self.writer.flush()


class Refused(Exception):
    """The test run cannot go on: a refused file, a usage error, the listener's refusal (its
    `code: detail`)."""


def run(
    options: argparse.Namespace,
    *,
    out: Writer,
    err: Writer,
    url: str,
    argv: Sequence[str] | None = None,
) -> int:
    """One test run as the options say; its exit status. Every line goes out through `visible`.
    `argv` is the command line the options were read from (None: they were given otherwise, and
    the `--markdown` summary tells the `mosaic-test` arguments that give them: `as_argv`)."""
    out, err = VisibleWriter(out), VisibleWriter(err)
    try:
        return _run(options, out=out, url=url, argv=as_argv(options) if argv is None else argv)
    except Refused as refusal:
        err.write(f"{refusal}\n")
        err.flush()
        return REFUSED_STATUS
    except KeyboardInterrupt:
        err.write("interrupted: the test run was halted\n")
        err.flush()
        return INTERRUPTED_STATUS


def as_argv(options: argparse.Namespace) -> list[str]:
    """`mosaic-test` arguments that parse back to `options`: each of its options whose value is
    not the default, then the paths. Only `mosaic-test`'s own options: `testassistant` also takes
    Django's (`--settings`, `--verbosity`, …), which `mosaic-test` would refuse."""
    argv: list[str] = []
    for action in parser()._actions:
        value = getattr(options, action.dest, action.default)
        if not action.option_strings or action.dest == "help" or value == action.default:
            continue
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:
            argv.append(flag)
        else:
            argv += [part for item in _listed(value) for part in (flag, str(item))]
    paths = [str(path) for path in options.paths]
    # A path that looks like an option is read as a path after `--`.
    return [*argv, *(["--"] if any(path.startswith("-") for path in paths) else []), *paths]


def _listed(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _run(options: argparse.Namespace, *, out: Writer, url: str, argv: Sequence[str]) -> int:
    try:
        suites = load_suites(options.paths)
    except SuiteFileRefused as refusal:
        # Every mistake of every file, one line each.
        raise Refused("\n".join(f"refused: {problem}" for problem in refusal.problems)) from None
    planned = plans(
        suites, keyword=options.keyword, repeat=options.repeat, instances=options.instances
    )
    if not planned:
        raise Refused(f"refused: no case matches -k {options.keyword!r}")

    def tell(text: str) -> None:
        out.write(text + "\n")
        out.flush()

    if options.check:
        tell(checked(suites, planned))
        return 0
    if options.list:
        for line in listed(planned, as_json=options.json):
            tell(line)
        return 0
    try:
        client = TesterClient(options.url or url)
    except ListenerError as refusal:
        raise Refused(str(refusal)) from refusal
    compare = options.compare
    if compare is None and options.fail_on_regression:
        compare = "last"
    several = len({plan.instance for plan in planned}) > 1

    started = time.monotonic()
    try:
        stored = client.start_test_run(
            suites=sorted({suite.name for suite in suites}),
            compare=compare,
            alpha=options.alpha,
            instances=planned_instances(planned),
            keyword=options.keyword or None,
        )
    except ListenerError as refusal:
        raise Refused(str(refusal)) from refusal
    # Asked once the test run has started: its start is the first request, the one a human
    # listener's 404 answers by name (`human-listener`).
    try:
        # The instances' own prices (the business file's), for models no suite file prices.
        prices = instance_prices(client.instances())
    except ListenerError as refusal:
        halt(client, stored["id"], str(refusal))
        raise Refused(str(refusal)) from refusal
    if options.max_cost is not None and not (prices or any(suite.pricing for suite in suites)):
        # A limit no turn's cost could count towards would stop nothing.
        told = (
            "refused: --max-cost needs prices: no suite file has a [pricing] table, and no "
            "instance a price in the business file"
        )
        halt(client, stored["id"], told)
        raise Refused(told)
    notes: list[str] = []
    if stored.get("baseline") is not None:
        too_few = reports.too_few_repeats_note(planned, options.alpha)
        if too_few is not None:
            notes.append(too_few)
            if not options.json:
                tell(too_few)
    history_refusal: list[ListenerError] = []

    def on_report(report: CaseReport) -> None:
        try:
            record(client, stored["id"], report)
        except ListenerError as refusal:
            history_refusal.append(refusal)
        if options.json:
            tell(reports.json_line(report))
        else:
            tell(reports.line(report, with_instance=several, compared=compare is not None))

    try:
        test_run = run_plans(
            planned,
            client,
            jobs=options.jobs,
            on_report=on_report,
            max_cost=options.max_cost,
            instance_prices=prices,
        )
    except KeyboardInterrupt:
        halt(client, stored["id"], "interrupted: the client was stopped (Ctrl-C)")
        raise
    except Exception as error:
        halt(client, stored["id"], f"the client failed: {type(error).__name__}: {error}")
        raise
    refusals = [test_run.refusal] if test_run.refusal else history_refusal
    if refusals:
        halt(client, stored["id"], str(refusals[0]))
    else:
        try:
            ended = client.end_test_run(stored["id"])
            if ended.get("state") == "halted":
                # The listener halted it first: silent past its limit.
                refusals = [ListenerError("halted", str(ended.get("reason")))]
            elif not options.keep_threads:
                archive_passed(client, test_run)
        except ListenerError as failed:
            refusals = [failed]
    # The note on repeats was told before the cases; the coverage is told with the summary.
    coverage = reports.coverage_note(test_run, stored.get("baseline"))
    untold = [coverage] if coverage is not None else []
    notes += untold
    _report(
        options,
        test_run,
        planned,
        tell,
        started,
        stored,
        compare,
        client,
        notes,
        untold,
        argv=argv,
    )
    if refusals:
        raise Refused(str(refusals[0]))
    return status(test_run, fail_on_regression=options.fail_on_regression)


def _report(
    options: argparse.Namespace,
    test_run: TestRun,
    planned: Sequence[Plan],
    tell: Any,
    started: float,
    stored: dict[str, Any],
    compare: str | int | None,
    client: TesterClient,
    notes: Sequence[str],
    untold: Sequence[str],
    *,
    argv: Sequence[str],
) -> None:
    several = len({plan.instance for plan in planned}) > 1
    baseline = stored.get("baseline") if compare is not None else None
    if options.junit:
        reports.write_junit(test_run, planned, options.junit)
    if options.html:
        comparison = None
        if baseline is not None:
            comparison = read_comparison(client, run_id=stored["id"], baseline=baseline)
        write_html(
            test_run,
            planned,
            options.html,
            run_id=stored["id"],
            baseline=baseline,
            console_url=client.url,
            notes=notes,
            comparison=comparison,
        )
    if options.markdown:
        summarised = markdown_summary(
            test_run,
            run_id=stored["id"],
            baseline=baseline,
            compare=compare,
            alpha=options.alpha,
            argv=argv,
            notes=notes,
            several=several,
        )
        reports.write_report(options.markdown, summarised)
    if options.json:
        tell(reports.json_summary(test_run, run_id=stored["id"], notes=notes))
        return
    stop = reports.stop_line(test_run)
    if stop is not None:
        tell(stop)
    for plan in test_run.not_run:
        tell(reports.not_run_line(plan, with_instance=several))
    for row in reports.instance_matrix(test_run.reports):
        tell(row)
    for note in untold:
        tell(note)
    tell(
        reports.summary(
            test_run, time.monotonic() - started, run_id=stored["id"], baseline=baseline
        )
    )


def repeats_told(count: int) -> str:
    return f"{count} repeat{'s' if count != 1 else ''}"


def checked(suites: Sequence[Suite], planned: Sequence[Plan]) -> str:
    """`--check`'s line when no file has a mistake: what would run."""
    files = len({suite.file for suite in suites})
    return (
        f"checked {files} file{'s' if files != 1 else ''}, no mistake: {len(planned)} "
        f"case{'s' if len(planned) != 1 else ''} to run, "
        f"{repeats_told(sum(plan.repeat for plan in planned))}; nothing sent"
    )


def listed(planned: Sequence[Plan], *, as_json: bool) -> list[str]:
    """`--list`: each case on each instance as it would run, in the order it would, with its
    repeats and where it is written; then the count. With `--json`, one object per case."""
    if as_json:
        return [
            visible_json(
                {
                    "suite": plan.suite.name,
                    "case": plan.case.name,
                    "file": plan.suite.file,
                    "line": plan.case.line,
                    "instance": plan.instance,
                    "repeats": plan.repeat,
                }
            )
            for plan in planned
        ]
    lines = [
        f"{plan.title} · {repeats_told(plan.repeat)} on "
        f"{plan.instance or 'the default instance'} ({plan.suite.file}:{plan.case.line})"
        for plan in planned
    ]
    total = sum(plan.repeat for plan in planned)
    cases = f"{len(planned)} case{'s' if len(planned) != 1 else ''}"
    return [*lines, f"{cases}, {repeats_told(total)}; nothing sent"]


def archive_passed(client: TesterClient, test_run: TestRun) -> None:
    """Archive the threads of the repeats that passed; a failed one stays for a person."""
    for report in test_run.reports:
        for repeat in report.repeats:
            if repeat.passed and repeat.thread is not None:
                client.archive(repeat.thread)


def status(test_run: TestRun, *, fail_on_regression: bool) -> int:
    if fail_on_regression:
        return FAILED_STATUS if test_run.regressed else 0
    if test_run.count(FAIL) or test_run.count(ERROR):
        return FAILED_STATUS
    # Cases --max-cost left unrun are no pass: what they would have said is unknown.
    if test_run.max_cost_reached and test_run.not_run:
        return FAILED_STATUS
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    """The `mosaic-test` command."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    options = parser().parse_args(arguments)
    sys.exit(run(options, out=sys.stdout, err=sys.stderr, url=default_url(), argv=arguments))


if __name__ == "__main__":
    main()
