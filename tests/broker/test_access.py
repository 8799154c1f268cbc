"""`access_*` edges: which claim and which message a call reaches (SPEC §7, R12), the `@verb`
declaration (R22), and the contract of every refusal (SPEC §6)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from broker import access, actions, refusals
from broker.actors import Actor, ActorKind
from broker.models import Business, Instance, Message, MessageClass, RoleDefinition
from broker.refusals import Refusal
from tests.broker import factories
from tests.conftest import make_business


def refusal_code(call: Callable[[], Any]) -> str:
    """The code `call` refuses with; every refusal also carries a sentence (SPEC §6)."""
    with pytest.raises(Refusal) as refusal:
        call()
    assert isinstance(refusal.value.detail, str)
    assert refusal.value.detail.strip()
    return refusal.value.code


@pytest.fixture
def human_thread(human: Actor):
    thread = factories.thread(human, factories.project(human), "human work")
    actions.send_to_thread(human, thread_id=thread.pk, body="first turn")
    return thread


@pytest.fixture
def planner_run(business: Business) -> Actor:
    """A run of a second instance of the business that happens to use the same run id."""
    role = RoleDefinition.objects.create(
        business=business, name="planner", receive_from=["human"], send_to=["human"], cross_role=[]
    )
    Instance.objects.create(business=business, name="planner", role=role)
    return Actor.assistant_run(business_id=business.pk, instance="planner", run="run-1")


# --- access_claim ------------------------------------------------------------------------


def test_renew_claim_picks_the_named_claim_among_the_runs_claims(
    assistant_run: Actor, human: Actor, human_thread
) -> None:
    """SPEC §7: a write names its claim; the run's other, ended claim does not answer for it."""
    other = factories.thread(human, human_thread.project, "second")
    ended = factories.claim(assistant_run, human_thread)
    actions.end_claim(assistant_run, claim_id=ended.pk)
    held = factories.claim(assistant_run, other)
    assert actions.renew_claim(assistant_run, claim_id=held.pk).pk == held.pk
    assert (
        refusal_code(lambda: actions.renew_claim(assistant_run, claim_id=ended.pk))
        == refusals.CLAIM_ENDED
    )


def test_renew_claim_of_another_instance_with_same_run_id_is_not_found(
    assistant_run: Actor, planner_run: Actor, human_thread
) -> None:
    """SPEC §7: a claim belongs to its instance's run; a run id alone reaches nothing."""
    claim = factories.claim(assistant_run, human_thread)
    assert (
        refusal_code(lambda: actions.renew_claim(planner_run, claim_id=claim.pk))
        == refusals.NOT_FOUND
    )
    assert (
        refusal_code(lambda: actions.end_claim(planner_run, claim_id=claim.pk))
        == refusals.NOT_FOUND
    )


def test_renew_claim_from_another_business_is_not_found(
    assistant_run: Actor, human_thread, db: None
) -> None:
    """Across businesses nothing is reached, even with the same instance name and run id."""
    elsewhere = make_business("elsewhere", human="grace")
    stranger = Actor.assistant_run(business_id=elsewhere.pk, instance="assistant", run="run-1")
    claim = factories.claim(assistant_run, human_thread)
    assert (
        refusal_code(lambda: actions.renew_claim(stranger, claim_id=claim.pk)) == refusals.NOT_FOUND
    )


def test_renew_claim_whose_lease_ends_this_instant_is_claim_ended(
    assistant_run: Actor, human_thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §7: a lease is over at its deadline, not a moment after it."""
    claim = factories.claim(assistant_run, human_thread)
    monkeypatch.setattr(access.timezone, "now", lambda: claim.lease_expires_at)
    assert (
        refusal_code(lambda: actions.renew_claim(assistant_run, claim_id=claim.pk))
        == refusals.CLAIM_ENDED
    )


def test_access_claim_loads_thread_project_and_instance_in_one_query(
    assistant_run: Actor, human_thread, django_assert_num_queries: Any
) -> None:
    """A run's write reads its claim's thread, project and instance with the claim itself."""
    claim = factories.claim(assistant_run, human_thread)
    with transaction.atomic(), django_assert_num_queries(1):
        found = access.access_claim(assistant_run, claim_id=claim.pk)
        assert found.thread.project.name == "product"
        assert found.thread.instance.name == "assistant"


# --- access_message ----------------------------------------------------------------------


def test_reply_names_exactly_the_message_it_answers(
    assistant_run: Actor, human: Actor, human_thread
) -> None:
    """R12: `in_reply_to` is the message named, not another of the business."""
    second = actions.send_to_thread(human, thread_id=human_thread.pk, body="second turn")
    claim = factories.claim(assistant_run, human_thread)
    reply = actions.send_message(
        assistant_run,
        to="human",
        body="answer",
        message_class=MessageClass.RESULT,
        in_reply_to=second.message.pk,
        claim_id=claim.pk,
    )
    assert reply.in_reply_to_id == second.message.pk


def test_reply_to_a_message_of_another_business_is_not_found(
    assistant_run: Actor, human_thread, other_human: Actor
) -> None:
    """A reply cannot name another business's message (same answer as a missing one)."""
    theirs = factories.thread(other_human, factories.project(other_human), "theirs")
    actions.send_to_thread(other_human, thread_id=theirs.pk, body="not yours")
    foreign = Message.objects.get(business_id=other_human.business_id)
    claim = factories.claim(assistant_run, human_thread)
    assert (
        refusal_code(
            lambda: actions.send_message(
                assistant_run,
                to="human",
                body="answer",
                message_class=MessageClass.RESULT,
                in_reply_to=foreign.pk,
                claim_id=claim.pk,
            )
        )
        == refusals.NOT_FOUND
    )


# --- @verb (R22) -------------------------------------------------------------------------


def test_verb_declared_records_its_kinds_and_logs_each_refusal(
    human: Actor, tester: Actor, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """R22: a verb is declared with the kinds it serves; a refusal is logged with verb, code,
    actor and business, and the caller's arguments reach the verb unchanged."""
    monkeypatch.setattr(access, "VERBS", {})
    caplog.set_level(logging.INFO, logger="mosaic.security")

    @access.verb("probe.echo", ActorKind.HUMAN)
    def echo(actor: Actor, value: int, *, twice: bool) -> tuple[str, int, bool]:
        return actor.role, value, twice

    assert {"probe.echo": frozenset({ActorKind.HUMAN})} == access.VERBS
    assert echo(human, 3, twice=True) == ("human", 3, True)
    assert refusal_code(lambda: echo(tester, 3, twice=False)) == refusals.TESTER_REFUSED
    lines = [r.getMessage() for r in caplog.records if r.name == "mosaic.security"]
    assert lines == [
        f"refused verb=probe.echo code=tester-refused actor={tester} business={tester.business_id}"
    ]
