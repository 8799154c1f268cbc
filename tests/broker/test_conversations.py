"""A conversation sent whole, mapped onto the tester's threads (SPEC §6.1; R1, R2, R12, R22)."""

from __future__ import annotations

import pytest

from broker import actions, refusals, selectors
from broker.actions.conversations import ASSISTANT, USER, history_of
from broker.actors import Actor
from broker.models import Message, Project, Thread, Via
from broker.refusals import Refusal
from tests.broker import factories


def start(tester: Actor, body: str = "hello", *, name: str = "c1", project: str = "openai"):
    return actions.start_conversation(
        tester, project=project, instance="assistant", name=name, body=body, via=Via.API
    )


def go_on(tester: Actor, history: list[tuple[str, str]], body: str, **kwargs):
    return actions.continue_conversation(
        tester, instance="assistant", history=history, body=body, via=Via.API, **kwargs
    )


def answer(run: Actor, turn: Message, body: str) -> Message:
    """The assistant's reply to `turn`, as its run stores it (R12)."""
    return factories.reply(run, turn, body)


def test_first_turn_starts_a_tester_thread_in_the_named_project_made_when_missing(
    tester: Actor, human: Actor
) -> None:
    """R2: the thread is the tester's, in the project the request names, which the tester makes;
    a second conversation in it finds the project there."""
    first = start(tester, name="c1")
    second = start(tester, name="c2")
    assert first.message.thread.owner == "tester"
    assert first.message.from_role == "tester" and first.request is None
    assert Project.objects.get(name="openai").created_by == "tester"
    assert Project.objects.count() == 1
    assert second.message.thread_id != first.message.thread_id
    assert selectors.list_threads(human) == []


def test_a_refused_first_turn_leaves_no_thread_or_project(tester: Actor) -> None:
    """All or nothing: an empty body is refused, and nothing of the conversation stays."""
    with pytest.raises(Refusal) as refusal:
        start(tester, body="   ")
    assert refusal.value.code == refusals.INVALID
    assert not Thread.objects.exists() and not Project.objects.exists()


def test_a_later_turn_goes_on_in_the_thread_whose_history_it_sends(
    tester: Actor, assistant_run: Actor
) -> None:
    """The earlier messages are exactly the thread's turns and replies, in order."""
    first = start(tester, "hello")
    answer(assistant_run, first.message, "hi there")
    start(tester, "hello", name="other")  # the same first turn, not yet answered
    second = go_on(tester, [(USER, "hello"), (ASSISTANT, "hi there")], "and then?")
    assert second.message.thread_id == first.message.thread_id
    assert history_of(first.message.thread_id, role="tester") == [
        (USER, "hello"),
        (ASSISTANT, "hi there"),
        (USER, "and then?"),
    ]


@pytest.mark.parametrize(
    "history",
    [
        [(USER, "hello"), (ASSISTANT, "a reply the assistant never gave")],
        [(USER, "hello")],
        [(USER, "hello"), (ASSISTANT, "hi there"), (USER, "more"), (ASSISTANT, "more still")],
        [(ASSISTANT, "hi there")],
        [],
    ],
    ids=["forged-reply", "reply-left-out", "longer", "reply-first", "empty"],
)
def test_a_history_that_is_no_thread_of_the_testers_is_refused_and_stores_nothing(
    tester: Actor, assistant_run: Actor, history: list[tuple[str, str]]
) -> None:
    """R12: the tester may not write the assistant's part; a history no thread holds is
    `invalid`, and nothing is sent."""
    first = start(tester, "hello")
    answer(assistant_run, first.message, "hi there")
    before = Message.objects.count()
    with pytest.raises(Refusal) as refusal:
        go_on(tester, history, "next")
    assert refusal.value.code == refusals.INVALID
    assert "may not write the assistant's part" in refusal.value.detail
    assert Message.objects.count() == before


def test_the_humans_thread_with_the_same_history_is_never_continued(
    tester: Actor, human: Actor, assistant_run: Actor
) -> None:
    """R1: only the tester's threads are candidates; the human's, word for word the same, is
    not reached and not told of."""
    human_thread = factories.thread(human, factories.project(human), "mine")
    turn = actions.send_to_thread(human, thread_id=human_thread.pk, body="hello")
    answer(assistant_run, turn.message, "hi there")
    with pytest.raises(Refusal) as refusal:
        go_on(tester, [(USER, "hello"), (ASSISTANT, "hi there")], "next")
    assert refusal.value.code == refusals.INVALID
    assert Message.objects.filter(thread=human_thread).count() == 2


def test_two_continuations_of_one_history_land_in_two_threads(
    tester: Actor, assistant_run: Actor
) -> None:
    """A thread whose history grew no longer holds the history it had: the same conversation
    asked twice goes on once in each thread that holds it, then is refused."""
    threads = set()
    for name in ("c1", "c2"):
        turn = start(tester, "hello", name=name).message
        answer(assistant_run, turn, "hi there")
    history = [(USER, "hello"), (ASSISTANT, "hi there")]
    for _ in range(2):
        threads.add(go_on(tester, history, "next").message.thread_id)
    assert len(threads) == 2
    with pytest.raises(Refusal):
        go_on(tester, history, "next")


def test_the_most_recently_active_thread_is_continued_first(
    tester: Actor, assistant_run: Actor
) -> None:
    older = start(tester, "hello", name="older").message
    newer = start(tester, "hello", name="newer").message
    answer(assistant_run, newer, "hi there")
    answer(assistant_run, older, "hi there")
    continued = go_on(tester, [(USER, "hello"), (ASSISTANT, "hi there")], "next")
    assert continued.message.thread_id == older.thread_id


def test_a_turn_stopped_or_failed_is_not_in_the_history_a_turn_owed_is(
    tester: Actor, assistant_run: Actor
) -> None:
    """A turn that never got a reply gave the client nothing to send back; a turn still owed
    is in the history, so no second request can go on from before it."""
    first = start(tester, "hello").message
    answer(assistant_run, first, "hi there")
    history = [(USER, "hello"), (ASSISTANT, "hi there")]
    owed = go_on(tester, history, "second").message
    with pytest.raises(Refusal):
        go_on(tester, history, "second")
    actions.stop_assistant(tester, thread_id=first.thread_id)
    assert history_of(first.thread_id, role="tester") == history
    again = go_on(tester, history, "second")
    assert again.message.thread_id == owed.thread_id


def test_a_thread_named_outright_is_continued_whatever_its_history(
    tester: Actor, human: Actor
) -> None:
    """R1 still holds: the tester's own thread is continued; the human's is `thread-not-owned`;
    another instance's thread is `invalid`."""
    mine = start(tester, "hello").message
    turn = go_on(tester, [], "named", thread_id=mine.thread_id)
    assert turn.message.thread_id == mine.thread_id
    human_thread = factories.thread(human, factories.project(human), "mine")
    with pytest.raises(Refusal) as refusal:
        go_on(tester, [], "named", thread_id=human_thread.pk)
    assert refusal.value.code == refusals.THREAD_NOT_OWNED
    with pytest.raises(Refusal) as refusal:
        actions.continue_conversation(
            tester, instance="critic", history=[], body="x", via=Via.API, thread_id=mine.thread_id
        )
    assert refusal.value.code == refusals.INVALID


def test_the_human_may_call_neither_conversation_verb(human: Actor) -> None:
    """R22: the conversation verbs are the tester's alone; the human is told `not-found`."""
    with pytest.raises(Refusal) as refusal:
        start(human)
    assert refusal.value.code == refusals.NOT_FOUND
    with pytest.raises(Refusal) as refusal:
        go_on(human, [(USER, "a")], "b")
    assert refusal.value.code == refusals.NOT_FOUND


def test_instances_are_listed_to_both_sides_by_name(tester: Actor, human: Actor) -> None:
    names = [instance.name for instance in selectors.list_instances(tester)]
    assert names == sorted(names) and "assistant" in names
    assert [instance.name for instance in selectors.list_instances(human)] == names
