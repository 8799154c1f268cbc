"""The suites' Python client's R24 verbs (`edit`, `regenerate`, `branch`), against the tester
listener's own views, in process."""

from __future__ import annotations

from typing import Any

import pytest

from broker.actors import Actor
from broker.models import Message
from tester.suites.client import ListenerError, TesterClient
from tests.broker import factories
from tests.support.listeners import ListenerClient


class InProcessClient(TesterClient):
    """The client, its requests answered by the tester listener in process."""

    def __init__(self, listener: ListenerClient) -> None:
        super().__init__("http://127.0.0.1:7333")
        self.listener = listener

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, **headers: str
    ) -> tuple[int, dict[str, Any]]:
        answer = self.listener.request(method, path, json=body, headers=headers)
        if answer.status_code >= 400:
            raise ListenerError(answer.json()["error"], answer.json()["detail"])
        return answer.status_code, answer.json()


@pytest.fixture
def client(tester_client: ListenerClient) -> InProcessClient:
    return InProcessClient(tester_client)


def test_client_edits_regenerates_and_branches_the_testers_thread(
    client: InProcessClient, assistant_run: Actor, tester_thread_id: int
) -> None:
    sent = client.send(tester_thread_id, "one")
    factories.reply(assistant_run, Message.objects.get(pk=sent["id"]))
    edited = client.edit(tester_thread_id, sent["id"], "uno")
    assert (edited["message"]["version_of"], edited["thread"]["id"]) == (
        sent["id"],
        tester_thread_id,
    )
    factories.reply(assistant_run, Message.objects.get(pk=edited["message"]["id"]))
    branch = client.branch(tester_thread_id, edited["message"]["id"], name="side")
    assert (branch["name"], branch["branched_from"]["message"]) == ("side", edited["message"]["id"])
    again = client.regenerate(tester_thread_id, edited["message"]["id"])
    assert (again["message"]["body"], again["request"]) == ("uno", None)
    with pytest.raises(ListenerError) as refusal:
        client.edit(tester_thread_id, again["message"]["id"], "too soon")
    assert refusal.value.code == "turn-in-progress"
