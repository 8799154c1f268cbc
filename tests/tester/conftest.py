"""Real servers for the conversation tests: `manage.py serve` on free ports over a database of
its own, the offline backend answering (`suite_server`) or no runner at all (`silent_server`),
and the human's own work on it, to show that a run leaves it alone; and the offline one ready
for a pytest of pytester's own with the plugin (`plugin_live`)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.console.server import ROOT, serving
from tests.support.served import Served, human_left_alone, served

# The documented line that enables the plugin inside the project.
PLUGIN_CONFTEST = 'pytest_plugins = ["tester.suites.pytest_plugin"]\n'


@pytest.fixture(scope="package")
def suite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose runner answers with the offline backend."""
    workdir = tmp_path_factory.mktemp("suites")
    scratch = f"mosaic_suites_{os.getpid()}"
    with serving(workdir, scratch) as server, served(server, answered=True) as live:
        yield live


@pytest.fixture(scope="package")
def silent_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server with no runner: no turn is ever answered."""
    workdir = tmp_path_factory.mktemp("silent")
    scratch = f"mosaic_silent_{os.getpid()}"
    with (
        serving(workdir, scratch, serve_arguments=("--no-runner",)) as server,
        served(server, answered=False) as live,
    ):
        yield live


@pytest.fixture
def plugin_live(
    suite_server: Served, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Served]:
    """The offline server, the documented conftest line in pytester's directory, the project
    on the path; the human's threads and messages unchanged by the test."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    # Only the plugin the conftest names: none of this suite's (pytest-django, schemathesis…).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeconftest(PLUGIN_CONFTEST)
    with human_left_alone(suite_server):
        yield suite_server
