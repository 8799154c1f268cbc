"""L4: the tester fence — writes reach only the allow-listed routes, exactly."""

from __future__ import annotations

import pytest

from chat.routes import ROUTES
from tester.gates import TESTER_WRITE_ROUTES
from tests.listeners import ListenerClient

READ_ONLY_ROUTES = [
    (route.replace("<id:thread_id>", "1"), name)
    for route, _, name in ROUTES
    if name not in TESTER_WRITE_ROUTES
]


def test_fence_allow_list_names_exactly_the_chat_writes_and_stop() -> None:
    """L4: the chat writes and the tester's stop, nothing else."""
    assert {
        "chat-projects",
        "chat-threads",
        "chat-thread-messages",
        "chat-thread-open",
        "chat-stop",
    } == TESTER_WRITE_ROUTES
    assert {name for _, _, name in ROUTES} >= TESTER_WRITE_ROUTES


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
