"""The OpenAPI schema of both listeners: accurate routes, and fuzzed from the schema itself.

The fuzzing sends each generated case through the real ASGI application of its listener, with
that listener's legitimate credentials and write headers, and requires: no server error, every
refusal the `{"error", "detail"}` body, and every status one the schema documents.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings

from chat.routes import ROUTES
from tests.listeners import HUMAN, TESTER, ListenerClient

FUZZ = settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def schema_of(urlconf: str) -> dict:
    return json.loads(json.dumps(SchemaGenerator(urlconf=urlconf).get_schema(public=True)))


HUMAN_SCHEMA = schema_of("mosaic.urls")
TESTER_SCHEMA = schema_of("tester.urls")


def test_schema_is_served_on_both_listeners(tester_client, anonymous_client) -> None:
    for client in (tester_client, anonymous_client):
        response = client.get("/api/schema", headers={"Accept": "application/json"})
        assert response.status_code == 200
        assert "/api/chat/threads" in response.text


def test_docs_page_is_served_without_a_cdn(anonymous_client: ListenerClient) -> None:
    """The interactive page loads its assets from this server (the package's own copy)."""
    page = anonymous_client.get("/api/docs")
    assert page.status_code == 200
    assert "cdn." not in page.text
    asset = page.text.split('src="', 2)[1].split('"')[0]
    assert anonymous_client.get(asset).status_code == 200


def test_schemas_name_each_listeners_routes() -> None:
    """Both schemas hold the shared chat routes; only the human's has sign-in and the inbox."""
    shared = {"/" + route.replace("<id:thread_id>", "{thread_id}") for route, _, _ in ROUTES}
    assert set(TESTER_SCHEMA["paths"]) == shared
    assert set(HUMAN_SCHEMA["paths"]) == shared | {
        "/api/auth/login",
        "/api/auth/logout",
        "/api/inbox",
    }


def test_schema_documents_error_body_for_refusals() -> None:
    operation = HUMAN_SCHEMA["paths"]["/api/chat/threads"]["post"]
    error = operation["responses"]["403"]["content"]["application/json"]["schema"]["$ref"]
    component = HUMAN_SCHEMA["components"]["schemas"][error.rsplit("/", 1)[1]]
    assert sorted(component["required"]) == ["detail", "error"]


def check_case(client: ListenerClient, case, documented: dict) -> None:
    path = case.formatted_path
    if case.query:
        path += "?" + urlencode(case.query, doseq=True)
    body = None if case.body is None or type(case.body).__name__ == "NotSet" else case.body
    if isinstance(body, bytes):
        headers = {"Content-Type": case.media_type or "application/octet-stream"}
        response = client.request(case.method.upper(), path, content=body, headers=headers)
    else:
        response = client.request(case.method.upper(), path, json=body)
    assert response.status_code < 500, (case.method, path, body, response.text)
    if response.status_code >= 400:
        assert set(response.json()) == {"error", "detail"}, response.text
    operation = documented["paths"][case.path].get(case.method.lower())
    if operation is None:
        # A method the route does not serve: refused before anything runs.
        assert response.status_code in (401, 403, 405), (case.method, path, response.text)
        return
    assert str(response.status_code) in operation["responses"], (case.method, path, response.text)


human_cases = schemathesis.openapi.from_dict(HUMAN_SCHEMA)
tester_cases = schemathesis.openapi.from_dict(TESTER_SCHEMA)


@human_cases.parametrize()
@FUZZ
def test_human_listener_fuzzed_from_schema_never_errors(case, human_client, project_id) -> None:
    """No input produces a 500 on the human listener (signed in, legitimate headers)."""
    if case.path == "/api/auth/logout":
        return  # would sign the fuzzing client out; covered by the contract tests
    check_case(human_client, case, HUMAN_SCHEMA)


@tester_cases.parametrize()
@FUZZ
def test_tester_listener_fuzzed_from_schema_never_errors(case, tester_client, project_id) -> None:
    """No input produces a 500 on the tester listener."""
    check_case(tester_client, case, TESTER_SCHEMA)


@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_thread_id_path_parameter_is_an_integer(listener: str) -> None:
    schema = HUMAN_SCHEMA if listener == HUMAN else TESTER_SCHEMA
    parameters = schema["paths"]["/api/chat/threads/{thread_id}/messages"]["get"]["parameters"]
    [thread_id] = [p for p in parameters if p["name"] == "thread_id"]
    assert thread_id["schema"]["type"] == "integer"
