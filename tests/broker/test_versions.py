"""R24: versions of an owner's turns, in place or in a branch, and branches (`thread.edit`,
`thread.regenerate`, `thread.branch`), and the path a conversation follows through them."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from broker import actions, paths, refusals, selectors
from broker.actors import Actor
from broker.models import (
    Business,
    Event,
    EventKind,
    Message,
    MessageClass,
    Thread,
    TrailKind,
    TrailRow,
)
from broker.refusals import Refusal
from tests.broker import factories


@pytest.fixture
def conversation(human: Actor) -> Thread:
    return factories.thread(human, factories.project(human), "plans")


def turn(actor: Actor, thread: Thread, body: str) -> Message:
    return actions.send_to_thread(actor, thread_id=thread.pk, body=body).message


def answered(actor: Actor, run: Actor, thread: Thread, body: str) -> tuple[Message, Message]:
    """A turn and the run's reply to it."""
    sent = turn(actor, thread, body)
    return sent, factories.reply(run, sent, body=f"re: {body}")


def path_bodies(thread: Thread) -> list[str]:
    """The thread's path, carried part first, as its bodies."""
    thread = Thread.objects.get(pk=thread.pk)
    return [
        message.body
        for segment in paths.segments(thread)
        for message in segment.rows().order_by(*paths.TRANSCRIPT_ORDER)
    ]


def results() -> int:
    return Message.objects.filter(message_class=MessageClass.RESULT).count()


def test_edit_of_the_latest_turn_is_a_new_version_in_place(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """The latest turn's group gets a new version in the same thread; the superseded turn and
    its reply leave the path, and nothing is deleted."""
    answered(human, assistant_run, conversation, "one")
    first, _ = answered(human, assistant_run, conversation, "two")
    before = Message.objects.count()
    edited = actions.edit_turn(
        human, thread_id=conversation.pk, message_id=first.pk, body="two, better"
    )
    assert edited.thread.pk == conversation.pk
    assert (edited.message.version_of_id, edited.message.body) == (first.pk, "two, better")
    assert Message.objects.count() == before + 1
    assert path_bodies(conversation) == ["one", "re: one", "two, better"]
    # A version of a version names the group's first version.
    factories.reply(assistant_run, edited.message)
    again = actions.edit_turn(
        human, thread_id=conversation.pk, message_id=edited.message.pk, body="two, best"
    )
    assert again.message.version_of_id == first.pk
    assert path_bodies(conversation) == ["one", "re: one", "two, best"]


def test_edit_of_an_earlier_turn_is_a_branch_carrying_what_came_before(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """An earlier turn's edit branches: the new thread carries the conversation before the
    turn by reference and holds the new text as its first turn; the source is unchanged."""
    one, reply_one = answered(human, assistant_run, conversation, "one")
    two, _ = answered(human, assistant_run, conversation, "two")
    answered(human, assistant_run, conversation, "three")
    edited = actions.edit_turn(human, thread_id=conversation.pk, message_id=two.pk, body="2")
    branch = edited.thread
    assert branch.pk != conversation.pk
    assert (branch.branched_from_id, branch.branched_at_id) == (conversation.pk, reply_one.pk)
    assert (branch.name, branch.owner, branch.project_id) == (
        "plans (branch)",
        conversation.owner,
        conversation.project_id,
    )
    assert edited.message.thread_id == branch.pk
    assert edited.message.version_of_id is None
    assert path_bodies(branch) == ["one", "re: one", "2"]
    assert path_bodies(conversation) == ["one", "re: one", "two", "re: two", "three", "re: three"]
    assert [m.pk for m in selectors.carried_messages(human, thread_id=branch.pk)] == [
        one.pk,
        reply_one.pk,
    ]
    # The first turn's edit carries nothing.
    first = actions.edit_turn(human, thread_id=conversation.pk, message_id=one.pk, body="1")
    assert (first.thread.branched_at_id, first.thread.name) == (None, "plans (branch 2)")
    assert selectors.carried_messages(human, thread_id=first.thread.pk) == []


def test_regenerate_names_the_turn_or_its_reply_and_repeats_its_text(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """R12: a regenerate stores a new turn, never a reply; a failed or stopped reply's turn is
    asked again the same way."""
    sent, reply = answered(human, assistant_run, conversation, "one")
    before = results()
    again = actions.regenerate_turn(human, thread_id=conversation.pk, message_id=reply.pk)
    assert (again.message.body, again.message.version_of_id) == ("one", sent.pk)
    assert again.message.message_class == MessageClass.REQUEST
    assert results() == before
    claim = factories.claim(assistant_run, conversation)
    actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=again.message.pk)
    actions.fail_turn(
        assistant_run, claim_id=claim.pk, turn_id=again.message.pk, failure="x", transient=False
    )
    third = actions.regenerate_turn(human, thread_id=conversation.pk, message_id=again.message.pk)
    assert third.message.version_of_id == sent.pk
    assert results() == before


def test_regenerate_on_another_instance_is_always_a_branch(
    business: Business, human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    factories.instance(business, "critic")
    _, reply = answered(human, assistant_run, conversation, "one")
    again = actions.regenerate_turn(
        human, thread_id=conversation.pk, message_id=reply.pk, instance="critic"
    )
    assert again.thread.instance.name == "critic"
    assert again.thread.branched_at_id is None
    assert again.message.to_role == "critic"
    with pytest.raises(Refusal) as refusal:
        actions.regenerate_turn(
            human, thread_id=conversation.pk, message_id=reply.pk, instance="nobody"
        )
    assert refusal.value.code == refusals.NOT_FOUND


def test_version_in_place_while_the_reply_is_owed_is_turn_in_progress(
    human: Actor, conversation: Thread
) -> None:
    sent = turn(human, conversation, "one")
    before = Message.objects.count()
    for call in (
        lambda: actions.edit_turn(human, thread_id=conversation.pk, message_id=sent.pk, body="x"),
        lambda: actions.regenerate_turn(human, thread_id=conversation.pk, message_id=sent.pk),
    ):
        with pytest.raises(Refusal) as refusal:
            call()
        assert refusal.value.code == refusals.TURN_IN_PROGRESS
    assert Message.objects.count() == before


def test_human_version_writes_one_human_input_and_the_testers_none(
    human: Actor, tester: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """R7 for a new version as for any turn; R22: the tester versions and branches its own."""
    sent, _ = answered(human, assistant_run, conversation, "one")
    inputs = Event.objects.filter(kind=EventKind.HUMAN_INPUT).count()
    edited = actions.edit_turn(human, thread_id=conversation.pk, message_id=sent.pk, body="x")
    assert Event.objects.filter(kind=EventKind.HUMAN_INPUT).count() == inputs + 1
    assert edited.request is not None
    probe = factories.thread(tester, factories.project(tester, "probes"), "probe")
    mine, _ = answered(tester, assistant_run, probe, "one")
    inputs = Event.objects.filter(kind=EventKind.HUMAN_INPUT).count()
    version = actions.edit_turn(tester, thread_id=probe.pk, message_id=mine.pk, body="y")
    branch = actions.branch_thread(tester, thread_id=probe.pk, message_id=version.message.pk)
    assert version.request is None
    assert (version.message.from_role, branch.owner) == ("tester", "tester")
    assert Event.objects.filter(kind=EventKind.HUMAN_INPUT).count() == inputs


def test_other_sides_and_other_businesses_threads_are_refused(
    human: Actor, tester: Actor, other_human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """R1: the other side's thread is `thread-not-owned`, another business's `not-found`; a
    message of another thread of one's own is `not-found` too."""
    sent, _ = answered(human, assistant_run, conversation, "one")
    for actor, code in ((tester, refusals.THREAD_NOT_OWNED), (other_human, refusals.NOT_FOUND)):
        with pytest.raises(Refusal) as refusal:
            actions.branch_thread(actor, thread_id=conversation.pk, message_id=sent.pk)
        assert refusal.value.code == code
    elsewhere = factories.thread(human, factories.project(human, "other"), "elsewhere")
    for call in (
        lambda: actions.edit_turn(human, thread_id=elsewhere.pk, message_id=sent.pk, body="x"),
        lambda: actions.branch_thread(human, thread_id=elsewhere.pk, message_id=sent.pk),
    ):
        with pytest.raises(Refusal) as refusal:
            call()
        assert refusal.value.code == refusals.NOT_FOUND


def test_a_reply_is_not_edited(human: Actor, assistant_run: Actor, conversation: Thread) -> None:
    _, reply = answered(human, assistant_run, conversation, "one")
    with pytest.raises(Refusal) as refusal:
        actions.edit_turn(human, thread_id=conversation.pk, message_id=reply.pk, body="x")
    assert refusal.value.code == refusals.INVALID


def test_branch_names_are_unique_in_the_project_and_a_given_one_taken_is_refused(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """R18: `thread-exists` for a given name taken; a default name finds the next free one."""
    sent, _ = answered(human, assistant_run, conversation, "one")
    names = [
        actions.branch_thread(human, thread_id=conversation.pk, message_id=sent.pk).name
        for _ in range(3)
    ]
    assert names == ["plans (branch)", "plans (branch 2)", "plans (branch 3)"]
    with pytest.raises(Refusal) as refusal:
        actions.branch_thread(
            human, thread_id=conversation.pk, message_id=sent.pk, name="plans (branch 2)"
        )
    assert refusal.value.code == refusals.THREAD_EXISTS
    named = actions.branch_thread(human, thread_id=conversation.pk, message_id=sent.pk, name="b")
    assert (named.name, named.branched_from_id) == ("b", conversation.pk)


def test_branch_name_is_clamped_to_the_name_limit(
    settings, human: Actor, assistant_run: Actor
) -> None:
    settings.MOSAIC_NAME_MAX = 20
    long = factories.thread(human, factories.project(human), "x" * 20)
    sent, _ = answered(human, assistant_run, long, "one")
    branch = actions.branch_thread(human, thread_id=long.pk, message_id=sent.pk)
    assert branch.name == "x" * 11 + " (branch)"


def test_a_branch_of_a_branch_carries_through_both(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """The carried path recurses through a source that is itself a branch, cut where each
    branch was made."""
    answered(human, assistant_run, conversation, "a1")
    a2, reply_a2 = answered(human, assistant_run, conversation, "a2")
    answered(human, assistant_run, conversation, "a3")
    first = actions.branch_thread(human, thread_id=conversation.pk, message_id=reply_a2.pk)
    b1, reply_b1 = answered(human, assistant_run, first, "b1")
    answered(human, assistant_run, first, "b2")
    second = actions.branch_thread(human, thread_id=first.pk, message_id=reply_b1.pk)
    answered(human, assistant_run, second, "c1")
    assert path_bodies(second) == ["a1", "re: a1", "a2", "re: a2", "b1", "re: b1", "c1", "re: c1"]
    # Cut inside what the middle branch carries: the top thread's part alone.
    third = actions.branch_thread(human, thread_id=first.pk, message_id=a2.pk)
    assert path_bodies(third) == ["a1", "re: a1", "a2"]
    # An edit of the middle branch's first own turn carries what it carried.
    answered(human, assistant_run, first, "b3")
    edited = actions.edit_turn(human, thread_id=first.pk, message_id=b1.pk, body="b1!")
    assert edited.thread.branched_at_id == reply_a2.pk
    assert path_bodies(edited.thread) == ["a1", "re: a1", "a2", "re: a2", "b1!"]


def test_superseded_versions_are_left_out_of_the_path_and_of_a_branch(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """A branch made at a message keeps the path as it was then: a version stored later
    supersedes nothing it carries; one stored before does."""
    one, _ = answered(human, assistant_run, conversation, "one")
    version = actions.edit_turn(human, thread_id=conversation.pk, message_id=one.pk, body="1")
    reply = factories.reply(assistant_run, version.message, body="re: 1")
    branch = actions.branch_thread(human, thread_id=conversation.pk, message_id=reply.pk)
    assert path_bodies(branch) == ["1", "re: 1"]
    # A superseded turn is no message of the path: no branch is made at it.
    with pytest.raises(Refusal) as refusal:
        actions.branch_thread(human, thread_id=conversation.pk, message_id=one.pk)
    assert refusal.value.code == refusals.NOT_FOUND
    later = actions.edit_turn(
        human, thread_id=conversation.pk, message_id=version.message.pk, body="uno"
    )
    assert path_bodies(conversation) == ["uno"]
    assert path_bodies(branch) == ["1", "re: 1"]
    assert later.message.version_of_id == one.pk


def test_each_verb_writes_one_trail_row_of_its_kind(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """Besides the new turn's own message row: one `turn.edited`, `turn.regenerated` or
    `thread.branched` row, labelled by R16 as the other thread changes."""
    one, _ = answered(human, assistant_run, conversation, "one")
    two, _ = answered(human, assistant_run, conversation, "two")
    actions.edit_turn(human, thread_id=conversation.pk, message_id=one.pk, body="1")
    actions.regenerate_turn(human, thread_id=conversation.pk, message_id=two.pk)
    branch = actions.branch_thread(human, thread_id=conversation.pk, message_id=one.pk)
    versions = (TrailKind.TURN_EDITED, TrailKind.TURN_REGENERATED, TrailKind.THREAD_BRANCHED)
    rows = TrailRow.objects.filter(kind__in=versions).order_by("pk")
    assert [(row.kind, row.text) for row in rows] == [
        (TrailKind.TURN_EDITED, "human to assistant: edited a turn of “plans” in a new branch"),
        (TrailKind.TURN_REGENERATED, "human to assistant: asked a turn again"),
        (TrailKind.THREAD_BRANCHED, f"human to assistant: branched “plans” into “{branch.name}”"),
    ]


def test_what_a_branch_carries_never_changes(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """The guards refuse a change of `branched_from` or `branched_at`, on every database."""
    sent, reply = answered(human, assistant_run, conversation, "one")
    branch = actions.branch_thread(human, thread_id=conversation.pk, message_id=reply.pk)
    for change in ({"branched_at": sent}, {"branched_from": None}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Thread.objects.filter(pk=branch.pk).update(**change)
    # The rest of the row still changes (a rename).
    actions.rename_thread(human, thread_id=branch.pk, name="renamed")


def test_edit_of_an_older_version_of_an_earlier_turn_branches_before_its_group(
    human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """Any version names its turn: an edit of a superseded version of an earlier turn carries
    the conversation before the turn's first version, never its other versions."""
    _, reply_one = answered(human, assistant_run, conversation, "one")
    two, _ = answered(human, assistant_run, conversation, "two")
    version = actions.edit_turn(human, thread_id=conversation.pk, message_id=two.pk, body="2")
    factories.reply(assistant_run, version.message, body="re: 2")
    answered(human, assistant_run, conversation, "three")
    edited = actions.edit_turn(human, thread_id=conversation.pk, message_id=two.pk, body="II")
    assert edited.thread.branched_at_id == reply_one.pk
    assert path_bodies(edited.thread) == ["one", "re: one", "II"]
    assert path_bodies(conversation) == ["one", "re: one", "2", "re: 2", "three", "re: three"]


def test_branch_stores_no_message_and_may_talk_to_another_instance(
    business: Business, human: Actor, assistant_run: Actor, conversation: Thread
) -> None:
    """A branch is a thread and its trail row: no turn, no reply (R12), no `human.input`."""
    factories.instance(business, "critic")
    sent, reply = answered(human, assistant_run, conversation, "one")
    stored = (Message.objects.count(), Event.objects.count())
    branch = actions.branch_thread(
        human, thread_id=conversation.pk, message_id=reply.pk, instance="critic"
    )
    assert (Message.objects.count(), Event.objects.count()) == stored
    assert (branch.instance.name, branch.branched_at_id) == ("critic", reply.pk)
    assert [m.pk for m in selectors.carried_messages(human, thread_id=branch.pk)] == [
        sent.pk,
        reply.pk,
    ]
    # Its first turn goes to the branch's instance.
    first = turn(human, branch, "and you?")
    assert first.to_role == "critic"
