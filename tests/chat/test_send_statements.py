"""What one send costs the database: the round trips of POST …/messages, pinned on each backend.

A send is the product's hottest write (the benchmarks' P1), and on PostgreSQL each statement is a
round trip. The counts are pinned so that a change which adds one fails here and says which
statements a send now makes; a change that saves one updates the pin. Counted in a transactional
test, so the statements are those a server runs (no test savepoints), over the whole request:
the session's user, the thread and its access, the writes, the trail.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.support.listeners import ListenerClient

# Round trips per send, by database vendor, of the human's (no key): the session, its user and
# the user's business (L6); BEGIN; the thread read under its lock (on PostgreSQL the
# advisory lock rides on that read); the event; the message, the trail row and the thread's
# `active_at` (on PostgreSQL one statement, `broker.actions.streams.do_store_message`); COMMIT
# (on PostgreSQL in the store's round trip: the turn is the transaction's last write).
SEND_STATEMENTS = {"sqlite": 10, "postgresql": 7}
# As the Console sends, with an Idempotency-Key (R21): the key's row is inserted first and its
# answer written last, and each of the two steps runs in a savepoint of its own; the answer's
# write comes after the turn, so its COMMIT is one more round trip.
KEYED_SEND_STATEMENTS = {"sqlite": 16, "postgresql": 14}
# Of the tester's, as the benchmark sends: the tester's business (L5), BEGIN, the thread read
# under its lock, the message with its trail row and `active_at`, COMMIT (on PostgreSQL with
# them); no event (R7).
TESTER_SEND_STATEMENTS = {"sqlite": 7, "postgresql": 4}


def statements_of_a_send(client: ListenerClient, thread_id: int, **headers: str) -> list[str]:
    path = f"/api/chat/threads/{thread_id}/messages"
    # The thread's first turn is not the steady state: warm it with one.
    assert client.post(path, {"body": "first"}, headers=dict(headers)).status_code == 201
    keyed = {name: f"{value}-2" for name, value in headers.items()}
    with CaptureQueriesContext(connection) as sent:
        answer = client.post(path, {"body": "counted"}, headers=keyed)
    assert answer.status_code == 201, answer.text
    return round_trips([query["sql"] for query in sent.captured_queries])


def round_trips(statements: list[str]) -> list[str]:
    """The statements that went to the database each in a round trip of its own. Django logs
    its COMMIT even when the COMMIT rode on the statement before it and it found nothing left
    to do (`do_store_message`'s `last_write`): that one is no round trip."""
    trips: list[str] = []
    for sql in statements:
        if not (sql == "COMMIT" and trips and trips[-1].endswith("; COMMIT")):
            trips.append(sql)
    return trips


def listed(statements: list[str]) -> str:
    return "\n".join(f"{n}. {sql[:300]}" for n, sql in enumerate(statements, 1))


@pytest.mark.django_db(transaction=True)
def test_a_send_makes_the_pinned_number_of_statements(
    human_client: ListenerClient, human_thread_id: int
) -> None:
    statements = statements_of_a_send(human_client, human_thread_id)
    assert len(statements) == SEND_STATEMENTS[connection.vendor], listed(statements)


@pytest.mark.django_db(transaction=True)
def test_a_send_with_an_idempotency_key_makes_the_pinned_number_of_statements(
    human_client: ListenerClient, human_thread_id: int
) -> None:
    statements = statements_of_a_send(
        human_client, human_thread_id, **{"Idempotency-Key": "statements"}
    )
    assert len(statements) == KEYED_SEND_STATEMENTS[connection.vendor], listed(statements)


@pytest.mark.django_db(transaction=True)
def test_a_tester_send_makes_the_pinned_number_of_statements(
    tester_client: ListenerClient, tester_thread_id: int
) -> None:
    statements = statements_of_a_send(tester_client, tester_thread_id)
    assert len(statements) == TESTER_SEND_STATEMENTS[connection.vendor], listed(statements)
