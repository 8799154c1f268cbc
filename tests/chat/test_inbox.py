"""The inbox's routes on both listeners: rename and archive by PATCH, the read
mark, the list's archived filter, and the Console's channel header."""

from __future__ import annotations

from typing import Any

import pytest

from broker.models import TrailRow
from tests.support.listeners import ListenerClient


def patch(client: ListenerClient, thread_id: int, body: Any, **kwargs: Any) -> Any:
    return client.request("PATCH", f"/api/chat/threads/{thread_id}", json=body, **kwargs)


def error_of(response: Any) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


def names(client: ListenerClient, query: str = "") -> list[str]:
    response = client.get(f"/api/chat/threads{query}")
    assert response.status_code == 200, response.text
    return [thread["name"] for thread in response.json()["threads"]]


def test_patch_renames_and_archives_own_thread(
    human_client: ListenerClient, human_thread_id: int
) -> None:
    response = patch(human_client, human_thread_id, {"name": "renamed", "archived": True})
    assert response.status_code == 200, response.text
    thread = response.json()["thread"]
    assert (thread["id"], thread["name"], thread["archived"]) == (human_thread_id, "renamed", True)
    assert (names(human_client), names(human_client, "?archived=true")) == ([], ["renamed"])
    assert names(human_client, "?archived=false") == []
    rows = human_client.get("/api/trail").json()["rows"]
    assert [(row["kind"], row["thread_name"]) for row in rows] == [
        ("thread.renamed", "renamed"),
        ("thread.archived", "renamed"),
    ]


@pytest.mark.parametrize(("side", "other"), [("tester", "human"), ("human", "tester")])
def test_patch_and_read_of_the_other_sides_thread_are_thread_not_owned(
    sides: dict[str, tuple[ListenerClient, int]], side: str, other: str
) -> None:
    """R1 over HTTP on both listeners: the tester renames the human's thread, the human the
    tester's — each `thread-not-owned`, nothing stored."""
    client, _ = sides[side]
    _, thread_id = sides[other]
    renamed = patch(client, thread_id, {"name": "taken over"})
    archived = patch(client, thread_id, {"archived": True})
    read = client.post(f"/api/chat/threads/{thread_id}/read", {"up_to": 1})
    assert [error_of(r) for r in (renamed, archived, read)] == [(403, "thread-not-owned")] * 3
    assert not TrailRow.objects.exists()


@pytest.mark.parametrize(
    "body",
    [{}, {"name": 5}, {"name": ""}, {"archived": "yes"}, {"archived": 1}, {"other": 1}, []],
)
def test_patch_with_a_bad_body_is_invalid(
    human_client: ListenerClient, human_thread_id: int, body: Any
) -> None:
    assert error_of(patch(human_client, human_thread_id, body)) == (400, "invalid")


def test_patch_to_a_name_taken_in_the_project_is_thread_exists(
    tester_client: ListenerClient, human_thread_id: int, tester_thread_id: int
) -> None:
    """R18: the accepted leak, exactly as for create."""
    assert error_of(patch(tester_client, tester_thread_id, {"name": "mine"})) == (
        409,
        "thread-exists",
    )


def test_patch_repeated_with_its_idempotency_key_answers_once(
    human_client: ListenerClient, human_thread_id: int
) -> None:
    """R21 for the inbox's writes: the repeat returns the first answer and stores nothing."""
    key = {"Idempotency-Key": "rename-1"}
    first = patch(human_client, human_thread_id, {"name": "once"}, headers=key)
    patch(human_client, human_thread_id, {"name": "mine"})
    again = patch(human_client, human_thread_id, {"name": "once"}, headers=key)
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert TrailRow.objects.count() == 2
    other = patch(human_client, human_thread_id, {"name": "twice"}, headers=key)
    assert error_of(other) == (422, "idempotency-key-reused")


def test_list_with_a_bad_archived_flag_is_invalid(human_client: ListenerClient) -> None:
    for flag in ("yes", "1", "True", ""):
        response = human_client.get(f"/api/chat/threads?archived={flag}")
        assert error_of(response) == (400, "invalid"), flag


@pytest.mark.parametrize("side", ["human", "tester"])
def test_read_marks_the_thread_and_counts_unread_per_side(
    sides: dict[str, tuple[ListenerClient, int]], side: str
) -> None:
    """The list shows each side's own unread count; the mark moves only forward."""
    client, thread_id = sides[side]
    sent = [
        client.post(f"/api/chat/threads/{thread_id}/messages", {"body": body}).json()["message"]
        for body in ("one", "two")
    ]
    (listed,) = client.get("/api/chat/threads").json()["threads"]
    # Its own turns are never unread.
    assert (listed["unread"], listed["read_up_to"], listed["preview"]) == (0, None, "two")
    marked = client.post(f"/api/chat/threads/{thread_id}/read", {"up_to": sent[1]["id"]})
    back = client.post(f"/api/chat/threads/{thread_id}/read", {"up_to": sent[0]["id"]})
    assert (marked.status_code, back.status_code) == (200, 200)
    assert back.json()["thread"]["read_up_to"] == sent[1]["id"]


@pytest.mark.parametrize("body", [{}, {"up_to": "1"}, {"up_to": 0}, {"up_to": 999999}])
def test_read_up_to_no_message_of_the_thread_is_invalid(
    human_client: ListenerClient, human_thread_id: int, body: Any
) -> None:
    response = human_client.post(f"/api/chat/threads/{human_thread_id}/read", body)
    assert error_of(response) == (400, "invalid")


@pytest.mark.parametrize(
    ("header", "via"),
    [({"X-Mosaic-Via": "console"}, "console"), ({}, "api"), ({"X-Mosaic-Via": "cli"}, "api")],
)
def test_send_channel_comes_from_the_console_header_else_api(
    human_client: ListenerClient, human_thread_id: int, header: dict[str, str], via: str
) -> None:
    """Only the Console's own header says `console`; anything else is `api` (`cli` is the
    command line's, never an HTTP client's). The stored sender stays `human-cli` (R6)."""
    response = human_client.post(
        f"/api/chat/threads/{human_thread_id}/messages", {"body": "hi"}, headers=header
    )
    assert response.status_code == 201, response.text
    (row,) = human_client.get("/api/trail").json()["rows"]
    assert (row["via"], row["from_run"], row["kind"], row["thread_name"]) == (
        via,
        "human-cli",
        "message",
        "mine",
    )
