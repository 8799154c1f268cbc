"""The inbox: rename, archive, the read mark, what the thread list computes, and
the trail's kinds and channels."""

from __future__ import annotations

import pytest
from django.db import connection

from broker import actions, fields, refusals, selectors
from broker.actors import Actor
from broker.models import Project, Thread, TrailKind, TrailRow, Via
from broker.refusals import Refusal
from tests.broker import factories

# Some tests pick their personas by name (`getfixturevalue`): the database is asked for up front,
# as pytest-django must know before the test starts.
pytestmark = pytest.mark.django_db


@pytest.fixture
def product(human: Actor) -> Project:
    return factories.project(human)


@pytest.fixture
def mine(human: Actor, product: Project) -> Thread:
    return factories.thread(human, product, "mine")


@pytest.fixture
def probe(tester: Actor, product: Project) -> Thread:
    return factories.thread(tester, product, "probe")


reply = factories.reply


def listed(actor: Actor, **kwargs: object) -> dict[str, Thread]:
    return {thread.name: thread for thread in selectors.list_threads(actor, **kwargs)}  # type: ignore[arg-type]


# --- rename ------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["human", "tester"])
def test_rename_own_thread_writes_one_renamed_trail_row(
    request: pytest.FixtureRequest, who: str
) -> None:
    """Each side renames its own thread; the row names the new name, is labelled like the
    side's turns (R16), and the tester sees it only for its own thread (R20)."""
    actor: Actor = request.getfixturevalue("human" if who == "human" else "tester")
    thread: Thread = request.getfixturevalue("mine" if who == "human" else "probe")
    renamed = actions.rename_thread(actor, thread_id=thread.pk, name="renamed")
    assert Thread.objects.get(pk=thread.pk).name == renamed.name == "renamed"
    row = TrailRow.objects.get()
    assert (row.kind, row.thread_id, row.thread_name, row.from_role, row.to_role) == (
        TrailKind.THREAD_RENAMED,
        thread.pk,
        "renamed",
        actor.role,
        "assistant",
    )
    assert row.text.startswith(f"{actor.role} to assistant: renamed ")
    assert row.tester_visible is (who == "tester")


def test_rename_to_a_name_the_other_side_took_refuses_thread_exists(
    tester: Actor, mine: Thread, probe: Thread
) -> None:
    """R18 as for create: unique per project whoever owns the other thread; nothing changes."""
    with pytest.raises(Refusal) as refusal:
        actions.rename_thread(tester, thread_id=probe.pk, name="mine")
    assert refusal.value.code == refusals.THREAD_EXISTS
    assert Thread.objects.get(pk=probe.pk).name == "probe"
    assert not TrailRow.objects.exists()


@pytest.mark.parametrize("name", ["", "   ", "x" * 201, "a\nb", "a\u202eb", 5, None])
def test_rename_with_a_name_create_would_refuse_is_invalid(
    human: Actor, mine: Thread, name: object
) -> None:
    with pytest.raises(Refusal) as refusal:
        actions.rename_thread(human, thread_id=mine.pk, name=name)
    assert refusal.value.code == refusals.INVALID
    assert Thread.objects.get(pk=mine.pk).name == "mine"


def test_rename_to_the_same_name_writes_nothing(human: Actor, mine: Thread) -> None:
    actions.rename_thread(human, thread_id=mine.pk, name="mine")
    assert not TrailRow.objects.exists()


# --- archive -----------------------------------------------------------------------------


def test_archive_leaves_the_thread_out_of_the_list_until_unarchived(
    human: Actor, mine: Thread, product: Project
) -> None:
    """Archived threads are listed only when asked for, and then alone; each change one row."""
    factories.thread(human, product, "other")
    actions.archive_thread(human, thread_id=mine.pk, archived=True)
    assert (list(listed(human)), list(listed(human, archived=True))) == (["other"], ["mine"])
    assert listed(human, archived=True)["mine"].archived is True
    actions.archive_thread(human, thread_id=mine.pk, archived=False)
    assert (list(listed(human)), list(listed(human, archived=True))) == (["mine", "other"], [])
    assert list(TrailRow.objects.values_list("kind", "thread_name")) == [
        (TrailKind.THREAD_ARCHIVED, "mine"),
        (TrailKind.THREAD_UNARCHIVED, "mine"),
    ]


def test_archive_an_archived_thread_writes_nothing(tester: Actor, probe: Thread) -> None:
    actions.archive_thread(tester, thread_id=probe.pk, archived=True)
    actions.archive_thread(tester, thread_id=probe.pk, archived=True)
    actions.archive_thread(tester, thread_id=probe.pk, archived=False)
    actions.archive_thread(tester, thread_id=probe.pk, archived=False)
    assert list(TrailRow.objects.values_list("kind", flat=True)) == [
        TrailKind.THREAD_ARCHIVED,
        TrailKind.THREAD_UNARCHIVED,
    ]


def test_change_thread_without_a_change_is_invalid(human: Actor, mine: Thread) -> None:
    with pytest.raises(Refusal) as refusal:
        actions.change_thread(human, thread_id=mine.pk)
    assert refusal.value.code == refusals.INVALID


def test_change_thread_refused_rename_archives_nothing(
    human: Actor, mine: Thread, probe: Thread
) -> None:
    """Both changes or neither: a refused name leaves the archive state and the trail alone."""
    with pytest.raises(Refusal):
        actions.change_thread(human, thread_id=mine.pk, name="probe", archived=True)
    assert Thread.objects.get(pk=mine.pk).archived_at is None
    assert not TrailRow.objects.exists()


# --- the read mark and unread counts -----------------------------------------------------


def test_unread_counts_what_the_other_end_sent_after_the_mark_per_side(
    human: Actor, tester: Actor, assistant_run: Actor, mine: Thread, probe: Thread
) -> None:
    """Each side's count is of its own thread, of messages its side did not send, after its
    own mark; one side's reading never moves the other's."""
    first = actions.send_to_thread(human, thread_id=mine.pk, body="one").message
    answer = reply(assistant_run, first)
    actions.send_to_thread(human, thread_id=mine.pk, body="two")
    probe_turn = actions.send_to_thread(tester, thread_id=probe.pk, body="probe").message
    reply(assistant_run, probe_turn)
    actions.post_notice(Actor.system(business_id=human.business_id), body="note")
    assert (listed(human)["mine"].unread, listed(tester)["probe"].unread) == (2, 1)
    marked = actions.mark_read(human, thread_id=mine.pk, up_to=answer.pk)
    assert (marked.unread, marked.read_up_to) == (1, answer.pk)
    assert (listed(human)["mine"].unread, listed(tester)["probe"].unread) == (1, 1)


def unread_plan(owner: str) -> str:
    """How the database answers the thread list's unread count (its query plan, as text)."""
    threads = selectors.with_inbox(Thread.objects.filter(owner=owner))
    sql, params = threads.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Empty tables: a sequential scan would win whatever indexes there are.
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " ".join(str(row) for row in cursor.fetchall())


@pytest.mark.parametrize("owner", ["ada", "tester"])
def test_unread_count_reads_only_the_messages_no_person_wrote(
    human: Actor, owner: str, mine: Thread, probe: Thread
) -> None:
    """P4: the count is answered by the partial index of replies and notices, so a thread of
    ten thousand turns of its owner costs the list no more than a quiet one. A query that says
    "not the owner's side" with parameters would read every message after the mark."""
    assert "message_unread" in unread_plan(owner)


def test_mark_read_moves_only_forward_and_writes_no_trail_row(human: Actor, mine: Thread) -> None:
    turns = [actions.send_to_thread(human, thread_id=mine.pk, body=b).message for b in "ab"]
    rows = TrailRow.objects.count()
    actions.mark_read(human, thread_id=mine.pk, up_to=turns[1].pk)
    assert actions.mark_read(human, thread_id=mine.pk, up_to=turns[0].pk).read_up_to == turns[1].pk
    assert TrailRow.objects.count() == rows


def test_mark_read_up_to_a_message_of_another_thread_is_invalid(
    human: Actor, tester: Actor, mine: Thread, probe: Thread
) -> None:
    """`up_to` names a message of that thread: the tester's own message id, sent to the
    human's thread, is no way to learn anything of it."""
    theirs = actions.send_to_thread(tester, thread_id=probe.pk, body="probe").message
    with pytest.raises(Refusal) as refusal:
        actions.mark_read(human, thread_id=mine.pk, up_to=theirs.pk)
    assert refusal.value.code == refusals.INVALID
    assert Thread.objects.get(pk=mine.pk).read_up_to is None


@pytest.mark.parametrize(("actor_name", "thread_name"), [("human", "probe"), ("tester", "mine")])
def test_mark_read_of_the_other_sides_thread_refuses_thread_not_owned(
    request: pytest.FixtureRequest, actor_name: str, thread_name: str
) -> None:
    """R1 through the one owner check, for the read mark as for every thread verb."""
    actor: Actor = request.getfixturevalue(actor_name)
    thread: Thread = request.getfixturevalue(thread_name)
    owner = request.getfixturevalue("tester" if actor_name == "human" else "human")
    turn = actions.send_to_thread(owner, thread_id=thread.pk, body="hi").message
    with pytest.raises(Refusal) as refusal:
        actions.mark_read(actor, thread_id=thread.pk, up_to=turn.pk)
    assert refusal.value.code == refusals.THREAD_NOT_OWNED
    assert Thread.objects.get(pk=thread.pk).read_up_to is None


# --- last activity and preview -----------------------------------------------------------


def test_list_shows_the_newest_messages_time_and_one_line_preview(
    human: Actor, mine: Thread, product: Project
) -> None:
    empty = factories.thread(human, product, "empty")
    actions.send_to_thread(human, thread_id=mine.pk, body="first")
    newest = actions.send_to_thread(human, thread_id=mine.pk, body="  line one\n\n\tline two  ")
    threads = listed(human)
    assert (threads["mine"].last_message_at, threads["mine"].preview) == (
        newest.message.created_at,
        "line one line two",
    )
    assert (threads["empty"].last_message_at, threads["empty"].preview) == (None, None)
    assert (threads["empty"].unread, empty.unread, empty.preview) == (0, 0, None)


def test_list_preview_of_a_long_body_is_cut_with_an_ellipsis(human: Actor, mine: Thread) -> None:
    actions.send_to_thread(human, thread_id=mine.pk, body="word " * 5000)
    preview = listed(human)["mine"].preview
    assert preview is not None
    assert (preview[-1], len(preview) <= fields.PREVIEW_MAX + 1) == ("…", True)
    assert preview.startswith("word word")


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("short", "short"),
        (" a \n b\t", "a b"),
        ("x" * 120, "x" * 120),
        ("x" * 121, "x" * 120 + "…"),
        ("y" * 10 + " " * 3000 + "tail", "y" * 10 + "…"),
    ],
)
def test_one_line_collapses_whitespace_and_cuts(text: str, line: str) -> None:
    assert fields.one_line(text) == line


# --- the trail's kinds and channels ------------------------------------------------------


def test_trail_rows_say_their_kind_on_data(
    human: Actor, assistant_run: Actor, mine: Thread
) -> None:
    """Consoles decide on `kind`, never on the text: turns, replies, a claim's end, a stop,
    an instance's end."""
    turn = actions.send_to_thread(human, thread_id=mine.pk, body="hi").message
    reply(assistant_run, turn)
    actions.send_to_thread(human, thread_id=mine.pk, body="again")
    factories.claim(assistant_run, mine)
    actions.stop_assistant(human, thread_id=mine.pk)
    actions.end_instance(
        Actor.staff(business_id=human.business_id, username="root"), instance="assistant"
    )
    assert list(TrailRow.objects.order_by("pk").values_list("kind", "thread_name")) == [
        (TrailKind.MESSAGE, "mine"),
        (TrailKind.MESSAGE, "mine"),
        (TrailKind.CLAIM_ENDED, "mine"),
        (TrailKind.MESSAGE, "mine"),
        (TrailKind.CLAIM_ENDED, "mine"),
        (TrailKind.INSTANCE_ENDED, None),
    ]


@pytest.mark.parametrize("via", [Via.CONSOLE, Via.API, Via.CLI])
def test_send_records_its_channel_and_keeps_the_stored_sender(
    human: Actor, mine: Thread, via: Via
) -> None:
    """R6 holds whatever the channel: `human-cli`; the channel is kept beside it."""
    turn = actions.send_to_thread(human, thread_id=mine.pk, body="hi", via=via).message
    row = TrailRow.objects.get(message=turn)
    assert (turn.from_run, turn.via, row.via) == ("human-cli", via, via)


def test_reply_has_no_channel(human: Actor, assistant_run: Actor, mine: Thread) -> None:
    turn = actions.send_to_thread(human, thread_id=mine.pk, body="hi").message
    answer = reply(assistant_run, turn)
    assert (answer.via, TrailRow.objects.get(message=answer).via) == (None, None)


def test_trail_row_keeps_the_name_its_thread_had_then(human: Actor, mine: Thread) -> None:
    actions.send_to_thread(human, thread_id=mine.pk, body="before")
    actions.rename_thread(human, thread_id=mine.pk, name="after")
    actions.send_to_thread(human, thread_id=mine.pk, body="later")
    assert list(TrailRow.objects.order_by("pk").values_list("thread_name", flat=True)) == [
        "mine",
        "after",
        "after",
    ]
