"""`GET /api/chat/search` on both listeners: every project of the caller's own threads (R3),
their messages only (R1, R20), and `invalid` for a missing, empty or too long term (SPEC §6)."""

from __future__ import annotations

import pytest

from tests.chat.test_contract import THREAD, error_of
from tests.support.listeners import ListenerClient

HIT = {
    "id",
    "thread",
    "thread_name",
    "project",
    "project_name",
    "archived",
    "from_role",
    "created_at",
    "snippet",
}
LISTENERS = ["human_client", "tester_client"]


def started(client: ListenerClient, project: str, thread: str, body: str) -> tuple[int, int]:
    """A new project with one thread holding one message: (thread id, message id)."""
    made = client.post("/api/chat/projects", {"name": project}).json()["project"]
    opened = client.post("/api/chat/threads", {"project": made["id"], "name": thread})
    thread_id = opened.json()["thread"]["id"]
    sent = client.post(f"/api/chat/threads/{thread_id}/messages", {"body": body})
    return thread_id, sent.json()["message"]["id"]


@pytest.mark.parametrize("listener", LISTENERS)
def test_search_answers_threads_and_messages_of_every_project(request, listener: str) -> None:
    client: ListenerClient = request.getfixturevalue(listener)
    first_thread, first = started(client, f"{listener} alpha", "heron plans", "no match")
    second_thread, second = started(client, f"{listener} beta", "notes", "a grey Heron flew")

    answer = client.get("/api/chat/search?q=heron")

    assert answer.status_code == 200, answer.text
    assert set(answer.json()) == {"threads", "messages"}
    (thread,) = answer.json()["threads"]
    assert set(thread) == THREAD | {"project_name"}
    assert (thread["id"], thread["project_name"]) == (first_thread, f"{listener} alpha")
    (hit,) = answer.json()["messages"]
    assert set(hit) == HIT
    assert (hit["id"], hit["thread"], hit["thread_name"]) == (second, second_thread, "notes")
    assert (hit["project_name"], hit["archived"], hit["snippet"]) == (
        f"{listener} beta",
        False,
        "a grey Heron flew",
    )
    assert hit["from_role"] == ("human" if listener == "human_client" else "tester")
    assert first not in [m["id"] for m in answer.json()["messages"]]


def test_search_keeps_each_side_to_its_own_threads(
    human_client: ListenerClient, tester_client: ListenerClient
) -> None:
    """R3, R20 over HTTP: neither side finds the other's thread or message."""
    _, human_message = started(human_client, "hers", "crane human", "crane sighted")
    _, tester_message = started(tester_client, "its", "crane tester", "crane probed")
    human = human_client.get("/api/chat/search?q=crane").json()
    tester = tester_client.get("/api/chat/search?q=crane").json()
    assert [m["id"] for m in human["messages"]] == [human_message]
    assert [t["name"] for t in human["threads"]] == ["crane human"]
    assert [m["id"] for m in tester["messages"]] == [tester_message]
    assert [t["name"] for t in tester["threads"]] == ["crane tester"]


@pytest.mark.parametrize("listener", LISTENERS)
def test_search_pages_with_limit_and_before(request, listener: str) -> None:
    client: ListenerClient = request.getfixturevalue(listener)
    thread_id, first = started(client, "pages", "paged", "egret 0")
    ids = [first] + [
        client.post(f"/api/chat/threads/{thread_id}/messages", {"body": f"egret {i}"}).json()[
            "message"
        ]["id"]
        for i in range(1, 4)
    ]
    page = client.get("/api/chat/search?q=egret&limit=2").json()
    assert [m["id"] for m in page["messages"]] == [ids[3], ids[2]]
    older = client.get(f"/api/chat/search?q=egret&limit=2&before={ids[2]}").json()
    assert [m["id"] for m in older["messages"]] == [ids[1], ids[0]]
    assert older["threads"] == []


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize(
    "query",
    ["", "?q=", "?q=%20%20", "?q=" + "x" * 201, "?q=a&limit=0", "?q=a&before=x", "?q=a&q=b"],
    ids=["missing", "empty", "blank", "too-long", "limit", "cursor", "repeated"],
)
def test_search_without_a_good_term_or_cursor_is_invalid(request, listener: str, query) -> None:
    client: ListenerClient = request.getfixturevalue(listener)
    assert error_of(client.get(f"/api/chat/search{query}"), 400) == "invalid"
