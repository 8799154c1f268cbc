"""R24 over HTTP, on both listeners: edit, regenerate, branch and a branch's carried part."""

from __future__ import annotations

import pytest

from broker.actors import Actor
from broker.models import Message, Thread
from tests.broker import factories
from tests.chat.test_contract import MESSAGE, THREAD
from tests.support.listeners import ListenerClient

SIDES = [("human_client", "human_thread_id"), ("tester_client", "tester_thread_id")]


@pytest.fixture(params=SIDES, ids=["human", "tester"])
def side(request: pytest.FixtureRequest) -> tuple[ListenerClient, int]:
    client_name, thread_name = request.param
    return request.getfixturevalue(client_name), request.getfixturevalue(thread_name)


def answered(client: ListenerClient, run: Actor, thread_id: int, body: str) -> tuple[dict, Message]:
    """A turn sent through the listener, and the run's reply to it."""
    sent = client.post(f"/api/chat/threads/{thread_id}/messages", {"body": body})
    assert sent.status_code == 201, sent.text
    turn = sent.json()["message"]
    return turn, factories.reply(run, Message.objects.get(pk=turn["id"]), body=f"re: {body}")


def test_edit_in_place_answers_201_with_the_new_turn_and_its_thread(
    side: tuple[ListenerClient, int], assistant_run: Actor
) -> None:
    client, thread_id = side
    turn, _ = answered(client, assistant_run, thread_id, "one")
    edited = client.post(
        f"/api/chat/threads/{thread_id}/messages/{turn['id']}/edit", {"body": "uno"}
    )
    assert edited.status_code == 201, edited.text
    body = edited.json()
    assert set(body) == {"message", "request", "thread"}
    assert set(body["message"]) == MESSAGE
    assert set(body["thread"]) == THREAD
    assert (body["message"]["version_of"], body["message"]["body"]) == (turn["id"], "uno")
    assert (body["thread"]["id"], body["thread"]["branched_from"]) == (thread_id, None)
    assert (body["request"] is None) == (client.listener == "tester")


def test_regenerate_of_an_earlier_turn_branches_and_carries_the_conversation(
    side: tuple[ListenerClient, int], assistant_run: Actor
) -> None:
    client, thread_id = side
    one, reply_one = answered(client, assistant_run, thread_id, "one")
    two, _ = answered(client, assistant_run, thread_id, "two")
    answered(client, assistant_run, thread_id, "three")
    again = client.post(f"/api/chat/threads/{thread_id}/messages/{two['id']}/regenerate", {})
    assert again.status_code == 201, again.text
    branch = again.json()["thread"]
    source_name = Thread.objects.get(pk=thread_id).name
    assert branch["branched_from"] == {
        "thread": thread_id,
        "name": source_name,
        "message": reply_one.pk,
    }
    assert branch["name"] == f"{source_name} (branch)"
    carried = client.get(f"/api/chat/threads/{branch['id']}/carried")
    assert carried.status_code == 200
    assert [m["id"] for m in carried.json()["messages"]] == [one["id"], reply_one.pk]
    # A carried reply is told as the thread's own are: its duration from the turn it answers.
    carried_reply = carried.json()["messages"][1]
    assert isinstance(carried_reply["duration_ms"], int)
    newest = client.get(f"/api/chat/threads/{branch['id']}/carried?limit=1")
    assert [m["id"] for m in newest.json()["messages"]] == [reply_one.pk]
    assert client.get(f"/api/chat/threads/{thread_id}/carried").json() == {"messages": []}
    # The thread list names the source of a branch too.
    listed = client.get("/api/chat/threads").json()["threads"]
    assert {t["id"]: t["branched_from"] for t in listed}[branch["id"]]["thread"] == thread_id


def test_branch_answers_201_with_the_thread(
    side: tuple[ListenerClient, int], assistant_run: Actor
) -> None:
    client, thread_id = side
    turn, _ = answered(client, assistant_run, thread_id, "one")
    made = client.post(
        f"/api/chat/threads/{thread_id}/branch", {"message": turn["id"], "name": "side"}
    )
    assert made.status_code == 201, made.text
    assert set(made.json()) == {"thread"}
    assert made.json()["thread"]["name"] == "side"
    assert made.json()["thread"]["branched_from"]["message"] == turn["id"]
    taken = client.post(
        f"/api/chat/threads/{thread_id}/branch", {"message": turn["id"], "name": "side"}
    )
    assert (taken.status_code, taken.json()["error"]) == (409, "thread-exists")


def test_refusals_carry_their_codes_and_statuses(
    human_client: ListenerClient,
    tester_client: ListenerClient,
    human_thread_id: int,
    tester_thread_id: int,
) -> None:
    """`turn-in-progress` 409 while the reply is owed; R1 on the other side's thread; unknown
    fields `invalid`."""
    sent = human_client.post(f"/api/chat/threads/{human_thread_id}/messages", {"body": "one"})
    mid = sent.json()["message"]["id"]
    pending = human_client.post(
        f"/api/chat/threads/{human_thread_id}/messages/{mid}/edit", {"body": "x"}
    )
    assert pending.status_code == 409
    assert pending.json() == {
        "error": "turn-in-progress",
        "detail": "Stop the reply first, or wait for it.",
    }
    theirs = tester_client.post(f"/api/chat/threads/{human_thread_id}/branch", {"message": mid})
    assert (theirs.status_code, theirs.json()["error"]) == (403, "thread-not-owned")
    foreign = human_client.post(
        f"/api/chat/threads/{tester_thread_id}/messages/{mid}/regenerate", {}
    )
    assert (foreign.status_code, foreign.json()["error"]) == (403, "thread-not-owned")
    stray = human_client.post(
        f"/api/chat/threads/{human_thread_id}/messages/{mid}/regenerate", {"colour": "red"}
    )
    assert (stray.status_code, stray.json()["error"]) == (400, "invalid")
    missing = human_client.post(f"/api/chat/threads/{human_thread_id}/branch", {"message": 999})
    assert (missing.status_code, missing.json()["error"]) == (404, "not-found")


def test_idempotency_key_replays_the_first_answer(
    side: tuple[ListenerClient, int], assistant_run: Actor
) -> None:
    """R21: a repeated edit or branch with its key is answered as the first, storing nothing."""
    client, thread_id = side
    turn, _ = answered(client, assistant_run, thread_id, "one")
    for path, data in (
        (f"/api/chat/threads/{thread_id}/branch", {"message": turn["id"]}),
        (f"/api/chat/threads/{thread_id}/messages/{turn['id']}/edit", {"body": "uno"}),
    ):
        key = {"Idempotency-Key": path}
        first = client.post(path, data, headers=key)
        stored = (Message.objects.count(), Thread.objects.count())
        again = client.post(path, data, headers=key)
        assert first.status_code == again.status_code == 201
        assert first.json() == again.json()
        assert (Message.objects.count(), Thread.objects.count()) == stored
