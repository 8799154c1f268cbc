"""The lease reaper (SPEC §7): a dead run's claim ends `lease-expired` without waiting for a run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from broker import actions
from broker.actors import Actor
from broker.models import Business, Event, EventKind, ThreadClaim, TrailRow
from broker.refusals import Refusal
from runner.claims import reap_expired
from tests.broker import factories


def expire(claim: ThreadClaim) -> None:
    ThreadClaim.objects.filter(pk=claim.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


@pytest.fixture
def claims(human: Actor, tester: Actor, assistant_run: Actor) -> list[ThreadClaim]:
    project = factories.project(human)
    held = []
    for actor, name in ((human, "work"), (tester, "check")):
        thread = factories.thread(actor, project, name)
        actions.send_to_thread(actor, thread_id=thread.pk, body="x")
        held.append(factories.claim(assistant_run, thread))
    return held


def test_claim_reap_ends_expired_claims_lease_expired_by_system(
    business: Business, claims: list[ThreadClaim]
) -> None:
    """SPEC §7: the expired claim ends `lease-expired`, ended by `system`, with its trail row."""
    dead, live = claims
    expire(dead)
    ended = actions.reap_claims(Actor.system(business_id=business.pk))
    assert [c.pk for c in ended] == [dead.pk]
    dead.refresh_from_db()
    live.refresh_from_db()
    assert (dead.end_reason, dead.ended_by) == ("lease-expired", "system")
    assert live.ended_at is None
    event = Event.objects.get(kind=EventKind.CLAIM_ENDED)
    assert (event.body["claim"], event.body["reason"]) == (dead.pk, "lease-expired")
    row = TrailRow.objects.get(text__contains="ended (lease-expired)")
    assert (row.actor_role, row.actor_run) == ("system", "system")


def test_claim_reap_with_nothing_expired_ends_nothing(
    business: Business, claims: list[ThreadClaim]
) -> None:
    assert actions.reap_claims(Actor.system(business_id=business.pk)) == []
    assert not ThreadClaim.objects.filter(ended_at__isnull=False).exists()


def test_claim_reap_touches_only_its_business(
    business: Business, other_business: Business, claims: list[ThreadClaim]
) -> None:
    for claim in claims:
        expire(claim)
    assert actions.reap_claims(Actor.system(business_id=other_business.pk)) == []
    assert len(actions.reap_claims(Actor.system(business_id=business.pk))) == 2


def test_reap_expired_sweeps_every_business(
    other_human: Actor, other_business: Business, claims: list[ThreadClaim]
) -> None:
    """The runner's sweep reaps business by business, each as that business's system."""
    thread = factories.thread(other_human, factories.project(other_human), "t")
    actions.send_to_thread(other_human, thread_id=thread.pk, body="x")
    run = Actor.assistant_run(business_id=other_business.pk, instance="assistant", run="r")
    theirs = factories.claim(run, thread)
    for claim in [*claims, theirs]:
        expire(claim)
    assert len(reap_expired(business_id=other_business.pk)) == 1
    assert len(reap_expired()) == 2
    assert not ThreadClaim.objects.filter(ended_at__isnull=True).exists()


@pytest.mark.parametrize(
    ("actor_name", "code"),
    [("human", "not-found"), ("tester", "tester-refused"), ("assistant_run", "not-found")],
)
def test_claim_reap_by_anyone_but_system_is_refused(
    request: pytest.FixtureRequest, actor_name: str, code: str, claims: list[ThreadClaim]
) -> None:
    """R22: only the product itself ends other runs' claims for lapsed leases."""
    for claim in claims:
        expire(claim)
    with pytest.raises(Refusal) as refusal:
        actions.reap_claims(request.getfixturevalue(actor_name))
    assert refusal.value.code == code
    assert not ThreadClaim.objects.filter(ended_at__isnull=False).exists()
