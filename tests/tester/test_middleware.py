"""L4 on every route of the tester listener, pages and the schema included."""

from __future__ import annotations

import pytest
from django.urls import resolve
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from tester.gates import TESTER_WRITES, TesterFence
from tests.support.listener_routes import routes
from tests.support.listeners import TESTER, ListenerClient
from tests.support.openai_api import refusal_code

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
        if (method, route.name) not in TESTER_WRITES
    }
    assert {asked: (r.status_code, refusal_code(r)) for asked, r in answers.items()} == (
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


@pytest.mark.parametrize(
    ("method", "path", "admitted"),
    [
        ("POST", "/api/chat/projects", True),
        ("POST", "/api/chat/threads/1/open", True),
        ("PATCH", "/api/chat/threads/1", True),
        ("POST", "/api/chat/threads/1/read", True),
        ("POST", "/api/chat/threads/1", False),
        ("PATCH", "/api/chat/threads", False),
        ("PATCH", "/api/chat/threads/1/read", False),
        ("GET", "/api/trail", True),
        ("HEAD", "/api/schema", True),
        ("POST", "/api/trail", False),
        ("POST", "/api/schema", False),
        ("PUT", "/api/chat/projects", False),
        ("DELETE", "/api/chat/stop", False),
        ("POST", "/api/suite-runs", True),
        ("POST", "/api/suite-runs/1/cases", True),
        ("POST", "/api/suite-runs/1/end", True),
        ("GET", "/api/suite-runs/1", True),
        ("POST", "/api/suite-runs/1", False),
        ("PATCH", "/api/suite-runs/1/end", False),
        ("POST", "/v1/chat/completions", True),
        ("GET", "/v1/models", True),
        ("POST", "/v1/models", False),
        ("PUT", "/v1/chat/completions", False),
        ("POST", None, False),
    ],
)
def test_fence_permission_behind_the_middleware_decides_alone(
    method: str, path: str | None, admitted: bool
) -> None:
    """The DRF gate on the API views holds L4 by itself too (defence in depth)."""
    request = Request(APIRequestFactory().generic(method, path or "/nowhere"))
    request._request.resolver_match = resolve(path, urlconf="tester.urls") if path else None
    assert TesterFence().has_permission(request, view=None) is admitted
