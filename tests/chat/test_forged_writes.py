"""A forged-write matrix on both listeners (L1–L3, L8): 0 forgeries accepted, every legitimate
write accepted, and the broker never called on a refusal."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from broker.models import Message, Project, Thread, ThreadClaim, ThreadOpen
from tests.support.listeners import HUMAN, TESTER, ListenerClient

# Each forgery: what it changes in an otherwise legitimate write, and the listeners it applies to.
FORGERIES: dict[str, tuple[tuple[str, ...], dict[str, str | None]]] = {
    "origin-missing": ((HUMAN, TESTER), {"Origin": None}),
    "origin-foreign": ((HUMAN, TESTER), {"Origin": "http://evil.example"}),
    "origin-https-for-http": ((HUMAN, TESTER), {"Origin": "https://127.0.0.1:{port}"}),
    "origin-other-listener": ((HUMAN, TESTER), {"Origin": "http://127.0.0.1:{other_port}"}),
    "origin-localhost-on-tester": ((TESTER,), {"Origin": "http://localhost:{port}"}),
    "origin-null": ((HUMAN, TESTER), {"Origin": "null"}),
    "fetch-cross-site": ((HUMAN, TESTER), {"Sec-Fetch-Site": "cross-site"}),
    "fetch-same-site": ((HUMAN, TESTER), {"Sec-Fetch-Site": "same-site"}),
    "fetch-none": ((HUMAN, TESTER), {"Sec-Fetch-Site": "none"}),
    "fetch-absent": ((HUMAN, TESTER), {"Sec-Fetch-Site": None}),
    "body-text-plain": ((HUMAN, TESTER), {"Content-Type": "text/plain"}),
    "body-form": ((HUMAN, TESTER), {"Content-Type": "application/x-www-form-urlencoded"}),
    "body-multipart": ((HUMAN, TESTER), {"Content-Type": "multipart/form-data; boundary=x"}),
    "csrf-missing": ((HUMAN,), {"X-CSRFToken": None}),
    "csrf-wrong": ((HUMAN,), {"X-CSRFToken": "x" * 32}),
    "proxy-header": ((TESTER,), {"X-User": "ada"}),
    "proxy-header-underscore": ((TESTER,), {"X_User": "ada"}),
    "tester-header-empty": ((HUMAN,), {"X-Mosaic-Tester": ""}),
    "tester-header-value": ((HUMAN,), {"X-Mosaic-Tester": "1"}),
    "tester-header-underscore": ((HUMAN,), {"X_Mosaic_Tester": ""}),
    "tester-header-upper": ((HUMAN,), {"X-MOSAIC-TESTER": "yes"}),
    "host-rebinding": ((TESTER,), {"Host": "attacker.example:{port}"}),
    "host-localhost": ((TESTER,), {"Host": "localhost:{port}"}),
}

WRITES: dict[str, Callable[[dict[str, int]], tuple[str, dict]]] = {
    "project-create": lambda ids: ("/api/chat/projects", {"name": "forged"}),
    "thread-create": lambda ids: ("/api/chat/threads", {"project": ids["project"], "name": "f"}),
    "thread-send": lambda ids: (f"/api/chat/threads/{ids['thread']}/messages", {"body": "f"}),
    "thread-open": lambda ids: (f"/api/chat/threads/{ids['thread']}/open", {}),
    "stop": lambda ids: ("/api/chat/stop", {}),
}

CASES = [
    (listener, forgery, write)
    for forgery, (listeners, _) in FORGERIES.items()
    for listener in listeners
    for write in WRITES
]


def counts() -> tuple[int, ...]:
    return tuple(
        model.objects.count() for model in (Project, Thread, Message, ThreadOpen, ThreadClaim)
    )


@pytest.fixture
def clients(human_client: ListenerClient, tester_client: ListenerClient):
    return {HUMAN: human_client, TESTER: tester_client}


@pytest.fixture
def ids(request, clients, project_id: int, human_thread_id: int, tester_thread_id: int):
    return {
        HUMAN: {"project": project_id, "thread": human_thread_id},
        TESTER: {"project": project_id, "thread": tester_thread_id},
    }


@pytest.mark.parametrize(("listener", "forgery", "write"), CASES)
def test_forged_write_is_refused_before_the_broker(
    clients, ids, broker_calls: list[str], listener: str, forgery: str, write: str
) -> None:
    """L1–L3, L8: a forged write gets a 4xx error body; nothing stored, no broker call."""
    client: ListenerClient = clients[listener]
    other_port = clients[TESTER if listener == HUMAN else HUMAN].port
    _, changes = FORGERIES[forgery]
    headers = {**client.write_headers()}
    for name, value in changes.items():
        if value is None:
            headers.pop(name, None)
        else:
            headers[name] = value.format(port=client.port, other_port=other_port)
    path, body = WRITES[write](ids[listener])
    before = counts()
    broker_calls.clear()
    response = client.request("POST", path, json=body, headers=headers, write_headers=False)
    assert 400 <= response.status_code < 500, response.text
    if response.status_code != 302:
        assert set(response.json()) == {"error", "detail"}
    assert broker_calls == []
    assert counts() == before


@pytest.mark.parametrize("listener", [HUMAN, TESTER])
@pytest.mark.parametrize("write", list(WRITES))
def test_legitimate_write_is_accepted(clients, ids, listener: str, write: str) -> None:
    """The same writes with the listener's own headers succeed (stop: `not-held`, a 409)."""
    client: ListenerClient = clients[listener]
    path, body = WRITES[write](ids[listener])
    response = client.post(path, body)
    if write == "stop":
        assert (response.status_code, response.json()["error"]) == (409, "not-held")
    else:
        assert response.status_code in (200, 201), response.text
