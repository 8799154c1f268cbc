"""Conversation tests with pytest: `*.suite.toml` files collected as tests, one per case and
instance, and a `mosaic_tester` fixture for conversations written in Python.

Installed with the package (`pip install`), pytest loads it through its `pytest11` entry point:
no conftest line is needed. Inside the project, `pytest_plugins = ["tester.suites.pytest_plugin"]`
does the same. Everything goes through the tester listener (`--mosaic-url`, else
`$MOSAIC_TESTER_URL`, else `http://127.0.0.1:$MOSAIC_TESTER_PORT`, by default `DEFAULT_PORT`),
as `mosaic-test` does; a listener that does not answer stops the session with one error before
any test runs. With `--mosaic-store` (or `--mosaic-compare`) the session's suite-file cases are
stored as one test run (`pytest_history`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from . import DEFAULT_PORT
from .cli import alpha_level, default_url, run_id
from .client import ConversationThread, ListenerError, Outcome, Reply, TesterClient
from .costs import Price, instance_prices
from .expectation_keys import expect_of
from .expectations import check_turn
from .files import SUITE_SUFFIX, load_suite
from .judge import JudgeError, turn_transcript
from .judge_and_pricing_tables import NO_JUDGE, judge_from_environment
from .key_reader import SuiteFileRefused
from .pytest_history import SessionRun
from .reports import cost_properties, miss_lines, statistics_properties, tally
from .runner import ERROR, FAIL, Judges, Plan, plans, run_plan
from .statistics import DEFAULT_ALPHA
from .visible import visible

DEFAULT_PROJECT = "pytest"
# pytest's name of an ini value's type (written apart: mypy takes the bare "bool" for a type).
BOOLEAN: Literal["bool"] = "bool"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mosaic", "conversation tests through the tester listener")
    group.addoption(
        "--mosaic-url",
        dest="mosaic_url",
        metavar="URL",
        help=(
            "the tester listener (default: $MOSAIC_TESTER_URL,"
            f" else http://127.0.0.1:{DEFAULT_PORT})"
        ),
    )
    group.addoption(
        "--mosaic-project",
        dest="mosaic_project",
        metavar="NAME",
        help=f"the project of mosaic_tester's threads (default: {DEFAULT_PROJECT})",
    )
    group.addoption(
        "--mosaic-store",
        dest="mosaic_store",
        action="store_true",
        help="store the suite files' cases as one test run, as mosaic-test does",
    )
    group.addoption(
        "--mosaic-compare",
        dest="mosaic_compare",
        type=run_id,
        metavar="last|RUN_ID",
        help="store, and compare each case with the last finished test run of the same "
        "selection, or with run RUN_ID",
    )
    group.addoption(
        "--mosaic-alpha",
        dest="mosaic_alpha",
        type=alpha_level,
        default=DEFAULT_ALPHA,
        metavar="P",
        help=f"a change is significant when its p-value is below P (default {DEFAULT_ALPHA})",
    )
    parser.addini("mosaic_url", "the tester listener's URL", default="")
    parser.addini("mosaic_project", "the project of mosaic_tester's threads", default="")
    parser.addini(
        "mosaic_store", "store the suite files' cases as one test run", type=BOOLEAN, default=False
    )


class Listener:
    """One tester client for the whole session, and the projects it has found or made."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.projects: dict[str, int] = {}
        self.judges = Judges()
        self._client: TesterClient | None = None
        self._prices: dict[str, Price] | None = None
        # Every case of the suite files collected, and the session's stored run (None: not
        # stored).
        self.collected: list[Plan] = []
        compare = config.getoption("mosaic_compare", None)
        # Comparing needs a stored run to compare.
        storing = (
            compare is not None
            or config.getoption("mosaic_store", False)
            or config.getini("mosaic_store")
        )
        self.history = (
            SessionRun(compare=compare, alpha=config.getoption("mosaic_alpha", DEFAULT_ALPHA))
            if storing
            else None
        )

    @property
    def url(self) -> str:
        chosen = self.config.getoption("mosaic_url") or self.config.getini("mosaic_url")
        return str(chosen or default_url())

    @property
    def client(self) -> TesterClient:
        if self._client is None:
            self._client = TesterClient(self.url)
        return self._client

    def project_id(self, name: str) -> int:
        with self.lock:
            if name not in self.projects:
                self.projects[name] = self.client.project_id(name)
            return self.projects[name]

    def instance_prices(self) -> dict[str, Price]:
        """The instances' own prices (the business file's), asked once a session."""
        with self.lock:
            if self._prices is None:
                self._prices = instance_prices(self.client.instances())
            return self._prices

    def default_project(self) -> str:
        chosen = self.config.getoption("mosaic_project") or self.config.getini("mosaic_project")
        return str(chosen or DEFAULT_PROJECT)


LISTENER = pytest.StashKey[Listener]()


def listener_of(config: pytest.Config) -> Listener:
    if LISTENER not in config.stash:
        config.stash[LISTENER] = Listener(config)
    return config.stash[LISTENER]


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Ask the listener once, before any test that needs it runs: one clear error when it
    does not answer, not a traceback per test."""
    needs = [
        item
        for item in items
        if isinstance(item, CaseItem) or "mosaic_tester" in getattr(item, "fixturenames", ())
    ]
    if not needs:
        return
    listener = listener_of(config)
    try:
        # A route of the tester listener's own: the human listener answers it naming itself.
        listener.client.request("GET", "/api/suite-runs?limit=1")
    except ListenerError as refusal:
        raise pytest.UsageError(
            visible(
                f"mosaic: the tester listener at {listener.url} cannot run conversation tests: "
                f"{refusal} (set --mosaic-url or MOSAIC_TESTER_URL)"
            )
        ) from None


# --- conversations written in Python --------------------------------------------------------


class CheckFailed(AssertionError):
    """A reply that misses an expectation of `reply.check`."""


class JudgeFailed(AssertionError):
    """A judge that could not grade a reply of `reply.check`: one line naming the judge (its
    model and URL) and what it answered."""


@dataclasses.dataclass(frozen=True)
class CheckedReply(Reply):
    """A reply of `mosaic_tester`: its `body`, `seconds`, `first_token_seconds`, `usage`,
    `model`, `finish_reason` and the turn's `steps`, and `check(**expect)` with a suite file's
    `expect` keys (`tools`, `tools_order`, `no_tools` and `max_steps` among them)."""

    transcript: tuple[tuple[str, str], ...] = ()
    # The session's judges: one per configuration, as in a test run.
    judges: Judges = dataclasses.field(default_factory=Judges, compare=False, repr=False)

    def check(self, **expect: Any) -> CheckedReply:
        """Fail the test, saying what was expected and what came, unless the reply meets
        every expectation (judge included: `MOSAIC_JUDGE_*` names the judge). A judge that
        cannot grade it fails the test on one line, this frame and the judge's hidden."""
        __tracebackhide__ = True
        if "max_cost" in expect:
            # A reply's price is a suite file's [pricing]; here it would always be unknown.
            raise TypeError(
                "reply.check: max_cost needs a suite file's [pricing]; compare reply.usage "
                "with your own prices instead"
            )
        try:
            wanted = expect_of(expect)
        except SuiteFileRefused as refusal:
            raise TypeError(f"reply.check: {refusal.reason}") from None
        judge = None
        if wanted.judge is not None:
            config = judge_from_environment()
            if config is None:
                raise TypeError(f"reply.check: {NO_JUDGE}")
            judge = self.judges.configured(config)
        outcome = Outcome({}, self, "answered", None, self.seconds)
        try:
            checked = check_turn(wanted, outcome, transcript=self.transcript, judge=judge)
        except JudgeError as error:
            raise JudgeFailed(str(error)) from None
        if checked.failure is not None:
            raise CheckFailed(
                visible(f"expected {checked.failure.expected}\nactual: {checked.failure.actual}")
            )
        return self


class TesterThread:
    """A tester thread of `mosaic_tester`: `send` returns the reply, or fails the test."""

    def __init__(self, thread: ConversationThread, judges: Judges) -> None:
        self.thread = thread
        self.judges = judges
        self.id = thread.id
        self.name = thread.name
        self.transcript: list[tuple[str, str]] = []

    def send(self, body: str, *, within: float = 30.0) -> CheckedReply:
        reply = self.thread.send(body, within=within)
        self.transcript += turn_transcript(body, steps=reply.steps, reply=reply.body)
        fields = {field.name: getattr(reply, field.name) for field in dataclasses.fields(reply)}
        return CheckedReply(**fields, transcript=tuple(self.transcript), judges=self.judges)

    def close(self) -> None:
        self.thread.close()


class MosaicTester:
    """The `mosaic_tester` fixture: new tester threads, each closed at the test's end."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.threads: list[TesterThread] = []

    def thread(self, name: str, *, instance: str | None = None) -> TesterThread:
        """A new tester thread `<name> · <UTC time>` in the session's project."""
        listener = self.listener
        thread = listener.client.new_thread(
            project=listener.project_id(listener.default_project()), name=name, instance=instance
        )
        self.threads.append(TesterThread(thread, listener.judges))
        return self.threads[-1]

    def close(self) -> None:
        for thread in self.threads:
            thread.close()


@pytest.fixture
def mosaic_tester(request: pytest.FixtureRequest) -> Iterator[MosaicTester]:
    """Talk to the assistant as the tester: `thread = mosaic_tester.thread("name");
    thread.send("hello", within=10).check(icontains=["hello"], max_seconds=5)`."""
    tester = MosaicTester(listener_of(request.config))
    yield tester
    tester.close()


# --- suite files as tests ----------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith(SUITE_SUFFIX):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


class SuiteFile(pytest.File):
    """A suite file: one test per case and instance. A refused file is a collection error
    naming its line."""

    def collect(self) -> Iterator[CaseItem]:
        try:
            suite = load_suite(self.path)
        except SuiteFileRefused as refusal:
            raise self.CollectError(visible(str(refusal))) from None
        planned = plans([suite])
        listener_of(self.config).collected += planned
        several = len({plan.instance for plan in planned}) > 1
        for plan in planned:
            name = plan.case.name + (f"[{plan.instance}]" if several else "")
            yield CaseItem.from_parent(self, name=name, plan=plan)


class CaseFailed(AssertionError):
    """A case whose verdict is `fail` or `error`."""


class CaseItem(pytest.Item):
    """One case of a suite file on one instance, its repeats run as `mosaic-test` runs them;
    `flaky` passes, as it does there."""

    def __init__(self, *, plan: Plan, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan

    def runtest(self) -> None:
        listener = listener_of(self.config)
        history = listener.history
        if history is not None and history.waiting:
            selected = [item.plan for item in self.session.items if isinstance(item, CaseItem)]
            history.start(listener.client, selected, listener.collected)
        try:
            report = run_plan(
                listener.client,
                self.plan,
                project=listener.project_id(self.plan.suite.project),
                judges=listener.judges,
                instance_prices=listener.instance_prices(),
            )
        except ListenerError as refusal:
            # No verdict on the assistant: the stored run cannot go on, as in mosaic-test.
            if history is not None:
                history.halt(str(refusal))
            raise
        except Exception as error:
            if history is not None:
                history.halt(f"the client failed: {type(error).__name__}: {error}")
            raise
        if history is not None:
            history.record(report)
        compared = history is not None and history.compare is not None
        self.user_properties += [
            ("verdict", report.verdict),
            ("passed_repeats", report.passed_repeats),
            ("passed_runs", report.passed_repeats),
            ("repeat_count", report.repeat_count),
            ("runs", report.repeat_count),
            ("threads", " ".join(str(thread) for thread in report.threads)),
            *statistics_properties(report).items(),
            *cost_properties(report.spend).items(),
            *([("change", report.change or "")] if compared else []),
        ]
        if report.verdict in (FAIL, ERROR):
            told = "\n".join(miss_lines(report))
            raise CaseFailed(visible(f"{tally(report, compared=compared)}\n{told}"))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed | ListenerError):
            return visible(str(excinfo.value))
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.plan.case.line - 1, self.plan.title


# --- the session's stored test run ---------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """End the stored run: finished, or halted when the session was interrupted or stopped
    before every selected case ran."""
    listener = session.config.stash.get(LISTENER, None)
    if listener is None or listener.history is None:
        return
    history = listener.history
    # `-x` and `--maxfail` say why they stopped the session here.
    stopped_early = session.shouldfail or session.shouldstop
    history.end(
        interrupted=exitstatus == pytest.ExitCode.INTERRUPTED,
        unreached=len(history.planned) - len(history.reports),
        stopped_early=str(stopped_early) if stopped_early else None,
    )


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The stored run, told as `mosaic-test` tells its own, after pytest's own summary."""
    listener = config.stash.get(LISTENER, None)
    if listener is None or listener.history is None:
        return
    told = listener.history.told()
    if told:
        terminalreporter.write_sep("-", "mosaic test run")
        for line in told:
            terminalreporter.write_line(visible(line))
