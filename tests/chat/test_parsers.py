"""JSON bodies nested too deep for the decoder are refused `invalid`, never a 500 (SPEC §6)."""

from __future__ import annotations

import pytest

from broker.models import Message, Project, Thread
from chat.api.parsers import DEPTH_MAX
from tests.support.listener_routes import routes
from tests.support.listeners import HUMAN, TESTER, ListenerClient
from tests.support.openai_api import KEY, bearer, is_openai_path, refusal_code

DEEP = b"[" * 2000

# Each write route of both listeners; on the human listener signed in, and sign-in itself
# without a session (the other routes refuse a visitor before reading the body).
WRITES = [
    pytest.param(route, signed_in, id=f"{route.listener}:{route.name}")
    for listener in (HUMAN, TESTER)
    for route in routes(listener)
    if route.writes
    for signed_in in [listener == HUMAN and route.name != "auth-login"]
]


def stored() -> tuple[int, int, int]:
    return Project.objects.count(), Thread.objects.count(), Message.objects.count()


@pytest.mark.parametrize(("route", "signed_in"), WRITES)
def test_post_deeply_nested_body_is_invalid_and_stores_nothing(
    route,
    signed_in: bool,
    human_client: ListenerClient,
    human_thread_id: int,
    tester_thread_id: int,
    settings,
) -> None:
    """`"[" * 2000` on any write route of either listener: 400 `invalid`, nothing stored (the
    tester's OpenAI-compatible route with its key, refused in OpenAI's shape)."""
    client = human_client if signed_in else ListenerClient(route.listener)
    thread_id = tester_thread_id if route.listener == TESTER else human_thread_id
    path = route.path(str(thread_id))
    settings.MOSAIC_TESTER_API_KEY = KEY
    key = bearer() if is_openai_path(path) else {}
    before = stored()
    response = client.request(route.write_method, path, content=DEEP, headers=key)
    assert (response.status_code, refusal_code(response)) == (400, "invalid")
    assert stored() == before


def test_post_nesting_the_decoder_survives_with_idempotency_key_is_invalid(
    tester_client: ListenerClient,
) -> None:
    """Nesting shallow enough for the decoder but too deep to encode again (the idempotency
    fingerprint re-encodes the body) is refused by DEPTH_MAX before anything encodes it."""
    depth = 950
    assert depth > DEPTH_MAX
    nested = b'{"name": ' + b"[" * depth + b"]" * depth + b"}"
    response = tester_client.request(
        "POST", "/api/chat/projects", content=nested, headers={"Idempotency-Key": "k1"}
    )
    assert (response.status_code, response.json()["error"]) == (400, "invalid")
    assert Project.objects.count() == 0
