"""P4: the Console's reads make as many queries with hundreds of rows as with ten.

Timings are measured by `make bench` (docs/benchmarks.md); the machine is shared, so the suite
pins what does not vary: the number of queries. Each read is counted at a small size, the data
then grows well past one page, and the count must not move — an N+1 (a lost `select_related`,
a per-row lookup in a serializer) adds one query per row of the page and fails here.

Both listeners are counted through their whole stack (sign-in, gates, the broker, the shapes),
and the broker's selectors on their own.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from broker import actions, selectors
from broker.actors import Actor
from broker.models import Instance, Message, MessageClass, Project, Thread, ThreadClaim, TrailRow
from tests.broker import factories
from tests.support.listeners import ListenerClient

FEW = 10
MANY = 300


def count_queries(read: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as captured:
        read()
    return len(captured.captured_queries)


def owner_of(actor: Actor) -> str:
    return "tester" if actor.is_tester else "ada"


def grow_threads(actor: Actor, project: Project, count: int) -> Thread:
    """`count` more of the actor's threads in `project`, one message each; the last thread."""
    instance = Instance.objects.get(business_id=actor.business_id, name="assistant")
    start = Thread.objects.filter(project=project).count()
    threads = Thread.objects.bulk_create(
        Thread(
            project=project,
            name=f"grown {start + i}",
            owner=owner_of(actor),
            instance=instance,
            active_at=timezone.now(),
        )
        for i in range(count)
    )
    grow_messages(actor, threads, per_thread=1)
    return threads[-1]


def grow_messages(actor: Actor, threads: list[Thread], *, per_thread: int) -> None:
    """Turns from the actor into each thread, with their trail rows, inserted in bulk."""
    role = "tester" if actor.is_tester else "human"
    messages = Message.objects.bulk_create(
        Message(
            business_id=actor.business_id,
            thread=thread,
            from_role=role,
            from_run=f"{role}-cli",
            to_role="assistant",
            message_class=MessageClass.REQUEST,
            body=f"turn {i}",
        )
        for thread in threads
        for i in range(per_thread)
    )
    TrailRow.objects.bulk_create(
        TrailRow(
            business_id=actor.business_id,
            thread_id=message.thread_id,
            message=message,
            from_role=role,
            from_run=f"{role}-cli",
            to_role="assistant",
            actor_role=role,
            actor_run=f"{role}-cli",
            text=f"{role} to assistant: {message.body}",
            tester_visible=actor.is_tester,
        )
        for message in messages
    )


@pytest.fixture
def seeded(human: Actor, tester: Actor) -> dict[str, object]:
    """FEW threads of each side, each with a turn sent through the broker (trail rows too)."""
    project = factories.project(human)
    threads = {}
    for actor in (human, tester):
        for i in range(FEW):
            thread = factories.thread(actor, project, f"{owner_of(actor)} {i}")
            actions.send_to_thread(actor, thread_id=thread.pk, body=f"hello {i}")
        threads[owner_of(actor)] = thread
    return {"project": project, "threads": threads}


def clients(human_client: ListenerClient, tester_client: ListenerClient, human, tester):
    return {"human": (human_client, human), "tester": (tester_client, tester)}


@pytest.fixture(params=["human", "tester"])
def side(request, human_client, tester_client, human, tester) -> tuple[ListenerClient, Actor]:
    """Each listener with the actor it acts as."""
    return clients(human_client, tester_client, human, tester)[request.param]


def get_ok(client: ListenerClient, path: str) -> dict[str, object]:
    response = client.get(path)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_list_threads_hundreds_of_threads_same_query_count(side, seeded) -> None:
    """P4: the thread list (one page of 100) costs the same with 10 threads as with 310."""
    client, actor = side
    project = seeded["project"]
    path = f"/api/chat/threads?project={project.pk}"
    few = count_queries(lambda: get_ok(client, path))
    grow_threads(actor, project, MANY)
    many = count_queries(lambda: get_ok(client, path))
    assert len(get_ok(client, path)["threads"]) == 100
    assert many == few


def test_list_threads_by_activity_same_query_count(side, seeded) -> None:
    """P4 in the inbox's order: pinned threads, then the others, each read from its index;
    the first page costs the same with 10 threads as with 310, and so does a page below the
    last thread shown."""
    client, actor = side
    project = seeded["project"]
    path = f"/api/chat/threads?project={project.pk}&order=activity"
    pinned = Thread.objects.filter(project=project, owner=owner_of(actor)).order_by("pk")[0].pk
    actions.pin_thread(actor, thread_id=pinned, pinned=True)

    def counted() -> tuple[int, int]:
        last = get_ok(client, path)["threads"][-1]["id"]
        return count_queries(lambda: get_ok(client, path)), count_queries(
            lambda: get_ok(client, f"{path}&below={last}")
        )

    few = counted()
    grow_threads(actor, project, MANY)
    many = counted()
    listed = get_ok(client, path)["threads"]
    assert len(listed) == 100
    assert listed[0]["id"] == pinned
    assert many == few


@pytest.mark.parametrize("archived", ["false", "true"])
def test_list_threads_inbox_fields_same_query_count(side, seeded, archived: str) -> None:
    """P4 with the inbox: last activity, preview and unread are read in the list's
    own query — long threads, replies, read marks and archived threads add no query."""
    client, actor = side
    project = seeded["project"]
    path = f"/api/chat/threads?project={project.pk}&archived={archived}"
    few = count_queries(lambda: get_ok(client, path))
    grow_threads(actor, project, MANY)
    threads = list(Thread.objects.filter(project=project, owner=owner_of(actor)))
    grow_messages(actor, threads[:50], per_thread=20)
    newest = Message.objects.filter(thread__in=threads).order_by("-pk").first()
    assert newest is not None
    Thread.objects.filter(pk__in=[t.pk for t in threads[::3]]).update(read_up_to=newest.pk)
    Thread.objects.filter(pk__in=[t.pk for t in threads[::2]]).update(archived_at=newest.created_at)
    many = count_queries(lambda: get_ok(client, path))
    listed = get_ok(client, path)["threads"]
    assert len(listed) == 100
    assert {thread["archived"] for thread in listed} == {archived == "true"}
    assert many == few


def test_read_message_page_long_thread_same_query_count(side, seeded) -> None:
    """P4: a thread's message page costs the same with 1 message as with a full page."""
    client, actor = side
    thread = seeded["threads"][owner_of(actor)]
    path = f"/api/chat/threads/{thread.pk}/messages"
    few = count_queries(lambda: get_ok(client, path))
    grow_messages(actor, [thread], per_thread=MANY)
    many = count_queries(lambda: get_ok(client, path))
    assert len(get_ok(client, path)["messages"]) == 100
    assert many == few


def test_read_trail_page_hundreds_of_rows_same_query_count(side, seeded) -> None:
    """P4: the trail page costs the same with 10 rows in view as with hundreds."""
    client, actor = side
    few = count_queries(lambda: get_ok(client, "/api/trail"))
    grow_threads(actor, seeded["project"], MANY)
    many = count_queries(lambda: get_ok(client, "/api/trail"))
    assert len(get_ok(client, "/api/trail")["rows"]) == 100
    assert many == few


def test_list_projects_hundreds_of_projects_same_query_count(side, seeded) -> None:
    """P4: the project list costs the same with one project as with hundreds."""
    client, actor = side
    few = count_queries(lambda: get_ok(client, "/api/chat/projects"))
    Project.objects.bulk_create(
        Project(business_id=actor.business_id, name=f"grown {i}", created_by=owner_of(actor))
        for i in range(MANY)
    )
    many = count_queries(lambda: get_ok(client, "/api/chat/projects"))
    assert len(get_ok(client, "/api/chat/projects")["projects"]) == 100
    assert many == few


@pytest.mark.parametrize("who", ["human", "tester"])
def test_select_pages_hundreds_of_rows_same_query_count(who, human, tester, seeded) -> None:
    """P4, below the listeners: each selector's page is a fixed number of queries."""
    actor = human if who == "human" else tester
    project = seeded["project"]
    thread = seeded["threads"][owner_of(actor)]
    reads = {
        "thread.list": lambda: selectors.list_threads(actor, project_id=project.pk),
        "thread.list archived": lambda: selectors.list_threads(
            actor, project_id=project.pk, archived=True
        ),
        "thread.messages": lambda: selectors.thread_messages(actor, thread_id=thread.pk),
        "trail.read": lambda: selectors.read_trail(actor),
        "project.list": lambda: selectors.list_projects(actor),
        "messages.search": lambda: selectors.search(actor, query="turn"),
    }
    few = {name: count_queries(read) for name, read in reads.items()}
    grow_threads(actor, project, MANY)
    grow_messages(actor, [thread], per_thread=MANY)
    many = {name: count_queries(read) for name, read in reads.items()}
    assert len(selectors.list_threads(actor, project_id=project.pk)) == 100
    assert many == few


# --- the send path (issue: a send costs no more than a plain Channels app's) ---------------

TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")


def statements_of(write: Callable[[], object]) -> list[str]:
    """The statements `write` sends, transaction control left out."""
    with CaptureQueriesContext(connection) as captured:
        write()
    return [
        query["sql"]
        for query in captured.captured_queries
        if not query["sql"].lstrip().upper().startswith(TRANSACTION_CONTROL)
    ]


# The thread read, the message, its trail row, the thread's last activity (the inbox's order,
# stored so the list reads it from an index); a human's turn adds its `human.input` event. On
# PostgreSQL the business's stream lock (rows commit in id order) rides in the thread read, and
# the message, its trail row and the thread's activity are one statement
# (`broker.actions.streams.do_store_message`).
SEND_STATEMENTS = {
    "tester": {"sqlite": 4, "postgresql": 2},
    "human": {"sqlite": 5, "postgresql": 3},
}


@pytest.mark.parametrize("who", ["human", "tester"])
def test_send_to_thread_statement_count_is_pinned(who, human, tester, seeded) -> None:
    """A turn is one read, its inserts and the thread's last activity: no tester-switch read,
    no role list read, no claim read, no read after a write (R6, R7 hold as before)."""
    actor = human if who == "human" else tester
    thread = seeded["threads"][owner_of(actor)]
    sent = statements_of(lambda: actions.send_to_thread(actor, thread_id=thread.pk, body="hi"))
    assert len(sent) == SEND_STATEMENTS[who][connection.vendor], "\n".join(sent)


@pytest.mark.parametrize("who", ["human", "tester"])
def test_a_trail_read_with_rows_is_one_query(who, human, tester, seeded) -> None:
    """A Console reads the trail after every row: one query for either side, the tester's
    switch read inside it (`read_trail`)."""
    actor = human if who == "human" else tester
    assert len(statements_of(lambda: selectors.read_trail(actor))) == 1


@pytest.mark.django_db(transaction=True)  # the verbs' own transactions, not savepoints in one
def test_a_runs_turn_statement_counts_are_pinned(tester: Actor, seeded) -> None:
    """A run's turn, the runner's hot path (P5): its first attempt reads the claim and the turn
    with its progress (none yet), inserts the progress row and reads it back; the reply takes
    no savepoint (a duplicate reply ends the whole transaction, refused: R12, SPEC §7.1). Each
    statement more is a round trip, the reply's under the business's stream lock, so the
    message it answers (append-only) is read before its transaction begins."""
    thread = seeded["threads"][owner_of(tester)]
    turn = actions.send_to_thread(tester, thread_id=thread.pk, body="answer me").message
    run = Actor.assistant_run(business_id=tester.business_id, instance=turn.to_role, run="run-1")
    opened = statements_of(lambda: actions.open_claim(run, thread_id=thread.pk))
    claim = ThreadClaim.objects.get(thread=thread, ended_at__isnull=True)

    started = statements_of(lambda: actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk))
    with CaptureQueriesContext(connection) as reply:
        actions.send_message(
            run,
            to=turn.from_role,
            message_class=MessageClass.RESULT,
            in_reply_to=turn.pk,
            claim_id=claim.pk,
            body="done",
        )

    # The thread read, locked with its instance; the open claims; the claim; its event; on
    # PostgreSQL the business's stream lock first.
    assert len(opened) == 4 + (connection.vendor == "postgresql"), "\n".join(opened)
    assert len(started) == 4, "\n".join(started)
    assert not [q for q in reply.captured_queries if "SAVEPOINT" in q["sql"].upper()]
    # The answered message is append-only: it is read before the reply's transaction begins,
    # one statement fewer under the stream lock.
    sent = [q["sql"] for q in reply.captured_queries]
    begins = next(i for i, sql in enumerate(sent) if sql.lstrip().upper().startswith("BEGIN"))
    assert [sql for sql in sent[:begins] if 'FROM "broker_message"' in sql], sent
    assert not [sql for sql in sent[begins:] if 'FROM "broker_message"' in sql], sent
