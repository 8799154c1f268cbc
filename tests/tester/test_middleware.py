"""L4 on every route of the tester listener, pages and the schema included."""

from __future__ import annotations

from tester.gates import TESTER_WRITE_ROUTES
from tests.listener_routes import routes
from tests.listeners import TESTER, ListenerClient

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def test_fence_write_to_any_route_outside_the_allow_list_is_tester_refused_json(
    tester_client: ListenerClient, broker_calls: list[str], tester_thread_id: int
) -> None:
    """`POST /api/schema`, `/api/docs` and `/` once answered YAML, HTML or `csrf-failed`."""
    broker_calls.clear()
    answers = {
        (method, route.name): tester_client.request(
            method, route.path(str(tester_thread_id)), json={}
        )
        for route in routes(TESTER)
        for method in WRITE_METHODS
        if not (method == "POST" and route.name in TESTER_WRITE_ROUTES)
    }
    assert {asked: (r.status_code, r.json()["error"]) for asked, r in answers.items()} == (
        dict.fromkeys(answers, (403, "tester-refused"))
    )
    assert broker_calls == []


def test_fence_write_to_a_path_that_is_no_route_here_is_not_found(
    tester_client: ListenerClient,
) -> None:
    """L4: admin and sign-in are not on the tester listener; writes to them are `not-found`."""
    answers = {
        path: tester_client.post(path, json={})
        for path in ("/admin/", "/admin/login/", "/api/auth/login", "/signin", "/api/nothing")
    }
    assert {path: (r.status_code, r.json()["error"]) for path, r in answers.items()} == (
        dict.fromkeys(answers, (404, "not-found"))
    )
