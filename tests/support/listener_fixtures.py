"""Listener fixtures (a plugin of the root conftest): signed-in clients, and a broker spy."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

import broker.access
from tests.support.listeners import HUMAN, TESTER, ListenerClient

PASSWORD = "correct horse battery"


def signed_in_staff() -> ListenerClient:
    """A staff superuser, signed in through admin's own sign-in form."""
    User.objects.create_superuser("staff", password=PASSWORD)
    client = ListenerClient(HUMAN)
    client.get("/admin/login/")
    answer = client.request(
        "POST",
        "/admin/login/",
        content=f"username=staff&password={PASSWORD}&next=/admin/".encode(),
        headers={
            **client.write_headers(),
            "Content-Type": "application/x-www-form-urlencoded",
            "X-CSRFToken": client.cookies.get("csrftoken") or "",
        },
        write_headers=False,
    )
    assert answer.status_code == 302, answer.text
    return client


@pytest.fixture
def ada(business) -> User:
    return User.objects.create_user("ada", password=PASSWORD)


@pytest.fixture
def human_client(ada: User) -> ListenerClient:
    client = ListenerClient(HUMAN)
    client.sign_in("ada", PASSWORD)
    return client


@pytest.fixture
def anonymous_client(business) -> ListenerClient:
    return ListenerClient(HUMAN)


@pytest.fixture
def tester_client(business) -> ListenerClient:
    return ListenerClient(TESTER)


@pytest.fixture
def broker_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The broker verbs called, in order: every verb passes `access_verb` first."""
    calls: list[str] = []
    real = broker.access.access_verb

    def spy(actor, name, allowed, **kwargs):
        calls.append(name)
        return real(actor, name, allowed, **kwargs)

    monkeypatch.setattr(broker.access, "access_verb", spy)
    return calls


@pytest.fixture
def project_id(human_client: ListenerClient) -> int:
    response = human_client.post("/api/chat/projects", {"name": "product"})
    assert response.status_code == 201, response.text
    return response.json()["project"]["id"]


@pytest.fixture
def human_thread_id(human_client: ListenerClient, project_id: int) -> int:
    response = human_client.post("/api/chat/threads", {"project": project_id, "name": "mine"})
    assert response.status_code == 201, response.text
    return response.json()["thread"]["id"]


@pytest.fixture
def tester_thread_id(tester_client: ListenerClient, project_id: int) -> int:
    response = tester_client.post("/api/chat/threads", {"project": project_id, "name": "probe"})
    assert response.status_code == 201, response.text
    return response.json()["thread"]["id"]


@pytest.fixture
def sides(
    human_client: ListenerClient,
    tester_client: ListenerClient,
    human_thread_id: int,
    tester_thread_id: int,
) -> dict[str, tuple[ListenerClient, int]]:
    """Each side's client and its own thread."""
    return {"human": (human_client, human_thread_id), "tester": (tester_client, tester_thread_id)}
