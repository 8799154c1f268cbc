"""Pure policy: messaging lists (R8–R11), verbs (R22), business rules (R4, R5)."""

from __future__ import annotations

import pytest

from broker import policy, refusals
from broker.actors import Actor, ActorKind
from broker.policy import RoleLists

SHIPPED = {"assistant": RoleLists.of(receive_from=["human"], send_to=["human"])}


@pytest.mark.parametrize(
    ("sender", "recipient", "thread_owner", "expected"),
    [
        # R8: the human's turn and the run's answer in a human thread.
        ("human", "assistant", "ada", None),
        ("assistant", "human", "ada", None),
        # R9: in a tester-owned thread the tester reads as human, both ways.
        ("tester", "assistant", "tester", None),
        ("assistant", "tester", "tester", None),
        # R9 nowhere else: outside a thread, or in the human's thread.
        ("tester", "assistant", None, refusals.MESSAGE_SENDER_REFUSED),
        ("assistant", "tester", None, refusals.MESSAGE_RECIPIENT_REFUSED),
        ("tester", "assistant", "ada", refusals.MESSAGE_SENDER_REFUSED),
        # R11: a run of a tester-owned thread never reaches the human.
        ("assistant", "human", "tester", refusals.TESTER_THREAD_HUMAN),
        # Unknown addresses and human-to-human are refused by default.
        ("human", "nobody", None, refusals.MESSAGE_RECIPIENT_REFUSED),
        ("nobody", "assistant", None, refusals.MESSAGE_SENDER_REFUSED),
        ("human", "human", None, refusals.MESSAGE_RECIPIENT_REFUSED),
    ],
)
def test_messaging_refusal_shipped_lists(
    sender: str, recipient: str, thread_owner: str | None, expected: str | None
) -> None:
    assert (
        policy.messaging_refusal(
            sender=sender, recipient=recipient, roles=SHIPPED, thread_owner=thread_owner
        )
        == expected
    )


def test_messaging_refusal_receive_from_without_human_refuses_sender() -> None:
    """T3 (R8): the assistant dropping `human` from receive_from refuses the tester too."""
    roles = {"assistant": RoleLists.of(receive_from=[], send_to=["human"])}
    for sender, owner in (("human", "ada"), ("tester", "tester")):
        assert (
            policy.messaging_refusal(
                sender=sender, recipient="assistant", roles=roles, thread_owner=owner
            )
            == refusals.MESSAGE_SENDER_REFUSED
        )


def test_messaging_refusal_send_to_without_human_refuses_recipient() -> None:
    roles = {"assistant": RoleLists.of(receive_from=["human"], send_to=[])}
    assert (
        policy.messaging_refusal(
            sender="assistant", recipient="tester", roles=roles, thread_owner="tester"
        )
        == refusals.MESSAGE_RECIPIENT_REFUSED
    )


def test_messaging_refusal_between_instances_checks_both_lists() -> None:
    roles = {
        "assistant": RoleLists.of(receive_from=["human"], send_to=["human", "planner"]),
        "planner": RoleLists.of(receive_from=["assistant"], send_to=[]),
    }
    assert (
        policy.messaging_refusal(
            sender="assistant", recipient="planner", roles=roles, thread_owner=None
        )
        is None
    )
    assert (
        policy.messaging_refusal(
            sender="planner", recipient="assistant", roles=roles, thread_owner=None
        )
        == refusals.MESSAGE_SENDER_REFUSED
    )


@pytest.mark.parametrize(
    ("recipient", "in_reply_to_sender", "expected"),
    [
        ("tester", "tester", None),
        ("tester", "human", refusals.TESTER_REPLY_REQUIRED),
        ("tester", None, refusals.TESTER_REPLY_REQUIRED),
        ("human", None, None),
    ],
)
def test_reply_refusal_r10(
    recipient: str, in_reply_to_sender: str | None, expected: str | None
) -> None:
    assert (
        policy.reply_refusal(recipient=recipient, in_reply_to_sender=in_reply_to_sender) == expected
    )


def test_decision_refusal_needs_cross_role_for_route() -> None:
    """R19: the assistant has no cross-role authority; a role that names `human` has."""
    assert (
        policy.decision_refusal(sender_lists=SHIPPED["assistant"], route_to="human")
        == refusals.MESSAGE_RECIPIENT_REFUSED
    )
    lead = RoleLists.of(receive_from=[], send_to=["human"], cross_role=["human"])
    assert policy.decision_refusal(sender_lists=lead, route_to="human") is None
    assert policy.decision_refusal(sender_lists=None, route_to="human") is not None


def test_owner_of_human_is_username_and_of_tester_is_tester() -> None:
    assert policy.owner(Actor.human(business_id=1, username="ada")) == "ada"
    assert policy.owner(Actor.tester(business_id=1)) == "tester"
    with pytest.raises(refusals.Refusal):
        policy.owner(Actor.assistant_run(business_id=1, instance="assistant", run="r"))


def test_verb_refusal_tester_outside_tester_verbs_is_refused() -> None:
    """R22: the tester's verbs are one explicit list; anything else is `tester-refused`."""
    tester = Actor.tester(business_id=1)
    everyone = frozenset(ActorKind)
    assert policy.verb_refusal(tester, "thread.send", everyone) is None
    assert policy.verb_refusal(tester, "inbox.read", everyone) == refusals.TESTER_REFUSED
    assert policy.verb_refusal(tester, "task.create", everyone) == refusals.TESTER_REFUSED


def test_verb_refusal_other_kind_is_not_found() -> None:
    human = Actor.human(business_id=1, username="ada")
    assert (
        policy.verb_refusal(human, "claim.open", frozenset({ActorKind.RUN})) == refusals.NOT_FOUND
    )


def test_business_refusal_human_tester_is_invalid_business() -> None:
    """T6 (R4)."""
    assert policy.business_refusal(human="tester") == refusals.INVALID_BUSINESS
    assert policy.business_refusal(human="") == refusals.INVALID_BUSINESS
    assert policy.business_refusal(human="ada") is None


@pytest.mark.parametrize("field", ["receive_from", "send_to", "cross_role"])
def test_role_lists_refusal_naming_tester_is_invalid_messaging(field: str) -> None:
    """R5: any of the three lists naming `tester`."""
    lists = {"receive_from": ["human"], "send_to": ["human"], "cross_role": []}
    lists[field] = [*lists[field], "tester"]
    assert policy.role_lists_refusal(RoleLists.of(**lists)) == refusals.INVALID_MESSAGING


@pytest.mark.parametrize(
    ("thread_owner", "from_role", "to_role", "seen"),
    [
        ("tester", "human", "assistant", True),
        (None, "tester", "assistant", True),
        (None, "assistant", "tester", True),
        ("ada", "tester", "assistant", True),
        ("tester", "tester", "assistant", True),
        ("ada", "human", "assistant", False),
        (None, "assistant", "planner", False),
    ],
    ids=[
        "own-thread",
        "tester-sends",
        "tester-receives",
        "human-thread-tester-end",
        "both",
        "human-thread",
        "between-assistants",
    ],
)
def test_tester_sees_its_own_threads_or_rows_with_itself_at_one_end(
    thread_owner: str | None, from_role: str, to_role: str, seen: bool
) -> None:
    """R20: either condition alone shows the tester a trail row; neither hides it."""
    assert (
        policy.tester_sees(thread_owner=thread_owner, from_role=from_role, to_role=to_role) is seen
    )
