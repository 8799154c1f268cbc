"""R24: what a run is shown of a conversation with versions and branches (`read_turn`)."""

from __future__ import annotations

from broker import actions
from broker.actors import Actor
from broker.models import Business, Message
from runner.turns import Turn, read_turn
from tests.broker import factories


def seen(turn: Message) -> Turn:
    return read_turn(Message.objects.select_related("thread", "progress").get(pk=turn.pk))


def shown(turn: Turn) -> list[tuple[str, str, str]]:
    return [(entry.from_role, entry.to_role, entry.body) for entry in turn.history]


def test_a_new_version_is_answered_as_if_the_superseded_ones_never_happened(
    human: Actor, assistant_run: Actor
) -> None:
    thread = factories.thread(human, factories.project(human), "plans")
    one = actions.send_to_thread(human, thread_id=thread.pk, body="one").message
    factories.reply(assistant_run, one, body="re: one")
    two = actions.send_to_thread(human, thread_id=thread.pk, body="two").message
    factories.reply(assistant_run, two, body="re: two")
    edited = actions.edit_turn(human, thread_id=thread.pk, message_id=two.pk, body="2").message
    read = seen(edited)
    assert shown(read) == [
        ("human", "assistant", "one"),
        ("assistant", "human", "re: one"),
    ]
    assert (read.body, read.number) == ("2", 2)
    # The superseded turn itself, read again, still sees what came before it.
    assert shown(seen(two)) == shown(read)


def test_a_branchs_first_turn_sees_the_carried_conversation_as_its_instances(
    business: Business, human: Actor, assistant_run: Actor
) -> None:
    """On another instance, the source instance's part is read as the branch's instance's."""
    factories.instance(business, "critic")
    thread = factories.thread(human, factories.project(human), "plans")
    one = actions.send_to_thread(human, thread_id=thread.pk, body="one").message
    factories.reply(assistant_run, one, body="re: one")
    two = actions.send_to_thread(human, thread_id=thread.pk, body="two").message
    reply_two = factories.reply(assistant_run, two, body="re: two")
    three = actions.send_to_thread(human, thread_id=thread.pk, body="three").message
    factories.reply(assistant_run, three, body="re: three")

    branch = actions.regenerate_turn(
        human, thread_id=thread.pk, message_id=reply_two.pk, instance="critic"
    )
    read = seen(branch.message)
    assert read.instance == "critic"
    assert shown(read) == [("human", "critic", "one"), ("critic", "human", "re: one")]
    assert read.number == 2

    edited = actions.edit_turn(human, thread_id=thread.pk, message_id=three.pk, body="3")
    assert edited.thread.pk == thread.pk
    branched = actions.edit_turn(human, thread_id=thread.pk, message_id=two.pk, body="2")
    assert shown(seen(branched.message)) == [
        ("human", "assistant", "one"),
        ("assistant", "human", "re: one"),
    ]
