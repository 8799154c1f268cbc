"""Over real sockets: `manage.py serve` (both listeners, daphne) refuses every kind of
name the rule refuses, on both listeners, with SPEC §6's `invalid` and a sentence naming the
character; stores names in normal form C; says which side created a project; and reports
stored names the rule refuses when it starts, leaving them as they are."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tester.suites.client import TesterClient
from tests.console.api import LiveApi
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving
from tests.support.names import REFUSED_NAMES

LISTENERS = ("human", "tester")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # No runner: nothing here is answered.
    with serving(
        tmp_path_factory.mktemp("names"),
        f"mosaic_names_{os.getpid()}",
        serve_arguments=("--no-runner",),
    ) as served:
        yield served


@pytest.fixture(scope="module")
def apis(server: LiveServer) -> Iterator[dict[str, LiveApi]]:
    human = LiveApi(server.human_url)
    human.sign_in(HUMAN_USERNAME, PASSWORD)
    tester = LiveApi(server.tester_url)
    yield {"human": human, "tester": tester}
    human.close()
    tester.close()


@pytest.fixture(scope="module")
def shared_project(apis: dict[str, LiveApi]) -> int:
    return apis["human"].create_project("names shared")


def post(api: LiveApi, path: str, body: dict[str, object]) -> httpx.Response:
    return api.client.post(path, json=body, headers=api.write_headers())


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize(("name", "code_point"), REFUSED_NAMES.values(), ids=REFUSED_NAMES.keys())
def test_served_project_and_thread_create_name_breaking_the_rule_is_invalid_naming_it(
    apis: dict[str, LiveApi], shared_project: int, listener: str, name: str, code_point: str
) -> None:
    """A format character anywhere, a space of any kind at an end, or a combining mark first:
    400 `invalid` naming the character, and nothing stored — projects and threads alike."""
    api = apis[listener]
    before = {project["name"] for project in api.get("/api/chat/projects")["projects"]}
    for path, body in (
        ("/api/chat/projects", {"name": name}),
        ("/api/chat/threads", {"project": shared_project, "name": name}),
    ):
        answer = post(api, path, body)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "invalid"
        assert f"{code_point} " in answer.json()["detail"]
    after = {project["name"] for project in api.get("/api/chat/projects")["projects"]}
    assert after == before
    threads = api.get(f"/api/chat/threads?project={shared_project}")["threads"]
    assert name not in {thread["name"] for thread in threads}


@pytest.mark.parametrize("listener", LISTENERS)
def test_served_names_are_stored_in_normal_form_c(apis: dict[str, LiveApi], listener: str) -> None:
    """ "é" written as "e" and a combining accent is stored as "é", and the composed spelling
    then finds the name taken."""
    api = apis[listener]
    project = post(api, "/api/chat/projects", {"name": f"Cafe\u0301 {listener}"})
    assert project.status_code == 201, project.text
    assert project.json()["project"]["name"] == f"Caf\u00e9 {listener}"
    again = post(api, "/api/chat/projects", {"name": f"Caf\u00e9 {listener}"})
    assert (again.status_code, again.json()["error"]) == (409, "project-exists")
    thread = post(
        api,
        "/api/chat/threads",
        {"project": project.json()["project"]["id"], "name": "Ångstro\u0308m"},
    )
    assert thread.status_code == 201, thread.text
    assert thread.json()["thread"]["name"] == "\u00c5ngstr\u00f6m"


def test_served_project_creator_on_both_listeners(apis: dict[str, LiveApi]) -> None:
    """The human's list tells the tester's `launch` from the human's own."""
    tester_made = apis["tester"].create_project("launch by the tester")
    human_made = apis["human"].create_project("launch by the human")
    for listener in LISTENERS:
        listed = {
            project["id"]: project["creator"]
            for project in apis[listener].get("/api/chat/projects")["projects"]
        }
        assert (listed[tester_made], listed[human_made]) == ("tester", "human")


def test_served_start_reports_stored_names_breaking_the_rule_and_keeps_them(
    server: LiveServer, apis: dict[str, LiveApi]
) -> None:
    """A row stored before the rule (written here past the broker, as an older version wrote
    it) is reported when `serve` starts (`mosaic.W001`), and is still there, unchanged."""
    server.manage(
        "shell",
        "-c",
        "from broker.models import Business, Project; "
        "Project.objects.create(business=Business.objects.get(), "
        "name='old\\u200bname', created_by='tester')",
    )
    server.restart()
    log = Path(server.log_path).read_text(errors="replace")
    assert "mosaic.W001: project " in log
    assert "U+200B ZERO WIDTH SPACE" in log
    tester = LiveApi(server.tester_url)
    try:
        names = {project["name"] for project in tester.get("/api/chat/projects")["projects"]}
    finally:
        tester.close()
    assert "old\u200bname" in names


def test_served_suite_runner_finds_its_project_under_either_spelling(server: LiveServer) -> None:
    """The conversation-test runner finds the project it made again though its suite file spells
    the name decomposed: the service stored it composed."""
    client = TesterClient(server.tester_url)
    first = client.project_id("Suite cafe\u0301")
    assert client.project_id("Suite cafe\u0301") == first
    assert client.project_id("Suite caf\u00e9") == first
