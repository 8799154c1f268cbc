"""Conversation tests with pytest: `*.suite.toml` files collected as tests, one per case, and a
`mosaic_tester` fixture for conversations written in Python.

Enable it with one line in a `conftest.py` at the top of the tests (the project is not an
installed package, so there is no entry point):

    pytest_plugins = ["tester.pytest_plugin"]

Everything goes through the tester listener (`--mosaic-url`, the `mosaic_url` ini value, or
`http://127.0.0.1:$MOSAIC_TESTER_PORT`, 7333 by default), as `manage.py testassistant` does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tester.suites import reports
from tester.suites.client import ConversationThread, ListenerError, TesterClient
from tester.suites.files import SUITE_SUFFIX, Case, Suite, SuiteFileRefused, load_suite
from tester.suites.runner import PASSED, run_case

DEFAULT_PROJECT = "pytest"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mosaic", "conversation tests through the tester listener")
    group.addoption(
        "--mosaic-url",
        dest="mosaic_url",
        metavar="URL",
        help="the tester listener (default: http://127.0.0.1:$MOSAIC_TESTER_PORT, port 7333)",
    )
    group.addoption(
        "--mosaic-project",
        dest="mosaic_project",
        metavar="NAME",
        help=f"the project of mosaic_tester's threads (default: {DEFAULT_PROJECT})",
    )
    parser.addini("mosaic_url", "the tester listener's URL", default="")
    parser.addini("mosaic_project", "the project of mosaic_tester's threads", default="")


class Listener:
    """One tester client for the whole session, and the projects it has found or made."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.projects: dict[str, int] = {}
        self._client: TesterClient | None = None

    @property
    def client(self) -> TesterClient:
        if self._client is None:
            url = self.config.getoption("mosaic_url") or self.config.getini("mosaic_url")
            port = os.environ.get("MOSAIC_TESTER_PORT", "7333")
            self._client = TesterClient(url or f"http://127.0.0.1:{port}")
        return self._client

    def project_id(self, name: str) -> int:
        with self.lock:
            if name not in self.projects:
                self.projects[name] = self.client.project_id(name)
            return self.projects[name]

    def default_project(self) -> str:
        chosen = self.config.getoption("mosaic_project") or self.config.getini("mosaic_project")
        return str(chosen or DEFAULT_PROJECT)


LISTENER = pytest.StashKey[Listener]()


def listener_of(config: pytest.Config) -> Listener:
    if LISTENER not in config.stash:
        config.stash[LISTENER] = Listener(config)
    return config.stash[LISTENER]


class MosaicTester:
    """The `mosaic_tester` fixture: new tester threads, each closed at the test's end."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.threads: list[ConversationThread] = []

    def thread(self, name: str, *, instance: str | None = None) -> ConversationThread:
        """A new tester thread `<name> · <UTC time>` in the session's project; `send(body,
        within=…)` on it returns the reply, or fails the test when none comes."""
        listener = self.listener
        thread = listener.client.new_thread(
            project=listener.project_id(listener.default_project()), name=name, instance=instance
        )
        self.threads.append(thread)
        return thread

    def close(self) -> None:
        for thread in self.threads:
            thread.close()


@pytest.fixture
def mosaic_tester(request: pytest.FixtureRequest) -> Iterator[MosaicTester]:
    """Talk to the assistant as the tester: `thread = mosaic_tester.thread("name");
    reply = thread.send("hello", within=10); assert "hello" in reply.body.lower()`."""
    tester = MosaicTester(listener_of(request.config))
    yield tester
    tester.close()


# --- suite files as tests ----------------------------------------------------------------


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name.endswith(SUITE_SUFFIX):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


class SuiteFile(pytest.File):
    """A suite file: one test per case. A refused file is a collection error naming its line."""

    def collect(self) -> Iterator[CaseItem]:
        try:
            suite = load_suite(self.path)
        except SuiteFileRefused as refusal:
            raise self.CollectError(str(refusal)) from None
        for case in suite.cases:
            yield CaseItem.from_parent(self, name=case.name, suite=suite, case=case)


class CaseFailed(AssertionError):
    """A case whose turn did not get the reply it expected."""


class CaseItem(pytest.Item):
    """One case of a suite file, run in a new tester thread as `testassistant` runs it."""

    def __init__(self, *, suite: Suite, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.case = case

    def runtest(self) -> None:
        listener = listener_of(self.config)
        project = listener.project_id(self.suite.project)
        result = run_case(listener.client, self.suite, self.case, project=project)
        if result.status != PASSED and result.failure is not None:
            raise CaseFailed(
                f"turn {result.turn} {reports.shown(result.sent or '', 60)}\n"
                f"expected: {result.failure.expected}\n"
                f"actual: {result.failure.actual}"
            )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed | ListenerError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.case.line - 1, f"{self.suite.name} · {self.case.name}"
