"""Search everywhere (`messages.search`): every project of the actor's own threads (R3), their
messages only (R1, R20), archived threads marked, paged newest first (SPEC §6)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from broker import actions, fields, policy, refusals, selectors
from broker.actors import Actor
from broker.models import Business
from broker.refusals import Refusal
from tests.broker import factories
from tests.support.marks import postgres_only


def code_of(call) -> str:
    with pytest.raises(Refusal) as refusal:
        call()
    return refusal.value.code


def send(actor: Actor, thread_id: int, body: str) -> int:
    return actions.send_to_thread(actor, thread_id=thread_id, body=body).message.pk


def hit_ids(actor: Actor, query: str, **kwargs) -> list[int]:
    return [hit.id for hit in selectors.search(actor, query=query, **kwargs).messages]


def test_search_covers_every_project_newest_first_with_where_each_hit_is(human: Actor) -> None:
    """One search reaches the actor's threads in every project, each hit naming its thread and
    project, and a reply found as well as a turn."""
    first = factories.thread(human, factories.project(human, "alpha"), "plans")
    second = factories.thread(human, factories.project(human, "beta"), "notes")
    older = send(human, first.pk, "the Orchid launch is on Monday")
    send(human, first.pk, "nothing to see")
    newer = send(human, second.pk, "orchid numbers")

    hits = selectors.search(human, query="ORCHID").messages

    assert [hit.id for hit in hits] == [newer, older]
    assert [(hit.thread, hit.thread_name, hit.project_name) for hit in hits] == [
        (second.pk, "notes", "beta"),
        (first.pk, "plans", "alpha"),
    ]
    assert hits[0].project == second.project_id
    assert hits[1].from_role == "human"
    assert hits[1].snippet == "the Orchid launch is on Monday"
    assert not hits[0].archived


def test_search_finds_the_assistants_reply_in_the_owners_thread(
    human: Actor, assistant_run: Actor
) -> None:
    """R1: the owner reads every message of its thread, replies included."""
    thread = factories.thread(human, factories.project(human), "plans")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="question").message
    answer = factories.reply(assistant_run, turn, body="the answer is marigold")
    hits = selectors.search(human, query="marigold").messages
    assert [(hit.id, hit.from_role) for hit in hits] == [(answer.pk, "assistant")]


def test_search_never_crosses_owners_either_way(human: Actor, tester: Actor) -> None:
    """R3, R20: the human never finds a tester thread or its messages, the tester never the
    human's, even in a project both list."""
    shared = factories.project(human, "shared")
    mine = factories.thread(human, shared, "tulip human")
    theirs = factories.thread(tester, shared, "tulip tester")
    human_message = send(human, mine.pk, "tulip from the human")
    tester_message = send(tester, theirs.pk, "tulip from the tester")

    human_hits = selectors.search(human, query="tulip")
    tester_hits = selectors.search(tester, query="tulip")

    assert [hit.id for hit in human_hits.messages] == [human_message]
    assert [thread.pk for thread in human_hits.threads] == [mine.pk]
    assert [hit.id for hit in tester_hits.messages] == [tester_message]
    assert [thread.pk for thread in tester_hits.threads] == [theirs.pk]


def test_search_never_crosses_businesses(human: Actor, other_human: Actor) -> None:
    thread = factories.thread(other_human, factories.project(other_human), "violet")
    send(other_human, thread.pk, "violet elsewhere")
    hits = selectors.search(human, query="violet")
    assert (hits.threads, hits.messages) == ([], [])


def test_search_includes_archived_threads_marked(human: Actor) -> None:
    thread = factories.thread(human, factories.project(human), "lilac")
    message = send(human, thread.pk, "lilac kept")
    actions.archive_thread(human, thread_id=thread.pk, archived=True)
    hits = selectors.search(human, query="lilac")
    assert [(hit.id, hit.archived) for hit in hits.messages] == [(message, True)]
    assert [(found.pk, found.archived) for found in hits.threads] == [(thread.pk, True)]


def test_search_pages_messages_by_before_and_lists_threads_on_the_first_page(
    human: Actor,
) -> None:
    thread = factories.thread(human, factories.project(human), "daisy chain")
    ids = [send(human, thread.pk, f"daisy {i}") for i in range(5)]

    first = selectors.search(human, query="daisy", limit=2)
    second = selectors.search(human, query="daisy", limit=2, before=first.messages[-1].id)

    assert [hit.id for hit in first.messages] == ids[:-3:-1]
    assert [found.pk for found in first.threads] == [thread.pk]
    assert [hit.id for hit in second.messages] == [ids[2], ids[1]]
    assert second.threads == []
    assert hit_ids(human, "daisy", before=ids[0]) == []


def test_search_matches_text_literally(human: Actor) -> None:
    """`%` and `_` are letters of the term, not patterns."""
    thread = factories.thread(human, factories.project(human), "plans")
    literal = send(human, thread.pk, "up 5% today")
    send(human, thread.pk, "up 5 points today")
    assert hit_ids(human, "5%") == [literal]
    assert hit_ids(human, "_") == []


@pytest.mark.parametrize("query", ["", "   ", "x" * (fields.SEARCH_MAX + 1), None])
def test_search_without_a_term_of_1_to_200_characters_is_invalid(human: Actor, query) -> None:
    assert code_of(lambda: selectors.search(human, query=query)) == refusals.INVALID


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"limit": 501}, {"before": -1}])
def test_search_bad_cursor_or_limit_is_invalid(human: Actor, kwargs) -> None:
    assert code_of(lambda: selectors.search(human, query="a", **kwargs)) == refusals.INVALID


def test_search_is_a_tester_verb_refused_while_the_tester_is_off(business, tester) -> None:
    """R22: on the tester's list; the switch holds as for every tester verb."""
    assert "messages.search" in policy.TESTER_VERBS
    business.tester_enabled = False
    business.save()
    assert code_of(lambda: selectors.search(tester, query="a")) == refusals.TESTER_OFF


@pytest.mark.parametrize(
    ("body", "query", "expected"),
    [
        ("short text", "TEXT", "short text"),
        (
            "a" * 100 + " needle " + "b" * 200,
            "needle",
            "…" + "a" * 39 + " needle " + "b" * 113 + "…",
        ),
        ("line one\n\nline   two", "two", "line one line two"),
        ("Straße", "STRASSE", "Straße"),
    ],
)
def test_snippet_shows_the_text_around_the_first_match(body, query, expected) -> None:
    assert fields.snippet(body, query) == expected


@postgres_only
def test_search_of_a_rare_term_reads_the_trigram_index_on_postgresql(
    business: Business, human: Actor, tester: Actor
) -> None:
    """P4: among 50,000 messages in 500 threads of both owners, a term found once is looked up
    in `message_body_search` and its thread matched among the owner's by id; no walk of every
    owned thread's messages."""
    projects = [factories.project(human, f"p{i}") for i in range(5)]
    threads = [
        factories.thread(tester if i % 5 == 0 else human, projects[i % 5], f"t{i}")
        for i in range(500)
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO broker_message (business_id, thread_id, from_role, from_run, to_role,"
            " class, body, holder, created_at)"
            " SELECT %s, (%s::bigint[])[1 + (g %% 500)], 'human', 'human-cli', 'assistant',"
            " 'REQUEST', 'turn ' || md5(g::text) || ' of a plan', '', now()"
            " FROM generate_series(1, 50000) g",
            [business.pk, [thread.pk for thread in threads]],
        )
        cursor.execute("ANALYZE broker_message, broker_thread, broker_project")
        cursor.execute("SELECT md5('4321')")
        (term,) = cursor.fetchone()
    with CaptureQueriesContext(connection) as captured:
        # `before`: the messages alone (the first page also reads thread names).
        hits = selectors.search(human, query=term.upper()[:12], before=10**9)
    assert len(hits.messages) == 1
    (search,) = [query["sql"] for query in captured if "LIKE" in query["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + search)
        plan = " ".join(row[0] for row in cursor.fetchall())
    assert "message_body_search" in plan
