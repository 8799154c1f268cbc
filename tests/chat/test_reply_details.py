"""A reply's details and a thread's token total over HTTP, on both listeners: a RESULT carries
`first_token_ms` and `duration_ms` (SPEC §7.1), null on every other message; the single thread's
read (`GET /api/chat/threads/ID`) sums its replies' tokens, the list does not, and the sum is one
query however many replies there are."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from broker import actions
from broker.actors import Actor
from broker.models import Message
from broker.replies import ReplyRecord
from tests.broker import factories
from tests.support.listeners import ListenerClient


def run_of(actor: Actor) -> Actor:
    return Actor.assistant_run(business_id=actor.business_id, instance="assistant", run="run-1")


def answered(actor: Actor, thread_id: int, body: str, record: ReplyRecord | None) -> Message:
    """A turn of `actor` in its thread, answered by the assistant with `record`."""
    turn = actions.send_to_thread(actor, thread_id=thread_id, body=body).message
    return factories.reply(run_of(actor), turn, body=f"re: {body}", record=record)


def record(prompt: int, completion: int, first_token_ms: int = 40) -> ReplyRecord:
    return ReplyRecord(
        model="small-1",
        finish_reason="stop",
        prompt_tokens=prompt,
        completion_tokens=completion,
        first_token_ms=first_token_ms,
    )


@pytest.fixture
def actors(human: Actor, tester: Actor) -> dict[str, Actor]:
    return {"human": human, "tester": tester}


def ok(client: ListenerClient, path: str) -> Any:
    response = client.get(path)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize("side", ["human", "tester"])
def test_result_carries_first_token_and_duration_and_other_messages_null(
    sides: dict[str, tuple[ListenerClient, int]], actors: dict[str, Actor], side: str
) -> None:
    client, thread_id = sides[side]
    actor = actors[side]
    reply = answered(actor, thread_id, "hello", record(12, 3, first_token_ms=250))
    turn = Message.objects.get(pk=reply.in_reply_to_id)
    shown = {m["id"]: m for m in ok(client, f"/api/chat/threads/{thread_id}/messages")["messages"]}
    expected_ms = round((reply.created_at - turn.created_at).total_seconds() * 1000)
    result = shown[reply.pk]
    assert (result["first_token_ms"], result["duration_ms"]) == (250, expected_ms)
    assert result["usage"] == {"prompt_tokens": 12, "completion_tokens": 3}
    assert (shown[turn.pk]["first_token_ms"], shown[turn.pk]["duration_ms"]) == (None, None)
    # The actor's messages view annotates the same way.
    view = {m["id"]: m for m in ok(client, "/api/messages?limit=500")["messages"]}
    assert view[reply.pk]["duration_ms"] == expected_ms


def test_result_without_a_record_has_null_timing(
    human_client: ListenerClient, human_thread_id: int, human: Actor
) -> None:
    reply = answered(human, human_thread_id, "quiet", None)
    [result] = [
        m
        for m in ok(human_client, f"/api/chat/threads/{human_thread_id}/messages")["messages"]
        if m["id"] == reply.pk
    ]
    assert result["first_token_ms"] is None
    assert result["usage"] is None
    # The duration needs nothing the run recorded: both messages' times are stored.
    assert isinstance(result["duration_ms"], int) and result["duration_ms"] >= 0


@pytest.mark.parametrize("side", ["human", "tester"])
def test_single_thread_read_sums_its_replies_tokens_and_the_list_does_not(
    sides: dict[str, tuple[ListenerClient, int]], actors: dict[str, Actor], side: str
) -> None:
    client, thread_id = sides[side]
    actor = actors[side]
    empty = ok(client, f"/api/chat/threads/{thread_id}")["thread"]
    assert empty["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    answered(actor, thread_id, "one", record(12, 3))
    answered(actor, thread_id, "two", record(20, 5))
    answered(actor, thread_id, "three", None)
    thread = ok(client, f"/api/chat/threads/{thread_id}")["thread"]
    assert thread["usage"] == {"prompt_tokens": 32, "completion_tokens": 8, "total_tokens": 40}
    assert (thread["id"], thread["name"], thread["unread"]) == (thread_id, empty["name"], 3)
    listed = ok(client, "/api/chat/threads")["threads"]
    assert listed and all("usage" not in row for row in listed)
    assert set(thread) - {"usage"} == set(listed[0])


def test_another_threads_tokens_are_not_counted(
    human_client: ListenerClient, human_thread_id: int, human: Actor, project_id: int
) -> None:
    other = human_client.post("/api/chat/threads", {"project": project_id, "name": "other"})
    answered(human, other.json()["thread"]["id"], "elsewhere", record(100, 100))
    answered(human, human_thread_id, "here", record(1, 2))
    usage = ok(human_client, f"/api/chat/threads/{human_thread_id}")["thread"]["usage"]
    assert usage["total_tokens"] == 3


@pytest.mark.parametrize(("side", "other"), [("tester", "human"), ("human", "tester")])
def test_single_thread_read_of_the_other_sides_thread_is_refused(
    sides: dict[str, tuple[ListenerClient, int]], side: str, other: str
) -> None:
    client, _ = sides[side]
    _, their_thread = sides[other]
    response = client.get(f"/api/chat/threads/{their_thread}")
    assert (response.status_code, response.json()["error"]) == (403, "thread-not-owned")
    missing = client.get("/api/chat/threads/999999")
    assert (missing.status_code, missing.json()["error"]) == (404, "not-found")


def test_single_thread_read_costs_the_same_with_many_replies(
    human_client: ListenerClient, human_thread_id: int, human: Actor
) -> None:
    """The total is one aggregate query, never a query per reply."""
    path = f"/api/chat/threads/{human_thread_id}"
    answered(human, human_thread_id, "first", record(1, 1))
    with CaptureQueriesContext(connection) as few:
        ok(human_client, path)
    for n in range(10):
        answered(human, human_thread_id, f"more {n}", record(1, 1))
    with CaptureQueriesContext(connection) as many:
        assert ok(human_client, path)["thread"]["usage"]["total_tokens"] == 22
    assert len(many.captured_queries) == len(few.captured_queries)
    sums = [q["sql"] for q in many.captured_queries if "SUM(" in q["sql"].upper()]
    assert len(sums) == 1, sums
