"""A live server as the conversation tests use it: the human's API on it, signed in, with a
thread of the human's own, and the tester's; and a check that a run leaves the human's work
alone."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.console.api import LiveApi
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving
from tests.support.model_servers import SCRIPTED_BUSINESS

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


@contextmanager
def served_on_model(model_url: str, workdir: Path, name: str) -> Iterator[Served]:
    """A real `manage.py serve` whose instances ask the (fake) model server at `model_url`
    (`SCRIPTED_BUSINESS`), served as `served` serves it, over a database named for `name`."""
    business = SCRIPTED_BUSINESS.format(url=model_url)
    with (
        serving(workdir, f"mosaic_{name}_{os.getpid()}", business_file=business) as server,
        served(server, answered=True) as live,
    ):
        yield live


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
