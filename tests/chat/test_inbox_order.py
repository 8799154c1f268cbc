"""The inbox's order, pins and the default project over HTTP, on both listeners: the thread
list by last activity with pinned threads first, `PATCH {"pinned"}` on one's own thread only
(R1, R20, R22), and a thread made with no project filed in the side's own default project."""

from __future__ import annotations

from typing import Any

import pytest

from broker.actors import Actor
from broker.models import Thread, TrailRow
from tests.broker import factories
from tests.support.listeners import ListenerClient


@pytest.fixture
def sides(human_client: ListenerClient, tester_client: ListenerClient, human: Actor, tester: Actor):
    """Each listener's client and the actor it acts as."""
    return {"human": (human_client, human), "tester": (tester_client, tester)}


def create(client: ListenerClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/chat/threads", body)
    assert response.status_code == 201, response.text
    thread: dict[str, Any] = response.json()["thread"]
    return thread


def by_activity(client: ListenerClient, query: str = "") -> list[str]:
    response = client.get(f"/api/chat/threads?order=activity{query}")
    assert response.status_code == 200, response.text
    return [thread["name"] for thread in response.json()["threads"]]


def patch(client: ListenerClient, thread_id: int, body: Any) -> Any:
    return client.request("PATCH", f"/api/chat/threads/{thread_id}", json=body)


@pytest.mark.parametrize("side", ["human", "tester"])
def test_a_reply_moves_the_thread_to_the_top_of_the_activity_order(
    sides, assistant_run: Actor, project_id: int, side: str
) -> None:
    """The list in the inbox's order, on each listener: newest activity first, a reply in an
    older thread brings it to the top; the default order stays by id."""
    client, _ = sides[side]
    ids = {name: create(client, {"project": project_id, "name": name})["id"] for name in "abc"}
    assert by_activity(client) == ["c", "b", "a"]
    sent = client.post(f"/api/chat/threads/{ids['a']}/messages", {"body": "hi"})
    assert sent.status_code == 201, sent.text
    assert by_activity(client) == ["a", "c", "b"]
    client.post(f"/api/chat/threads/{ids['b']}/messages", {"body": "hi"})
    assert by_activity(client) == ["b", "a", "c"]
    thread = Thread.objects.get(pk=ids["a"])
    factories.reply(assistant_run, thread.messages.order_by("-pk")[0])
    assert by_activity(client, f"&project={project_id}") == ["a", "b", "c"]
    listed = client.get("/api/chat/threads").json()["threads"]
    assert [thread["name"] for thread in listed] == ["a", "b", "c"]


@pytest.mark.parametrize("side", ["human", "tester"])
def test_pin_own_thread_puts_it_first_and_unpin_puts_it_back(
    sides, project_id: int, side: str
) -> None:
    """PATCH `pinned` on each listener: the thread shape says `pinned`, pinned threads come
    first, each change one trail row (`thread.pinned`, `thread.unpinned`)."""
    client, _ = sides[side]
    ids = {name: create(client, {"project": project_id, "name": name})["id"] for name in "ab"}
    assert by_activity(client) == ["b", "a"]
    response = patch(client, ids["a"], {"pinned": True})
    assert response.status_code == 200, response.text
    assert (response.json()["thread"]["id"], response.json()["thread"]["pinned"]) == (
        ids["a"],
        True,
    )
    assert by_activity(client) == ["a", "b"]
    listed = client.get("/api/chat/threads?order=activity").json()["threads"]
    assert [thread["pinned"] for thread in listed] == [True, False]
    assert patch(client, ids["a"], {"pinned": False}).json()["thread"]["pinned"] is False
    assert by_activity(client) == ["b", "a"]
    rows = client.get("/api/trail").json()["rows"]
    assert [(row["kind"], row["thread"]) for row in rows] == [
        ("thread.pinned", ids["a"]),
        ("thread.unpinned", ids["a"]),
    ]


@pytest.mark.parametrize(("side", "other"), [("tester", "human"), ("human", "tester")])
def test_pin_of_the_other_sides_thread_is_thread_not_owned(
    sides, project_id: int, side: str, other: str
) -> None:
    """R1 over HTTP on both listeners: nothing pinned, no trail row; the other side's list
    keeps its order."""
    client, _ = sides[side]
    other_client, _ = sides[other]
    theirs = create(other_client, {"project": project_id, "name": "theirs"})["id"]
    for body in ({"pinned": True}, {"name": "mine now", "pinned": True}):
        response = patch(client, theirs, body)
        assert (response.status_code, response.json()["error"]) == (403, "thread-not-owned")
    assert Thread.objects.get(pk=theirs).pinned_at is None
    assert not TrailRow.objects.exists()
    assert by_activity(other_client) == ["theirs"]


def test_the_tester_reads_its_own_pins_and_never_the_humans(
    human_client: ListenerClient, tester_client: ListenerClient, project_id: int
) -> None:
    """R20: the human's trail holds both pins, the tester's only its own; R3: each list holds
    only its own threads, pinned or not."""
    mine = create(human_client, {"project": project_id, "name": "mine"})["id"]
    probe = create(tester_client, {"project": project_id, "name": "probe"})["id"]
    assert patch(human_client, mine, {"pinned": True}).status_code == 200
    assert patch(tester_client, probe, {"pinned": True}).status_code == 200
    human_rows = human_client.get("/api/trail").json()["rows"]
    tester_rows = tester_client.get("/api/trail").json()["rows"]
    assert [(row["kind"], row["from_role"]) for row in human_rows] == [
        ("thread.pinned", "human"),
        ("thread.pinned", "tester"),
    ]
    assert [(row["kind"], row["thread"]) for row in tester_rows] == [("thread.pinned", probe)]
    assert (by_activity(human_client), by_activity(tester_client)) == (["mine"], ["probe"])


@pytest.mark.parametrize(
    "query",
    ["&order=newest", "&after=1", "&before=1", "&below=0", "&below=x", "&below=1&below=2"],
)
def test_a_bad_activity_query_is_invalid(human_client: ListenerClient, query: str) -> None:
    response = human_client.get(f"/api/chat/threads?order=activity{query}")
    assert (response.status_code, response.json()["error"]) == (400, "invalid")


def test_below_the_other_sides_thread_is_invalid_as_a_missing_one(
    human_client: ListenerClient, tester_client: ListenerClient, project_id: int
) -> None:
    """R1, R3: the cursor tells nothing about a thread that is not the caller's."""
    probe = create(tester_client, {"project": project_id, "name": "probe"})["id"]
    answers = [
        human_client.get(f"/api/chat/threads?order=activity&below={below}").json()
        for below in (probe, probe + 100)
    ]
    assert answers[0] == answers[1]
    assert answers[0]["error"] == "invalid"


def test_below_pages_the_activity_order(human_client: ListenerClient, project_id: int) -> None:
    ids = {
        name: create(human_client, {"project": project_id, "name": name})["id"] for name in "abcde"
    }
    patch(human_client, ids["b"], {"pinned": True})
    first = by_activity(human_client, "&limit=2")
    second = by_activity(human_client, f"&limit=2&below={ids[first[-1]]}")
    third = by_activity(human_client, f"&limit=2&below={ids[second[-1]]}")
    assert (first, second, third) == (["b", "e"], ["d", "c"], ["a"])


@pytest.mark.parametrize("body", [{"pinned": "yes"}, {"pinned": 1}, {"pinned": None}])
def test_patch_with_a_bad_pinned_is_invalid(
    human_client: ListenerClient, human_thread_id: int, body: Any
) -> None:
    response = patch(human_client, human_thread_id, body)
    assert (response.status_code, response.json()["error"]) == (400, "invalid")


# --- the default project -----------------------------------------------------------------


def test_a_thread_made_with_no_project_goes_to_each_sides_own_default_project(
    human_client: ListenerClient, tester_client: ListenerClient
) -> None:
    """The tester's chats go to its own `Tester chats`, made on first use; the human's to
    `Chats`, its own, never the tester's."""
    probe = create(tester_client, {"name": "probe"})
    chat = create(human_client, {"name": "plan"})
    again = create(human_client, {"name": "plan 2"})
    projects = {p["id"]: p for p in human_client.get("/api/chat/projects").json()["projects"]}
    assert (projects[probe["project"]]["name"], projects[probe["project"]]["creator"]) == (
        "Tester chats",
        "tester",
    )
    assert (projects[chat["project"]]["name"], projects[chat["project"]]["creator"]) == (
        "Chats",
        "human",
    )
    assert again["project"] == chat["project"]


def test_the_humans_default_project_is_never_one_the_tester_made(
    human_client: ListenerClient, tester_client: ListenerClient
) -> None:
    """A `Chats` the tester made first (its Console's default once) is passed over: the human's
    chat goes to `Chats (2)`, the human's own. R18 stays as it is: the thread names of the
    tester's `Chats` are no concern of the human's chat."""
    made = tester_client.post("/api/chat/projects", {"name": "Chats"})
    assert made.status_code == 201, made.text
    create(tester_client, {"project": made.json()["project"]["id"], "name": "plan"})
    chat = create(human_client, {"name": "plan"})
    project = next(
        p
        for p in human_client.get("/api/chat/projects").json()["projects"]
        if p["id"] == chat["project"]
    )
    assert (project["name"], project["creator"]) == ("Chats (2)", "human")


def test_a_thread_unpinned_between_the_inbox_orders_two_reads_is_listed_once(
    human_client: ListenerClient,
) -> None:
    """Pinned threads and the others are two reads; a thread unpinned after the first is in
    the second too, and is listed once."""
    from django.db import connection

    from broker import selectors

    for name in ("a", "b", "c"):
        create(human_client, {"name": name})
    pinned = Thread.objects.get(name="b")
    assert patch(human_client, pinned.pk, {"pinned": True}).status_code == 200
    threads = Thread.objects.filter(owner=pinned.owner, archived_at__isnull=True)
    reads = []

    def unpin_after_the_first_read(execute, sql, params, many, context):
        answer = execute(sql, params, many, context)
        reads.append(sql)
        if len(reads) == 1:
            Thread.objects.filter(pk=pinned.pk).update(pinned_at=None)
        return answer

    with connection.execute_wrapper(unpin_after_the_first_read):
        page = selectors.by_activity(threads, below=None, limit=50)
    assert [thread.name for thread in page] == ["b", "c", "a"]
