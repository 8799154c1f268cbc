"""`access_*` edges: which claim and which message a call reaches (SPEC §7, R12), the `@verb`
declaration (R22), and the contract of every refusal (SPEC §6)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction

from broker import access, actions, policy, refusals, selectors
from broker.actors import Actor, ActorKind
from broker.models import Business, Instance, Message, MessageClass, RoleDefinition
from broker.refusals import Refusal
from tests.broker import factories
from tests.support.businesses import make_business


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


def test_verb_declared_twice_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """A verb's name is declared once: a second declaration raises, and the first stands."""
    monkeypatch.setattr(access, "VERBS", {})

    @access.verb("probe.echo", ActorKind.HUMAN)
    def echo(actor: Actor) -> str:
        return actor.role

    with pytest.raises(ValueError, match="declared twice"):
        access.verb("probe.echo", ActorKind.HUMAN, ActorKind.TESTER)
    assert {"probe.echo": frozenset({ActorKind.HUMAN})} == access.VERBS


@pytest.fixture
def fresh_verbs(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty verb table, whose tester list names only `probe.read` and `probe.opened`."""
    monkeypatch.setattr(access, "VERBS", {})
    monkeypatch.setattr(access, "COUNTS_AS", {})
    monkeypatch.setattr(access, "_SWITCH_IN_READ", set())
    monkeypatch.setattr(policy, "TESTER_VERBS", frozenset({"probe.read", "probe.opened"}))


@pytest.mark.usefixtures("fresh_verbs")
def test_verb_counted_as_another_is_allowed_refused_and_logged_as_it(
    business: Business, human: Actor, tester: Actor, caplog: pytest.LogCaptureFixture
) -> None:
    """R22: a verb declared `counts_as` another serves that verb's kinds and is decided as
    it: the tester's list need not name it, and its refusals are logged under that verb."""
    caplog.set_level(logging.INFO, logger="mosaic.security")
    access.verb("probe.read", ActorKind.HUMAN, ActorKind.TESTER)(lambda actor: None)

    @access.verb("probe.peek", counts_as="probe.read")
    def peek(actor: Actor) -> str:
        return actor.role

    assert access.VERBS["probe.peek"] == frozenset({ActorKind.HUMAN, ActorKind.TESTER})
    assert access.COUNTS_AS == {"probe.peek": "probe.read"}
    assert (peek(human), peek(tester)) == ("human", "tester")
    staff = Actor.staff(business_id=business.pk, username="root")
    assert refusal_code(lambda: peek(staff)) == refusals.NOT_FOUND
    business.tester_enabled = False
    business.save()
    assert refusal_code(lambda: peek(tester)) == refusals.TESTER_OFF
    lines = [r.getMessage() for r in caplog.records if r.name == "mosaic.security"]
    assert [line.split(" code=")[0] for line in lines] == ["refused verb=probe.read"] * 2


@pytest.mark.usefixtures("fresh_verbs")
def test_verb_counted_as_one_whose_read_checks_the_switch_leaves_it_to_its_read(
    business: Business, tester: Actor
) -> None:
    """A verb counted as a `switch_in_read` verb costs no switch read either: its own read
    refuses the tester while it is off."""
    access.verb("probe.opened", ActorKind.TESTER, switch_in_read=True)(lambda actor: None)

    @access.verb("probe.glance", counts_as="probe.opened")
    def glance(actor: Actor) -> str:
        return actor.role

    business.tester_enabled = False
    business.save()
    assert glance(tester) == "tester"


@pytest.mark.usefixtures("fresh_verbs")
@pytest.mark.parametrize(
    ("kinds", "switch_in_read", "counts_as"),
    [
        ((), False, "probe.unknown"),
        ((ActorKind.HUMAN,), False, "probe.read"),
        ((), True, "probe.read"),
        ((), False, "probe.peek"),
    ],
    ids=["unknown", "own-kinds", "own-switch", "chained"],
)
def test_verb_counted_as_another_takes_everything_from_it(
    kinds: tuple[ActorKind, ...], switch_in_read: bool, counts_as: str
) -> None:
    """`counts_as` names a verb declared before, itself no alias, and nothing else: the kinds
    and the switch are that verb's."""
    access.verb("probe.read", ActorKind.HUMAN)(lambda actor: None)
    access.verb("probe.peek", counts_as="probe.read")(lambda actor: None)
    with pytest.raises(ValueError, match="counts as"):
        access.verb("probe.other", *kinds, switch_in_read=switch_in_read, counts_as=counts_as)
    assert "probe.other" not in access.VERBS


# --- the refusals of the actor builders and the owner check (SPEC §6) --------------------


def test_access_human_actor_of_a_user_who_is_no_human_is_not_authenticated(business) -> None:
    """L2: a signed-in user who is not the human of a business is not signed in here."""
    assert (
        refusal_code(lambda: access.access_human_actor(username="mallory"))
        == refusals.NOT_AUTHENTICATED
    )


def test_access_human_actor_of_no_user_is_not_authenticated_without_a_query(
    business, django_assert_num_queries
) -> None:
    """L2: a request with no signed-in user is refused before the database is asked: an
    anonymous probe of the human listener costs no query."""
    with django_assert_num_queries(0):
        code = refusal_code(lambda: access.access_human_actor(username=""))
    assert code == refusals.NOT_AUTHENTICATED


def test_access_tester_actor_of_an_unknown_business_is_not_found(business) -> None:
    """L5: the tester listener configured for a business that does not exist serves nobody."""
    assert (
        refusal_code(lambda: access.access_tester_actor(business_slug="nowhere"))
        == refusals.NOT_FOUND
    )


def test_access_tester_actor_while_the_tester_is_off_is_tester_off(db: None) -> None:
    """L5: no tester actor is built while the business has the tester off."""
    make_business("quiet", human="grace", tester_enabled=False)
    assert (
        refusal_code(lambda: access.access_tester_actor(business_slug="quiet"))
        == refusals.TESTER_OFF
    )


def test_tester_verb_while_its_own_business_has_the_tester_off_is_tester_off(
    business: Business,
) -> None:
    """The tester switch is the tester's own business's: another business with the tester on
    lets nothing through."""
    quiet = make_business("quiet", human="grace", tester_enabled=False)
    assert business.tester_enabled
    tester_of_quiet = Actor.tester(business_id=quiet.pk)
    assert (
        refusal_code(lambda: actions.create_project(tester_of_quiet, name="p"))
        == refusals.TESTER_OFF
    )


def test_tester_reading_a_trail_with_its_own_rows_while_off_is_tester_off(
    business: Business, tester: Actor
) -> None:
    """The trail's read (R20) checks the switch in its own query: rows the tester could read
    while on are not read once it is off, and the read is refused `tester-off` (SPEC §5, the
    listeners' `enabled` row), not answered empty."""
    thread = factories.thread(tester, factories.project(tester), "tester work")
    actions.send_to_thread(tester, thread_id=thread.pk, body="mine")
    assert selectors.read_trail(tester)
    business.tester_enabled = False
    business.save()
    for read in (
        lambda: selectors.read_trail(tester),
        lambda: selectors.read_trail(tester, after=0),
        lambda: selectors.read_trail(tester, before=10**9),
    ):
        assert refusal_code(read) == refusals.TESTER_OFF


def test_access_thread_of_the_other_side_is_thread_not_owned(human: Actor, tester: Actor) -> None:
    """R1: within the business, the tester's thread is not the human's (`thread-not-owned`)."""
    theirs = factories.thread(tester, factories.project(tester), "tester work")
    assert (
        refusal_code(lambda: access.access_thread(human, thread_id=theirs.pk))
        == refusals.THREAD_NOT_OWNED
    )


def test_access_instance_by_an_unknown_name_is_not_found(human: Actor) -> None:
    """An address that names no instance of the business reaches nothing."""
    assert refusal_code(lambda: access.access_instance(human, name="nobody")) == refusals.NOT_FOUND


def test_owner_of_an_assistant_run_is_refused_not_found(assistant_run: Actor) -> None:
    """R1: only the human and the tester own threads; a run owns none."""
    assert refusal_code(lambda: policy.owner(assistant_run)) == refusals.NOT_FOUND


# --- what an access reads with its record -------------------------------------------------


def test_access_thread_loads_instance_lists_and_holder_in_one_query(
    human: Actor, human_thread, assistant_run: Actor, django_assert_num_queries: Any
) -> None:
    """What a turn decides on comes with the owner check's one read: the thread, its
    instance's role lists (R8) and the run holding the thread's open claim."""
    with django_assert_num_queries(1):
        found = access.access_thread(human, thread_id=human_thread.pk)
        assert (found.pk, found.owner, found.project_id) == (
            human_thread.pk,
            "ada",
            human_thread.project_id,
        )
        assert found.created_at == human_thread.created_at
        assert found.instance.name == "assistant"
        assert found.instance.role.name == "assistant"
        assert access.lists_of(found.instance).receive_from == {"human"}
        assert found.holder == ""
    claim = actions.open_claim(assistant_run, thread_id=human_thread.pk)
    assert claim is not None
    assert access.access_thread(human, thread_id=human_thread.pk).holder == "run-1"


def test_roles_of_reads_every_instance_and_its_role_in_one_query(
    business: Business, planner_run: Actor, django_assert_num_queries: Any
) -> None:
    """R8–R11: the messaging check reads the lists of every instance in one query."""
    with django_assert_num_queries(1):
        roles = access.roles_of(business.pk)
    assert set(roles) == {"assistant", "planner"}
