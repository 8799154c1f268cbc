"""L4: the tester fence — writes reach only the allow-listed routes, exactly."""

from __future__ import annotations

import pytest

from chat.routes import ROUTES
from tester.gates import TESTER_WRITE_ROUTES, TESTER_WRITES
from tests.support.listener_routes import routes
from tests.support.listeners import TESTER, ListenerClient

READ_ONLY_ROUTES = [
    (route.replace("<id:thread_id>", "1").replace("<id:message_id>", "1"), name)
    for route, _, name in ROUTES
    if name not in TESTER_WRITE_ROUTES
]


def test_fence_allow_list_names_exactly_the_chat_writes_stop_and_suite_runs() -> None:
    """L4: the chat writes (the tester's own threads renamed, archived, read, versioned and
    branched among them),
    the tester's stop, its suite runs' three writes (start, record, end) and a chat completion
    of its OpenAI-compatible endpoint (SPEC §6.1), each with its one method, nothing else."""
    assert {
        ("POST", "chat-projects"),
        ("POST", "chat-threads"),
        ("PATCH", "chat-thread"),
        ("POST", "chat-thread-read"),
        ("POST", "chat-thread-messages"),
        ("POST", "chat-thread-open"),
        ("POST", "chat-turn-edit"),
        ("POST", "chat-turn-regenerate"),
        ("POST", "chat-thread-branch"),
        ("POST", "chat-stop"),
        ("POST", "suite-runs"),
        ("POST", "suite-run-cases"),
        ("POST", "suite-run-end"),
        ("POST", "openai-chat-completions"),
    } == TESTER_WRITES
    assert {route.name for route in routes(TESTER)} >= TESTER_WRITE_ROUTES


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize(("path", "name"), READ_ONLY_ROUTES)
def test_fence_write_to_other_api_route_is_tester_refused(
    tester_client: ListenerClient, broker_calls: list[str], method: str, path: str, name: str
) -> None:
    """L4: a write to any other route of the API is 403 `tester-refused`, broker untouched."""
    response = tester_client.request(method, f"/{path}", json={})
    assert (response.status_code, response.json()["error"]) == (403, "tester-refused")
    assert broker_calls == []


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_fence_other_methods_on_allowed_routes_are_tester_refused(
    tester_client: ListenerClient, method: str
) -> None:
    """L4 is about methods too: only POST is a chat write."""
    response = tester_client.request(method, "/api/chat/projects", json={})
    assert (response.status_code, response.json()["error"]) == (403, "tester-refused")


def test_fence_admits_the_testers_rename_archive_and_read_of_its_own_thread(
    tester_client: ListenerClient, tester_thread_id: int
) -> None:
    """L4 admits exactly the inbox's writes: a fence without them would refuse these with
    `tester-refused`; through it they reach the broker and change the tester's thread (its
    pin too, behind the same PATCH)."""
    thread = f"/api/chat/threads/{tester_thread_id}"
    sent = tester_client.post(f"{thread}/messages", {"body": "probe"}).json()["message"]
    renamed = tester_client.request(
        "PATCH", thread, json={"name": "probe 2", "archived": True, "pinned": True}
    )
    read = tester_client.post(f"{thread}/read", {"up_to": sent["id"]})
    assert (renamed.status_code, read.status_code) == (200, 200), (renamed.text, read.text)
    assert read.json()["thread"] | {"created_at": None} == {
        "id": tester_thread_id,
        "project": renamed.json()["thread"]["project"],
        "name": "probe 2",
        "owner": "tester",
        "instance": "assistant",
        "created_at": None,
        "archived": True,
        "pinned": True,
        "last_message_at": sent["created_at"],
        "preview": "probe",
        "unread": 0,
        "read_up_to": sent["id"],
        "branched_from": None,
    }


@pytest.mark.parametrize(
    ("method", "suffix"), [("POST", ""), ("PUT", ""), ("DELETE", ""), ("PATCH", "/read")]
)
def test_fence_other_methods_on_the_inbox_routes_are_tester_refused(
    tester_client: ListenerClient,
    broker_calls: list[str],
    tester_thread_id: int,
    method: str,
    suffix: str,
) -> None:
    """L4 pairs each route with its one method: PATCH renames, POST marks read, no other."""
    broker_calls.clear()
    response = tester_client.request(
        method, f"/api/chat/threads/{tester_thread_id}{suffix}", json={"name": "x"}
    )
    assert (response.status_code, response.json()["error"]) == (403, "tester-refused")
    assert broker_calls == []


def test_fence_admits_the_testers_suite_run_writes(
    tester_client: ListenerClient, broker_calls: list[str]
) -> None:
    """L4 admits the suite runs' three writes: a fence without them would refuse each with
    `tester-refused`; through it each reaches its own verb."""
    started = tester_client.post("/api/suite-runs", {"suites": ["smoke"]})
    run = started.json()["run"]["id"]
    recorded = tester_client.post(
        f"/api/suite-runs/{run}/cases",
        {
            "suite": "smoke",
            "case": "greets",
            "instance": "assistant",
            "verdict": "pass",
            "passed_runs": 1,
            "runs": 1,
        },
    )
    ended = tester_client.post(f"/api/suite-runs/{run}/end", {})
    assert (started.status_code, recorded.status_code, ended.status_code) == (201, 201, 200)
    assert broker_calls == ["suite_run.start", "suite_run.record", "suite_run.end"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/api/suite-runs"),
        ("DELETE", "/api/suite-runs/{run}"),
        ("POST", "/api/suite-runs/{run}"),
        ("PATCH", "/api/suite-runs/{run}/cases"),
        ("DELETE", "/api/suite-runs/{run}/end"),
    ],
)
def test_fence_other_writes_on_suite_run_routes_are_tester_refused(
    tester_client: ListenerClient, broker_calls: list[str], method: str, path: str
) -> None:
    """L4: POST starts, records and ends; no other write reaches a suite run."""
    run = tester_client.post("/api/suite-runs", {"suites": ["smoke"]}).json()["run"]["id"]
    broker_calls.clear()
    response = tester_client.request(method, path.format(run=run), json={})
    assert (response.status_code, response.json()["error"]) == (403, "tester-refused")
    assert broker_calls == []
