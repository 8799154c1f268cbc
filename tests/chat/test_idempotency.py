"""R21: Idempotency-Key on every chat write, scoped per owner."""

from __future__ import annotations

import pytest

from broker.models import IdempotentWrite, Message, Project, Thread
from tests.support.listeners import ListenerClient


def test_repeated_write_with_key_returns_first_answer_and_stores_nothing(
    human_client: ListenerClient, human_thread_id: int
) -> None:
    """R21: same actor, same key, same body: the first answer, once."""
    path = f"/api/chat/threads/{human_thread_id}/messages"
    first = human_client.post(path, {"body": "once"}, headers={"Idempotency-Key": "k-1"})
    again = human_client.post(path, {"body": "once"}, headers={"Idempotency-Key": "k-1"})
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert Message.objects.count() == 1


def test_same_key_with_other_body_is_refused(human_client: ListenerClient) -> None:
    """R21: the same key with another body: 422 `idempotency-key-reused`."""
    human_client.post("/api/chat/projects", {"name": "a"}, headers={"Idempotency-Key": "k"})
    reused = human_client.post(
        "/api/chat/projects", {"name": "b"}, headers={"Idempotency-Key": "k"}
    )
    assert (reused.status_code, reused.json()["error"]) == (422, "idempotency-key-reused")
    assert list(Project.objects.values_list("name", flat=True)) == ["a"]


def test_same_key_on_another_route_is_refused(human_client: ListenerClient, project_id) -> None:
    human_client.post("/api/chat/projects", {"name": "a"}, headers={"Idempotency-Key": "k"})
    other = human_client.post(
        "/api/chat/threads", {"project": project_id, "name": "a"}, headers={"Idempotency-Key": "k"}
    )
    assert other.json()["error"] == "idempotency-key-reused"


def test_keys_are_scoped_per_owner(
    human_client: ListenerClient, tester_client: ListenerClient, project_id: int
) -> None:
    """R21: the tester's key never collides with, nor reveals, the human's."""
    mine = human_client.post(
        "/api/chat/threads", {"project": project_id, "name": "h"}, headers={"Idempotency-Key": "k"}
    )
    theirs = tester_client.post(
        "/api/chat/threads", {"project": project_id, "name": "t"}, headers={"Idempotency-Key": "k"}
    )
    assert mine.status_code == theirs.status_code == 201
    assert theirs.json()["thread"]["owner"] == "tester"
    assert Thread.objects.count() == 2
    assert set(IdempotentWrite.objects.values_list("owner", flat=True)) == {"ada", "tester"}


def test_refused_write_is_not_remembered(human_client: ListenerClient, project_id: int) -> None:
    """A refusal rolls back with its key: a corrected retry with the same key runs."""
    headers = {"Idempotency-Key": "retry"}
    missing = human_client.post("/api/chat/threads", {"project": 999, "name": "t"}, headers=headers)
    assert missing.status_code == 404
    assert not IdempotentWrite.objects.exists()
    again = human_client.post("/api/chat/threads", {"project": 999, "name": "t"}, headers=headers)
    assert again.status_code == 404


@pytest.mark.parametrize("key", ["", " ", "x" * 201, "two words", "tab\tkey"])
def test_bad_key_is_invalid(human_client: ListenerClient, key: str) -> None:
    response = human_client.post(
        "/api/chat/projects", {"name": "a"}, headers={"Idempotency-Key": key}
    )
    assert (response.status_code, response.json()["error"]) == (400, "invalid")
    assert not Project.objects.exists()
