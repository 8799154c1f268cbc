"""The HTTP contract of SPEC §6: every route's success shape, every error code and status."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import override_settings
from rest_framework.exceptions import PermissionDenied

from broker import actions, refusals, selectors
from broker.actors import Actor
from broker.models import Business
from broker.refusals import Refusal
from chat import errors
from human.gates import HUMAN_GATES, SIGN_IN_GATES
from tester.gates import TESTER_GATES
from tests.support.listeners import ListenerClient

PROJECT = {"id", "name", "created_at", "creator"}
THREAD = {
    "id",
    "project",
    "name",
    "owner",
    "instance",
    "created_at",
    # the inbox
    "archived",
    "pinned",
    "last_message_at",
    "preview",
    "unread",
    "read_up_to",
    # R24
    "branched_from",
}
MESSAGE = {
    "id",
    "thread",
    "from_role",
    "from_run",
    "to_role",
    "class",
    "body",
    "in_reply_to",
    "request",
    "created_at",
    # R24
    "version_of",
    # SPEC §7.1
    "reply_state",
    "retry_at",
    "failure",
    "partial",
    "model",
    "finish_reason",
    "usage",
    "first_token_ms",
    "duration_ms",
    # SPEC §7.2
    "steps",
}
OPEN = {"thread", "by", "at"}
TRAIL_ROW = {
    "id",
    "at",
    "thread",
    "from_role",
    "from_run",
    "to_role",
    "actor",
    "text",
    # the inbox
    "kind",
    "thread_name",
    "via",
}
DECISION = {"id", "thread", "from_role", "from_run", "route_to", "body", "created_at"}


def error_of(response, status: int) -> str:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "detail"}
    assert response.json()["detail"]
    return response.json()["error"]


# --- success shapes ----------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["human_client", "tester_client"])
def test_chat_routes_answer_spec_shapes(request, listener: str, project_id: int) -> None:
    """SPEC §6 shapes, on both listeners."""
    client: ListenerClient = request.getfixturevalue(listener)
    projects = client.get("/api/chat/projects")
    assert (projects.status_code, set(projects.json())) == (200, {"projects"})
    assert set(projects.json()["projects"][0]) == PROJECT
    created = client.post("/api/chat/projects", {"name": f"{listener}'s"})
    assert (created.status_code, set(created.json())) == (201, {"project"})
    assert set(created.json()["project"]) == PROJECT
    thread = client.post("/api/chat/threads", {"project": project_id, "name": listener})
    assert (thread.status_code, set(thread.json())) == (201, {"thread"})
    assert set(thread.json()["thread"]) == THREAD
    thread_id = thread.json()["thread"]["id"]
    threads = client.get(f"/api/chat/threads?project={project_id}")
    assert [set(t) for t in threads.json()["threads"]] == [THREAD]
    sent = client.post(f"/api/chat/threads/{thread_id}/messages", {"body": "hello"})
    assert (sent.status_code, set(sent.json())) == (201, {"message", "request"})
    assert set(sent.json()["message"]) == MESSAGE
    assert sent.json()["message"]["class"] == "REQUEST"
    assert sent.json()["message"]["reply_state"] == "pending"
    messages = client.get(f"/api/chat/threads/{thread_id}/messages")
    assert [set(m) for m in messages.json()["messages"]] == [MESSAGE]
    opened = client.post(f"/api/chat/threads/{thread_id}/open", {})
    assert (opened.status_code, set(opened.json()["open"])) == (200, OPEN)
    changed = client.request("PATCH", f"/api/chat/threads/{thread_id}", json={"archived": True})
    assert (changed.status_code, set(changed.json())) == (200, {"thread"})
    assert set(changed.json()["thread"]) == THREAD
    read = client.post(
        f"/api/chat/threads/{thread_id}/read", {"up_to": sent.json()["message"]["id"]}
    )
    assert (read.status_code, set(read.json())) == (200, {"thread"})
    assert set(read.json()["thread"]) == THREAD
    view = client.get("/api/messages")
    assert (view.status_code, set(view.json())) == (200, {"messages", "count"})
    trail = client.get("/api/trail")
    assert (trail.status_code, set(trail.json())) == (200, {"rows"})
    assert set(trail.json()["rows"][-1]) == TRAIL_ROW
    assert set(trail.json()["rows"][-1]["actor"]) == {"role", "run"}


def test_stop_answers_stopped_threads_and_runs(
    human_client: ListenerClient, business: Business, human_thread_id: int
) -> None:
    sent = human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"})
    turn = sent.json()["message"]["id"]
    run = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-9")
    actions.open_claim(run, thread_id=human_thread_id)
    stopped = human_client.post("/api/chat/stop", {})
    assert stopped.status_code == 200
    assert stopped.json() == {
        "stopped": [{"thread": human_thread_id, "run": "run-9", "turns": [turn]}]
    }
    messages = human_client.get(f"/api/chat/threads/{human_thread_id}/messages").json()
    assert [m["reply_state"] for m in messages["messages"]] == ["stopped"]


def test_stop_covers_waiting_turn_of_one_thread_only(
    human_client: ListenerClient, human_thread_id: int, project_id: int
) -> None:
    """SPEC §7.1: a turn no run holds yet is stopped too; `thread` narrows the stop."""
    other = human_client.post("/api/chat/threads", {"project": project_id, "name": "other"})
    other_id = other.json()["thread"]["id"]
    first = human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "a"})
    second = human_client.post(f"/api/chat/threads/{other_id}/messages", {"body": "b"})
    stopped = human_client.post("/api/chat/stop", {"thread": human_thread_id})
    assert stopped.json() == {
        "stopped": [
            {"thread": human_thread_id, "run": None, "turns": [first.json()["message"]["id"]]}
        ]
    }
    states = {
        thread: [
            m["reply_state"]
            for m in human_client.get(f"/api/chat/threads/{thread}/messages").json()["messages"]
        ]
        for thread in (human_thread_id, other_id)
    }
    assert states == {human_thread_id: ["stopped"], other_id: ["pending"]}
    assert second.json()["message"]["reply_state"] == "pending"
    again = human_client.post("/api/chat/stop", {"thread": human_thread_id})
    assert error_of(again, 409) == "not-held"


def test_stop_of_a_thread_not_owned_refuses_thread_not_owned(
    human_client: ListenerClient, tester_client: ListenerClient, project_id: int
) -> None:
    """R1 holds for the stop's thread: the tester's thread through the human's stop."""
    thread = tester_client.post("/api/chat/threads", {"project": project_id, "name": "t"})
    thread_id = thread.json()["thread"]["id"]
    tester_client.post(f"/api/chat/threads/{thread_id}/messages", {"body": "hi"})
    assert error_of(human_client.post("/api/chat/stop", {"thread": thread_id}), 403) == (
        "thread-not-owned"
    )
    messages = tester_client.get(f"/api/chat/threads/{thread_id}/messages").json()["messages"]
    assert [m["reply_state"] for m in messages] == ["pending"]


def test_inbox_answers_decisions(human_client: ListenerClient, business, human_thread_id) -> None:
    from broker.models import RoleDefinition

    RoleDefinition.objects.filter(business=business).update(cross_role=["human"])
    human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"})
    run = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-9")
    claim = actions.open_claim(run, thread_id=human_thread_id)
    actions.create_decision(run, claim_id=claim.pk, body="ship it?")
    inbox = human_client.get("/api/inbox")
    assert [set(d) for d in inbox.json()["decisions"]] == [DECISION]


def test_messages_view_counts_the_actor_view(
    human_client: ListenerClient, business: Business, human_thread_id: int
) -> None:
    turn = human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"})
    run = Actor.assistant_run(business_id=business.pk, instance="assistant", run="r")
    claim = actions.open_claim(run, thread_id=human_thread_id)
    for n in range(3):
        actions.send_message(run, to="human", body=f"note {n}", claim_id=claim.pk)
    view = human_client.get("/api/messages?limit=2").json()
    assert (len(view["messages"]), view["count"]) == (2, 3)
    assert turn.json()["request"] is not None


def test_lists_page_with_after_and_before(human_client: ListenerClient, human_thread_id) -> None:
    ids = [
        human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": str(n)}).json()[
            "message"
        ]["id"]
        for n in range(5)
    ]
    path = f"/api/chat/threads/{human_thread_id}/messages"
    after = human_client.get(f"{path}?after={ids[1]}&limit=2").json()["messages"]
    before = human_client.get(f"{path}?before={ids[3]}&limit=2").json()["messages"]
    newest = human_client.get(f"{path}?limit=2").json()["messages"]
    assert [m["id"] for m in after] == ids[2:4]
    assert [m["id"] for m in before] == ids[1:3]
    assert [m["id"] for m in newest] == ids[3:5]


def test_thread_list_q_searches_own_threads(human_client, tester_client, project_id) -> None:
    mine = human_client.post("/api/chat/threads", {"project": project_id, "name": "Roadmap"})
    tester_client.post("/api/chat/threads", {"project": project_id, "name": "roadmap probe"})
    found = human_client.get("/api/chat/threads?q=roadmap").json()["threads"]
    assert [t["id"] for t in found] == [mine.json()["thread"]["id"]]


# --- every error code over HTTP ----------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        b'"name"',
        b"null",
        b'{"name": 5}',
        b'{"name": ""}',
        b'{"name": "x", "extra": 1}',
        b'{"name": "a\\u0000b"}',
        b'{"name": "' + b"x" * 201 + b'"}',
    ],
)
def test_bad_body_is_invalid(human_client: ListenerClient, body: bytes) -> None:
    """SPEC §6: not a JSON object, wrong type, empty: `invalid` (400), nothing stored."""
    response = human_client.request("POST", "/api/chat/projects", content=body)
    assert error_of(response, 400) == refusals.INVALID


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=501", "limit=x", "after=-1", "after=1&before=2", "after=1&after=2"]
)
def test_bad_list_query_is_invalid(human_client: ListenerClient, query: str) -> None:
    assert error_of(human_client.get(f"/api/chat/threads?{query}"), 400) == refusals.INVALID


def test_wrong_type_ids_are_invalid(human_client, project_id) -> None:
    for body in ({"project": str(project_id), "name": "t"}, {"project": True, "name": "t"}):
        assert error_of(human_client.post("/api/chat/threads", body), 400) == refusals.INVALID


def test_unknown_ids_are_not_found(human_client: ListenerClient) -> None:
    for method, path, body in (
        ("GET", "/api/chat/threads/999999/messages", None),
        ("POST", "/api/chat/threads/999999/open", {}),
        ("POST", "/api/chat/threads", {"project": 999999, "name": "t"}),
        ("GET", "/api/chat/threads/99999999999999999999999/messages", None),
        ("GET", "/api/nothing-here", None),
    ):
        response = human_client.request(method, path, json=body)
        assert error_of(response, 404) == refusals.NOT_FOUND


def test_wrong_method_is_method_not_allowed(human_client: ListenerClient) -> None:
    response = human_client.request("DELETE", "/api/chat/projects")
    assert error_of(response, 405) == errors.METHOD_NOT_ALLOWED


def test_duplicates_are_conflicts(human_client, tester_client, project_id) -> None:
    """R18: a name taken by the other side is `thread-exists`; projects likewise."""
    human_client.post("/api/chat/threads", {"project": project_id, "name": "taken"})
    again = tester_client.post("/api/chat/threads", {"project": project_id, "name": "taken"})
    assert error_of(again, 409) == refusals.THREAD_EXISTS
    project = tester_client.post("/api/chat/projects", {"name": "product"})
    assert error_of(project, 409) == refusals.PROJECT_EXISTS


def test_stop_with_nothing_held_is_not_held(tester_client: ListenerClient) -> None:
    assert error_of(tester_client.post("/api/chat/stop", {}), 409) == refusals.NOT_HELD


def test_sender_refused_by_lists_is_forbidden(
    human_client: ListenerClient, business: Business, human_thread_id: int
) -> None:
    from broker.models import RoleDefinition

    RoleDefinition.objects.filter(business=business).update(receive_from=[])
    response = human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "x"})
    assert error_of(response, 403) == refusals.MESSAGE_SENDER_REFUSED


def test_csrf_missing_is_csrf_failed(human_client: ListenerClient) -> None:
    response = human_client.post("/api/chat/projects", {"name": "x"}, headers={"X-CSRFToken": ""})
    assert error_of(response, 403) == refusals.CSRF_FAILED


@override_settings(MOSAIC_REQUEST_MAX_BYTES=100)
def test_body_over_limit_is_too_large(human_client: ListenerClient) -> None:
    response = human_client.post("/api/chat/projects", {"name": "x" * 200})
    assert error_of(response, 413) == refusals.TOO_LARGE


def test_database_down_is_unavailable(
    human_client: ListenerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that is down answers 503 `unavailable` with Retry-After, never a 500."""

    def down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(selectors, "list_projects", down)
    response = human_client.get("/api/chat/projects")
    assert error_of(response, 503) == refusals.UNAVAILABLE
    assert response.headers["retry-after"] == "1"


# --- the tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(refusals.CODES))
def test_every_refusal_code_has_a_status_and_close_code(code: str) -> None:
    """STYLE §4: each code maps to a status in one table, and to a WebSocket close code."""
    response = errors.exception_handler(Refusal(code, "Because."), {})
    assert response is not None
    assert response.status_code == errors.STATUS[code]
    assert response.data == {"error": code, "detail": "Because."}
    assert 4000 <= errors.close_code(code) < 5000


def test_status_table_has_spec_statuses() -> None:
    """SPEC §6's table, exactly, for every code it names."""
    spec = {
        400: {"invalid", "host-refused"},
        401: {"not-authenticated"},
        404: {"not-found"},
        409: {"thread-exists", "project-exists", "not-held", "claim-ended"},
        413: {"too-large"},
        415: {"unsupported-media-type"},
        422: {"idempotency-key-reused"},
        503: {"unavailable"},
    }
    for status, codes in spec.items():
        assert {code for code in codes if errors.STATUS[code] == status} == codes
    forbidden = {code for code, status in errors.STATUS.items() if status == 403}
    assert len(forbidden) == 14


@pytest.mark.parametrize("gate", sorted({*HUMAN_GATES, *SIGN_IN_GATES, *TESTER_GATES}, key=str))
def test_every_gate_carries_a_mapped_code(gate) -> None:
    """STYLE §6: a permission class carries its own message and a code of the table."""
    assert gate.code in errors.STATUS
    assert gate.message
    denied = PermissionDenied(detail=gate.message, code=gate.code)
    response = errors.exception_handler(denied, {})
    assert response.status_code == errors.STATUS[gate.code]
    assert response.data["error"] == gate.code


def test_tester_gate_refuses_any_other_actor() -> None:
    """L5: a tester-listener view that finds any other actor refuses `tester-required`."""
    from types import SimpleNamespace

    from tester.gates import TesterActorRequired

    human = Actor.human(business_id=1, username="ada")
    gate = TesterActorRequired()
    assert not gate.has_permission(SimpleNamespace(auth=human), None)
    assert not gate.has_permission(SimpleNamespace(auth=None), None)
    assert gate.has_permission(SimpleNamespace(auth=Actor.tester(business_id=1)), None)
    assert gate.code == refusals.TESTER_REQUIRED
