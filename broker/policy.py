"""Pure rules: who owns what, who may message whom, which verbs the tester may call.

No database here, so every rule can be tested exhaustively. Each function denies by default:
every allowed case is an early return with its reason, and the last line refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker import refusals
from broker.actors import Actor, ActorKind
from broker.models import HUMAN, TESTER

# R22: the verbs the tester may call, whatever the transport; renaming, archiving and pinning
# its own threads among them, a conversation sent whole (`broker.actions.conversations`, the
# tester's alone), and storing and reading the history of its conversation-test runs
# (`broker.actions.suite_runs`, the tester's alone); and versions and branches of its own
# threads (R24).
TESTER_VERBS = frozenset(
    {
        "project.create",
        "project.list",
        "instance.list",
        "thread.create",
        "thread.open",
        "thread.send",
        "thread.messages",
        "thread.list",
        "thread.rename",
        "thread.archive",
        "thread.pin",
        "thread.edit",
        "thread.regenerate",
        "thread.branch",
        "message.send",
        "message.receive",
        "messages.view",
        "messages.search",
        "trail.read",
        "assistant.stop",
        "conversation.start",
        "conversation.continue",
        "suite_run.start",
        "suite_run.record",
        "suite_run.end",
        "suite_run.list",
        "suite_run.read",
    }
)


@dataclass(frozen=True)
class RoleLists:
    """A role definition's messaging lists, as the broker reads them."""

    receive_from: frozenset[str]
    send_to: frozenset[str]
    cross_role: frozenset[str]

    @classmethod
    def of(
        cls, *, receive_from: Iterable[str], send_to: Iterable[str], cross_role: Iterable[str] = ()
    ) -> RoleLists:
        return cls(frozenset(receive_from), frozenset(send_to), frozenset(cross_role))


def owner(actor: Actor) -> str:
    """The owner an actor's threads carry: `tester` for the tester, else the human's username."""
    if actor.kind is ActorKind.TESTER:
        return TESTER
    if actor.kind is ActorKind.HUMAN:
        return actor.username
    raise refusals.Refusal(refusals.NOT_FOUND, "Only the human and the tester own threads.")


def verb_refusal(actor: Actor, verb: str, allowed: frozenset[ActorKind]) -> str | None:
    """The code refusing `actor` the broker verb `verb`, or None when the call may proceed."""
    # R22: the tester's list is explicit and checked first, whatever else the verb allows.
    if actor.kind is ActorKind.TESTER and verb not in TESTER_VERBS:
        return refusals.TESTER_REFUSED
    # The verb serves this kind of actor.
    if actor.kind in allowed:
        return None
    # Same answer as an unknown verb: nothing tells a caller what it might reach otherwise.
    return refusals.NOT_FOUND


def reads_as(address: str, *, thread_owner: str | None) -> str:
    """R9: in a tester-owned thread the lists read the tester as `human`, both ways only there."""
    if thread_owner == TESTER and address == TESTER:
        return HUMAN
    return address


def messaging_refusal(
    *,
    sender: str,
    recipient: str,
    roles: Mapping[str, RoleLists],
    thread_owner: str | None,
) -> str | None:
    """The code refusing a message from `sender` to `recipient`, or None (R8–R11).

    `roles` maps each instance's address to its role's lists; `human` and `tester` have none.
    Every path that stores something for the human — messages, decisions, reviews — comes
    through here, so R11's guard covers them all (R19).
    """
    # R11: nothing from a tester-owned thread reaches the human, whatever the lists say.
    if thread_owner == TESTER and recipient == HUMAN:
        return refusals.TESTER_THREAD_HUMAN
    sender = reads_as(sender, thread_owner=thread_owner)
    recipient = reads_as(recipient, thread_owner=thread_owner)
    sender_lists = roles.get(sender)
    recipient_lists = roles.get(recipient)
    # An address that is neither `human` nor an instance (the tester outside its own threads
    # among them) has no lists that could name it.
    if recipient_lists is None and recipient != HUMAN:
        return refusals.MESSAGE_RECIPIENT_REFUSED
    if sender_lists is None and sender != HUMAN:
        return refusals.MESSAGE_SENDER_REFUSED
    # R8: the recipient's receive_from must name the sender.
    if recipient_lists is not None and sender not in recipient_lists.receive_from:
        return refusals.MESSAGE_SENDER_REFUSED
    # R8: the sender's send_to must name the recipient.
    if sender_lists is not None and recipient not in sender_lists.send_to:
        return refusals.MESSAGE_RECIPIENT_REFUSED
    # At least one end is an instance whose lists were checked above.
    if sender_lists is not None or recipient_lists is not None:
        return None
    # `human` to `human`: no definition vouches for it.
    return refusals.MESSAGE_RECIPIENT_REFUSED


def consult_refusal(*, asker: str, consulted: str, turn_from: str) -> str | None:
    """R23: a run answering its owner (`human` or `tester`) may consult another instance; a
    run answering a consultation may not consult again (depth at most 2)."""
    # Only an instance is consulted, and never the asker itself.
    if consulted in (HUMAN, TESTER) or consulted == asker:
        return refusals.MESSAGE_RECIPIENT_REFUSED
    # The turn being answered came from the thread's owner, not from a consulting instance.
    if turn_from in (HUMAN, TESTER):
        return None
    return refusals.CONSULT_TOO_DEEP


def decision_refusal(*, sender_lists: RoleLists | None, route_to: str) -> str | None:
    """R19: only a role with cross-role authority for `route_to` may route a decision there."""
    # The role's cross_role list names the inbox it may route decisions to.
    if sender_lists is not None and route_to in sender_lists.cross_role:
        return None
    return refusals.MESSAGE_RECIPIENT_REFUSED


def reply_refusal(*, recipient: str, in_reply_to_sender: str | None) -> str | None:
    """R10: a message to the tester must answer one of the tester's own messages."""
    # Not addressed to the tester: R10 has nothing to say.
    if recipient != TESTER:
        return None
    # In reply to a tester message.
    if in_reply_to_sender == TESTER:
        return None
    return refusals.TESTER_REPLY_REQUIRED


def business_refusal(*, human: str) -> str | None:
    """R4: a business whose human is `tester` would share an owner with the tester."""
    # Any non-empty username other than `tester`.
    if human and human != TESTER:
        return None
    return refusals.INVALID_BUSINESS


def role_lists_refusal(lists: RoleLists) -> str | None:
    """R5: no role list may name `tester`, which is never a role."""
    # None of the three lists names it.
    if TESTER not in lists.receive_from | lists.send_to | lists.cross_role:
        return None
    return refusals.INVALID_MESSAGING


def stop_reason(actor: Actor) -> str:
    """R13: the reason an `assistant.stop` records on the claims it ends."""
    return f"stopped by the {actor.role}"


def trail_label(*, from_role: str, to_role: str) -> str:
    """R16: a trail row names both ends."""
    return f"{from_role} to {to_role}"


def tester_sees(*, thread_owner: str | None, from_role: str, to_role: str) -> bool:
    """R20: the tester reads a trail row of its own threads or with itself at one end."""
    return thread_owner == TESTER or TESTER in (from_role, to_role)
