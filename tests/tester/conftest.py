"""Real servers for the conversation tests: `manage.py serve` on free ports over a database of
its own, the offline backend answering (`suite_server`) or no runner at all (`silent_server`),
and the human's own work on it, to show that a run leaves it alone."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from tests.console.api import LiveApi
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving

WAIT_SECONDS = 30.0


@dataclass
class Served:
    """A live server, the human's API on it (signed in as `ada`) and the tester's."""

    server: LiveServer
    human: LiveApi
    tester: LiveApi

    @property
    def url(self) -> str:
        return self.server.tester_url

    def human_view(self) -> dict[str, Any]:
        """Everything of the human's a run could change: threads, messages, the messages view."""
        threads = self.human.get("/api/chat/threads?limit=500")["threads"]
        return {
            "threads": threads,
            "messages": {
                thread["id"]: self.human.get(f"/api/chat/threads/{thread['id']}/messages")
                for thread in threads
            },
            "view": self.human.get("/api/messages?limit=500"),
        }

    def tester_threads(self) -> list[dict[str, Any]]:
        return list(self.tester.get("/api/chat/threads?limit=500")["threads"])


@contextmanager
def served(server: LiveServer, *, answered: bool) -> Iterator[Served]:
    """The human's API, with a thread of the human's own holding a turn (and, when a runner
    answers, its reply: the human's view is still from then on)."""
    human = LiveApi(server.human_url)
    tester = LiveApi(server.tester_url)
    try:
        human.sign_in(HUMAN_USERNAME, PASSWORD)
        project = human.create_project("human-work")
        thread = human.create_thread(project, "plan")
        human.send(thread, "Draft the launch plan")
        if answered:
            wait_for_reply(human, thread)
        yield Served(server, human, tester)
    finally:
        human.close()
        tester.close()


def wait_for_reply(api: LiveApi, thread: int) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        messages = api.get(f"/api/chat/threads/{thread}/messages")["messages"]
        if any(message["class"] == "RESULT" for message in messages):
            return
        time.sleep(0.1)
    raise AssertionError(f"no reply in thread {thread} within {WAIT_SECONDS:g} s")


@contextmanager
def human_left_alone(live: Served) -> Iterator[None]:
    """The human's threads, messages and view are the same after the block as before it."""
    before = live.human_view()
    yield
    assert live.human_view() == before


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
