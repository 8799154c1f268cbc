"""Claims as leases (SPEC §7), instance end (R14), tasks (R15), notices (R17), decisions (R19)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from broker import actions, refusals, selectors
from broker.actors import Actor
from broker.models import (
    Business,
    ClaimEnd,
    Event,
    EventKind,
    Instance,
    Message,
    RoleDefinition,
    Task,
    ThreadClaim,
    TrailRow,
)
from broker.refusals import Refusal
from tests.broker import factories


def code_of(call) -> str:
    with pytest.raises(Refusal) as refusal:
        call()
    return refusal.value.code


@pytest.fixture
def product(human: Actor):
    return factories.project(human)


@pytest.fixture
def human_thread(human: Actor, product):
    thread = factories.thread(human, product, "human work")
    actions.send_to_thread(human, thread_id=thread.pk, body="please help")
    return thread


@pytest.fixture
def tester_thread(tester: Actor, product):
    thread = factories.thread(tester, product, "tester check")
    actions.send_to_thread(tester, thread_id=thread.pk, body="please help")
    return thread


@pytest.fixture
def other_run(business: Business) -> Actor:
    return Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-2")


@pytest.fixture
def staff(business: Business) -> Actor:
    return Actor.staff(business_id=business.pk, username="root")


def expire(claim: ThreadClaim) -> None:
    ThreadClaim.objects.filter(pk=claim.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


# --- claims ------------------------------------------------------------------------------


def test_claim_open_held_thread_returns_none(
    assistant_run: Actor, other_run: Actor, human_thread
) -> None:
    """One open claim per thread: a second run gets nothing while the lease runs."""
    first = factories.claim(assistant_run, human_thread)
    assert actions.open_claim(other_run, thread_id=human_thread.pk) is None
    assert ThreadClaim.objects.get(ended_at__isnull=True).pk == first.pk


def test_claim_open_after_lease_ran_out_ends_old_claim_lease_expired(
    assistant_run: Actor, other_run: Actor, human_thread
) -> None:
    """SPEC §7: a dead run's claim is ended `lease-expired` and the thread picked up again."""
    first = factories.claim(assistant_run, human_thread)
    expire(first)
    second = factories.claim(other_run, human_thread)
    first.refresh_from_db()
    assert (first.end_reason, first.ended_by) == ("lease-expired", "system")
    assert second.run == "run-2"
    assert TrailRow.objects.filter(text__contains="claim of run-1 ended (lease-expired)").exists()


def test_claim_write_after_lease_ran_out_refuses_claim_ended(
    assistant_run: Actor, human_thread
) -> None:
    claim = factories.claim(assistant_run, human_thread)
    expire(claim)
    assert (
        code_of(lambda: actions.renew_claim(assistant_run, claim_id=claim.pk))
        == refusals.CLAIM_ENDED
    )


def test_claim_renew_extends_lease(assistant_run: Actor, human_thread) -> None:
    claim = factories.claim(assistant_run, human_thread)
    ThreadClaim.objects.filter(pk=claim.pk).update(
        lease_expires_at=timezone.now() + timedelta(seconds=1)
    )
    renewed = actions.renew_claim(assistant_run, claim_id=claim.pk)
    assert renewed.lease_expires_at > timezone.now() + timedelta(seconds=5)


def test_claim_end_releases_and_later_writes_refuse_claim_ended(
    assistant_run: Actor, human_thread
) -> None:
    claim = factories.claim(assistant_run, human_thread)
    actions.end_claim(assistant_run, claim_id=claim.pk)
    assert (
        code_of(lambda: actions.end_claim(assistant_run, claim_id=claim.pk)) == refusals.CLAIM_ENDED
    )
    assert Event.objects.filter(kind=EventKind.CLAIM_ENDED).count() == 1


def test_claim_of_another_run_is_not_found(
    assistant_run: Actor, other_run: Actor, human_thread
) -> None:
    """A run names only its own claim; another run's id answers as missing."""
    claim = factories.claim(assistant_run, human_thread)
    assert code_of(lambda: actions.renew_claim(other_run, claim_id=claim.pk)) == refusals.NOT_FOUND


def test_claim_open_of_thread_of_other_instance_is_not_found(
    business: Business, human_thread
) -> None:
    role = RoleDefinition.objects.get(business=business)
    Instance.objects.create(business=business, name="planner", role=role)
    planner = Actor.assistant_run(business_id=business.pk, instance="planner", run="p-1")
    assert (
        code_of(lambda: actions.open_claim(planner, thread_id=human_thread.pk))
        == refusals.NOT_FOUND
    )


# --- R14 ---------------------------------------------------------------------------------


def test_instance_end_ends_every_claim_tester_threads_included(
    staff: Actor, assistant_run: Actor, human_thread, tester_thread
) -> None:
    """R14: ending the instance ends the human's and the tester's claims alike, naming who."""
    claims = [
        factories.claim(assistant_run, human_thread),
        factories.claim(assistant_run, tester_thread),
    ]
    ended = actions.end_instance(staff, instance="assistant")
    assert sorted(c.pk for c in ended) == sorted(c.pk for c in claims)
    assert not ThreadClaim.objects.filter(ended_at__isnull=True).exists()
    assert set(ThreadClaim.objects.values_list("ended_by", flat=True)) == {"root"}
    event = Event.objects.get(kind=EventKind.INSTANCE_ENDED)
    assert (event.body["by"], event.body["instance"]) == ("root", "assistant")
    assert TrailRow.objects.filter(to_role="assistant", text__contains="instance ended by root")


def test_instance_end_by_human_is_not_found(human: Actor) -> None:
    """Only staff end instances; to anyone else the verb does not exist."""
    assert code_of(lambda: actions.end_instance(human, instance="assistant")) == refusals.NOT_FOUND


# --- R15 ---------------------------------------------------------------------------------


def test_task_create_from_human_request_is_stored(
    human: Actor, assistant_run: Actor, human_thread
) -> None:
    """R15: a task cites the human's `human.input` request of its thread."""
    claim = factories.claim(assistant_run, human_thread)
    request = Event.objects.get(kind=EventKind.HUMAN_INPUT)
    task = actions.create_task(assistant_run, claim_id=claim.pk, request_id=request.pk, title="do")
    assert task.request_id == request.pk
    assert Event.objects.get(kind=EventKind.TASK_CREATED).body["request"] == request.pk


def test_task_create_in_tester_thread_has_no_request_to_cite(
    assistant_run: Actor, tester_thread, human_thread
) -> None:
    """R15: a tester turn wrote no request; citing the human's request from another thread fails."""
    claim = factories.claim(assistant_run, tester_thread)
    assert Message.objects.get(thread=tester_thread).request_id is None
    human_request = Event.objects.get(kind=EventKind.HUMAN_INPUT)
    assert (
        code_of(
            lambda: actions.create_task(
                assistant_run, claim_id=claim.pk, request_id=human_request.pk, title="no"
            )
        )
        == refusals.INVALID
    )
    assert not Task.objects.exists()


def test_task_create_citing_other_event_kind_is_refused(assistant_run: Actor, human_thread) -> None:
    claim = factories.claim(assistant_run, human_thread)
    opened = Event.objects.get(kind=EventKind.CLAIM_OPENED)
    assert (
        code_of(
            lambda: actions.create_task(
                assistant_run, claim_id=claim.pk, request_id=opened.pk, title="no"
            )
        )
        == refusals.INVALID
    )


# --- R17 ---------------------------------------------------------------------------------


def test_notice_post_goes_to_human_thread_only(
    business: Business, human: Actor, human_thread, tester_thread
) -> None:
    """R17: a system notice lands in the human's thread; a tester thread's id is not found."""
    system = Actor.system(business_id=business.pk)
    notice = actions.post_notice(system, body="maintenance tonight")
    assert (notice.thread_id, notice.to_role, notice.message_class) == (
        human_thread.pk,
        "human",
        "NOTICE",
    )
    assert (
        code_of(lambda: actions.post_notice(system, body="x", thread_id=tester_thread.pk))
        == refusals.NOT_FOUND
    )
    assert notice.pk in [m.pk for m in selectors.messages_view(human).rows]


def test_notice_post_with_only_tester_threads_is_not_found(
    business: Business, tester_thread
) -> None:
    system = Actor.system(business_id=business.pk)
    assert code_of(lambda: actions.post_notice(system, body="x")) == refusals.NOT_FOUND
    assert not Message.objects.filter(message_class="NOTICE").exists()


# --- R19 ---------------------------------------------------------------------------------


def grant_cross_role(business: Business) -> None:
    RoleDefinition.objects.filter(business=business).update(cross_role=["human"])


def test_decision_create_by_assistant_without_authority_is_refused(
    assistant_run: Actor, human_thread
) -> None:
    """R19: the shipped assistant has no cross-role authority."""
    claim = factories.claim(assistant_run, human_thread)
    assert (
        code_of(lambda: actions.create_decision(assistant_run, claim_id=claim.pk, body="ship?"))
        == refusals.MESSAGE_RECIPIENT_REFUSED
    )


def test_decision_create_with_authority_reaches_human_inbox(
    business: Business, human: Actor, assistant_run: Actor, human_thread
) -> None:
    grant_cross_role(business)
    claim = factories.claim(assistant_run, human_thread)
    decision = actions.create_decision(assistant_run, claim_id=claim.pk, body="ship?")
    assert [d.pk for d in selectors.read_inbox(human)] == [decision.pk]


def test_decision_create_from_tester_thread_refuses_tester_thread_human(
    business: Business, human: Actor, assistant_run: Actor, tester_thread
) -> None:
    """R19: R11's guard lives in the messaging check, so it covers decisions as well."""
    grant_cross_role(business)
    claim = factories.claim(assistant_run, tester_thread)
    assert (
        code_of(lambda: actions.create_decision(assistant_run, claim_id=claim.pk, body="ship?"))
        == refusals.TESTER_THREAD_HUMAN
    )
    assert selectors.read_inbox(human) == []


# --- how a claim ended: a typed field beside the sentence -------------------------------------


def test_claim_end_by_run_records_how_and_sentence(assistant_run: Actor, human_thread) -> None:
    """A run's release is `done`, with the sentence for people beside it."""
    claim = factories.claim(assistant_run, human_thread)

    ended = actions.end_claim(assistant_run, claim_id=claim.pk)

    assert (ended.ended_how, ended.end_reason) == (ClaimEnd.DONE, "done")
    event = Event.objects.filter(kind=EventKind.CLAIM_ENDED).get()
    assert (event.body["how"], event.body["reason"]) == ("done", "done")


@pytest.mark.parametrize("how", [ClaimEnd.FAILED, ClaimEnd.SHUT_DOWN])
def test_claim_end_by_run_failed_or_shut_down_recorded(
    assistant_run: Actor, human_thread, how: ClaimEnd
) -> None:
    claim = factories.claim(assistant_run, human_thread)

    actions.end_claim(assistant_run, claim_id=claim.pk, how=how, reason="why, for people")

    assert ThreadClaim.objects.get(pk=claim.pk).ended_how == how


@pytest.mark.parametrize(
    "how", [ClaimEnd.STOPPED, ClaimEnd.INSTANCE_ENDED, ClaimEnd.LEASE_EXPIRED, "whatever"]
)
def test_claim_end_by_run_as_another_actors_end_refused_invalid(
    assistant_run: Actor, human_thread, how: str
) -> None:
    """A run cannot pass its own release off as a stop, an instance end or an expiry."""
    claim = factories.claim(assistant_run, human_thread)

    assert (
        code_of(lambda: actions.end_claim(assistant_run, claim_id=claim.pk, how=how))
        == refusals.INVALID
    )
    assert ThreadClaim.objects.get(pk=claim.pk).is_open


@pytest.mark.parametrize(
    ("who", "how"), [("human", ClaimEnd.STOPPED), ("staff", ClaimEnd.INSTANCE_ENDED)]
)
def test_stop_and_instance_end_record_how(
    request: pytest.FixtureRequest, assistant_run: Actor, human_thread, who: str, how: ClaimEnd
) -> None:
    """R13, R14: `assistant.stop` ends claims `stopped`, `instance.end` `instance-ended`."""
    claim = factories.claim(assistant_run, human_thread)
    actor: Actor = request.getfixturevalue(who)

    if who == "human":
        actions.stop_assistant(actor)
    else:
        actions.end_instance(actor, instance="assistant")

    assert ThreadClaim.objects.get(pk=claim.pk).ended_how == how


def test_claim_open_after_lease_ran_out_records_lease_expired(
    assistant_run: Actor, other_run: Actor, human_thread
) -> None:
    """SPEC §7: the expiry is typed `lease-expired`."""
    first = factories.claim(assistant_run, human_thread)
    ThreadClaim.objects.filter(pk=first.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    actions.open_claim(other_run, thread_id=human_thread.pk)

    assert ThreadClaim.objects.get(pk=first.pk).ended_how == ClaimEnd.LEASE_EXPIRED


def test_claim_open_has_no_how_until_it_ends(assistant_run: Actor, human_thread) -> None:
    """The database refuses an open claim with an end, or an ended one without (constraint)."""
    claim = factories.claim(assistant_run, human_thread)
    assert claim.ended_how == ""

    with pytest.raises(IntegrityError), transaction.atomic():
        ThreadClaim.objects.filter(pk=claim.pk).update(ended_how=ClaimEnd.DONE)
    with pytest.raises(IntegrityError), transaction.atomic():
        ThreadClaim.objects.filter(pk=claim.pk).update(ended_at=timezone.now())
