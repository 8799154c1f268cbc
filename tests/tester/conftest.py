"""Real servers for the conversation tests: `manage.py serve` on free ports over a database of
its own, the offline backend answering (`suite_server`) or no runner at all (`silent_server`),
and the human's own work on it, to show that a run leaves it alone."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.console.server import serving
from tests.support.served import Served, served


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
