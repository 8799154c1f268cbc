"""The OpenAPI schema of both listeners: accurate routes, and fuzzed from the schema itself.

The fuzzing sends each generated case through the real ASGI application of its listener, with
that listener's legitimate credentials and write headers, and requires (SPEC §6): no server
error, every refusal the `{"error", "detail"}` body, every status one the schema documents,
and every answer the schema describes shaped as it says. On the human listener each case of a
route that declares the session is sent again without it, and must be refused 401/403 with
nothing called in the broker (L2: schemathesis's "ignored auth" check, done through the
listener client because schemathesis's own probe would leave the test's transaction).

Size: `MOSAIC_FUZZ_EXAMPLES` examples per operation (the suite's bounded default is small);
`MOSAIC_FUZZ_MIN_CASES` makes the run fail unless at least that many cases were sent in all,
which `make fuzz` sets for the full run.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import schemathesis
from django.urls import Resolver404, resolve
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.core.transport import Response
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from chat.errors import STATUS
from chat.routes import ROUTES
from tests.support.listeners import HUMAN, TESTER, ListenerClient

EXAMPLES = int(os.environ.get("MOSAIC_FUZZ_EXAMPLES", "10"))
MIN_CASES = int(os.environ.get("MOSAIC_FUZZ_MIN_CASES", "0"))

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Cases actually sent to each listener (the anonymous re-sends of the auth check not counted),
# and the operations that ran; the last test of the module reads both.
SENT: Counter[str] = Counter()
PROBES: Counter[str] = Counter()
OPERATIONS: set[tuple[str, str]] = set()

# Schemathesis's own checks, run on every answer. `negative_data_rejection`: a case generated
# to break the schema must be refused with a 4xx (strict inputs).
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
# `unsupported_method`: a method a route does not serve is 405 with `Allow`. On the tester
# listener the fence refuses every unsafe method off its allow-list first (L4), so there an
# undeclared method is 405 or 403 `tester-refused`, checked below instead.
LISTENER_CHECKS = {HUMAN: [*CHECKS, unsupported_method], TESTER: CHECKS}


def schema_of(urlconf: str) -> dict:
    return json.loads(json.dumps(SchemaGenerator(urlconf=urlconf).get_schema(public=True)))


HUMAN_SCHEMA = schema_of("human.urls")
TESTER_SCHEMA = schema_of("tester.urls")


@pytest.mark.parametrize("accept", ["application/json", "*/*"], ids=["json", "yaml"])
def test_schema_is_served_on_both_listeners(tester_client, anonymous_client, accept: str) -> None:
    """In JSON, and in YAML, what it is served as by default: every value in it must be one YAML
    can write (an enum member is not)."""
    for client in (tester_client, anonymous_client):
        response = client.get("/api/schema", headers={"Accept": accept})
        assert response.status_code == 200, response.text[-500:]
        assert "/api/chat/threads" in response.text


def test_docs_page_is_served_without_a_cdn(anonymous_client: ListenerClient) -> None:
    """The interactive page loads its assets from this server (the package's own copy)."""
    page = anonymous_client.get("/api/docs")
    assert page.status_code == 200
    assert "cdn." not in page.text
    asset = page.text.split('src="', 2)[1].split('"')[0]
    assert anonymous_client.get(asset).status_code == 200


def test_schemas_name_each_listeners_routes() -> None:
    """Both schemas hold the shared chat routes; only the human's has sign-in and the inbox,
    only the tester's its suite runs."""
    shared = {
        "/"
        + route.replace("<id:thread_id>", "{thread_id}").replace("<id:message_id>", "{message_id}")
        for route, _, _ in ROUTES
    }
    assert set(TESTER_SCHEMA["paths"]) == shared | {
        "/api/suite-runs",
        "/api/suite-runs/{run_id}",
        "/api/suite-runs/{run_id}/cases",
        "/api/suite-runs/{run_id}/end",
        "/api/suite-runs/{run_id}/comparison/{other_id}",
        "/api/suite-runs/{run_id}/comparison/{other_id}/cases/{case_id}",
    }
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


@pytest.mark.parametrize("schema", [HUMAN_SCHEMA, TESTER_SCHEMA], ids=["human", "tester"])
def test_schema_project_shape_says_its_creator_human_or_tester(schema: dict[str, Any]) -> None:
    """Both listeners document `creator`, from the model's choices."""
    components = schema["components"]["schemas"]
    creator = components["ProjectOut"]["properties"]["creator"]["$ref"].rsplit("/", 1)[1]
    assert "creator" in components["ProjectOut"]["required"]
    assert components[creator]["enum"] == ["human", "tester"]


def test_human_schema_declares_the_session_on_every_route_but_sign_in() -> None:
    """L2: the ignored-auth check below covers exactly the routes that need a signed-in human."""
    unsecured = {
        f"{method.upper()} {path}"
        for path, operations in HUMAN_SCHEMA["paths"].items()
        for method, operation in operations.items()
        if not operation.get("security")
    }
    assert unsecured == {"POST /api/auth/login"}


# --- the fuzzing -------------------------------------------------------------------------


def _body_of(case: Any) -> Any:
    return None if case.body is None or type(case.body).__name__ == "NotSet" else case.body


def send_case(client: ListenerClient, case: Any) -> httpx.Response:
    """Send a generated case the way the listener's own page would (cookies, write headers)."""
    path = case.formatted_path
    if case.query:
        path += "?" + urlencode(case.query, doseq=True)
    body = _body_of(case)
    if isinstance(body, bytes):
        headers = {"Content-Type": case.media_type or "application/octet-stream"}
        return client.request(case.method.upper(), path, content=body, headers=headers)
    return client.request(case.method.upper(), path, json=body)


def assert_refusal_shape(response: httpx.Response, label: str) -> None:
    """SPEC §6: a refusal is `{"error", "detail"}`, both strings, with its code's status."""
    assert response.headers.get("content-type", "").startswith("application/json"), label
    answer = response.json()
    assert set(answer) == {"error", "detail"}, (label, response.text)
    assert isinstance(answer["error"], str) and isinstance(answer["detail"], str), label
    assert STATUS.get(answer["error"]) == response.status_code, (label, response.text)


def check_case(client: ListenerClient, case: Any, documented: dict) -> httpx.Response:
    listener = client.listener
    label = f"{listener} {case.method.upper()} {case.path}"
    response = send_case(client, case)
    SENT[listener] += 1
    OPERATIONS.add((listener, case.operation.label))
    shown = (case.method, case.formatted_path, case.query, _body_of(case), response.text)
    assert response.status_code < 500, shown
    if response.status_code >= 400:
        assert_refusal_shape(response, label)
    operation = documented["paths"][case.path].get(case.method.lower())
    if operation is None:
        # A method the route does not serve: refused before anything runs.
        assert response.status_code in (403, 405), shown
        if response.status_code == 403:
            assert (listener, response.json()["error"]) == (TESTER, "tester-refused"), shown
    else:
        assert str(response.status_code) in operation["responses"], shown
    checks = LISTENER_CHECKS[listener]
    if only_the_session_cookie_negated(case):
        # The client always sends its real session, never the generated cookie: this case was
        # sent valid. Going without the session is the ignored-auth check's part.
        checks = [check for check in checks if check is not negative_data_rejection]
    case.validate_response(response, checks=checks)
    return response


def only_the_session_cookie_negated(case: Any) -> bool:
    meta = case.meta
    if meta is None or not meta.is_negative_at(ParameterLocation.COOKIE):
        return False
    others = (ParameterLocation.PATH, ParameterLocation.QUERY, ParameterLocation.BODY)
    return not any(meta.is_negative_at(location) for location in others)


def check_auth_is_not_ignored(case: Any, broker_calls: list[str]) -> None:
    """L2 (schemathesis's `ignored_auth`): without the session the same request is refused
    401/403 and the broker is never called."""
    operation = HUMAN_SCHEMA["paths"][case.path].get(case.method.lower())
    if operation is None or not operation.get("security"):
        return
    called = len(broker_calls)
    # A fresh client: no CSRF token, the same Origin and Fetch Metadata, and either no session
    # cookie or a made-up one (every other case), as schemathesis's check tries both.
    anonymous = ListenerClient(HUMAN)
    PROBES["auth"] += 1
    if PROBES["auth"] % 2 == 0:
        anonymous.cookies.set("sessionid", "0" * 32, domain="127.0.0.1")
    response = send_case(anonymous, case)
    label = f"anonymous {case.method.upper()} {case.formatted_path}"
    assert_refusal_shape(response, label)
    assert broker_calls[called:] == [], label
    if response.status_code == 404:
        # A path no route matches (an id of 19 digits, say) is answered before anyone is
        # authenticated, with or without the session: it reaches nothing.
        with pytest.raises(Resolver404):
            resolve(case.formatted_path, urlconf="human.urls")
        return
    assert response.status_code in (401, 403), (label, response.status_code, response.text)


human_cases = schemathesis.openapi.from_dict(HUMAN_SCHEMA)
tester_cases = schemathesis.openapi.from_dict(TESTER_SCHEMA)


@human_cases.parametrize()
@FUZZ
def test_human_listener_fuzzed_from_schema_never_errors(
    case, human_client, project_id, human_thread_id, tester_thread_id, broker_calls
) -> None:
    """SPEC §6, L2: no input produces a 500 on the human listener (signed in, legitimate
    headers), every answer is documented, and no signed-in route answers without the session."""
    if case.path == "/api/auth/logout":
        # Would sign the fuzzing client out; the ignored-auth check still covers the route.
        check_auth_is_not_ignored(case, broker_calls)
        return
    check_case(human_client, case, HUMAN_SCHEMA)
    check_auth_is_not_ignored(case, broker_calls)


@tester_cases.parametrize()
@FUZZ
def test_tester_listener_fuzzed_from_schema_never_errors(
    case, tester_client, project_id, human_thread_id, tester_thread_id
) -> None:
    """SPEC §6: no input produces a 500 on the tester listener; every answer is documented."""
    check_case(tester_client, case, TESTER_SCHEMA)


STATEFUL = settings(
    max_examples=max(1, EXAMPLES // 2),
    stateful_step_count=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def run_stateful(client: ListenerClient, schema: Any, documented: dict) -> None:
    """Chains of calls along the links schemathesis infers from the schema (a created
    thread's id into its messages and open), each answer checked as above."""

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def call(self, case: Any, **kwargs: Any) -> Any:
            return Response.from_any(check_case(client, case, documented))

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            pass  # check_case checked it as it was sent

    Workflow.run(settings=STATEFUL)


@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_listener_fuzzed_statefully_along_schema_links(
    request: pytest.FixtureRequest, listener: str, project_id: int, tester_thread_id: int
) -> None:
    """SPEC §6 along call chains: create a thread, then send to and open it, on each listener."""
    if listener == HUMAN:
        run_stateful(request.getfixturevalue("human_client"), human_cases, HUMAN_SCHEMA)
    else:
        run_stateful(request.getfixturevalue("tester_client"), tester_cases, TESTER_SCHEMA)


@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_thread_id_path_parameter_is_an_integer(listener: str) -> None:
    schema = HUMAN_SCHEMA if listener == HUMAN else TESTER_SCHEMA
    parameters = schema["paths"]["/api/chat/threads/{thread_id}/messages"]["get"]["parameters"]
    [thread_id] = [p for p in parameters if p["name"] == "thread_id"]
    assert thread_id["schema"]["type"] == "integer"


def test_fuzzing_sent_the_cases_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    """The fuzz tests above really sent cases: at least one per operation that ran, and in the
    full run (`make fuzz`) at least `MOSAIC_FUZZ_MIN_CASES` in all."""
    total = sum(SENT.values())
    with capsys.disabled():
        print(
            f"\nschemathesis: {total} cases sent (human {SENT[HUMAN]}, tester {SENT[TESTER]}) "
            f"over {len(OPERATIONS)} operations, {EXAMPLES} examples each asked; "
            f"{PROBES['auth']} sent again without a valid session"
        )
    assert total >= len(OPERATIONS)
    assert total >= MIN_CASES, f"only {total} cases sent; {MIN_CASES} asked"
