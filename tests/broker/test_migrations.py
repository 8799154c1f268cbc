"""Data migrations: what the stored rows become (0005: how each claim ended; 0007: the reply
state of each stored turn)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from broker import actions
from broker.actors import Actor
from broker.models import ClaimEnd, ThreadClaim
from tests.broker import factories

CLAIM_ENDED_HOW = importlib.import_module("broker.migrations.0005_claim_ended_how")
BEFORE = ("broker", "0004_immutable_owner_and_business")
AFTER = ("broker", "0005_claim_ended_how")

# The sentences stored before the typed field, and the end each one becomes.
SENTENCES = [
    ("done", ClaimEnd.DONE),
    ("stopped by the human", ClaimEnd.STOPPED),
    ("stopped by the tester", ClaimEnd.STOPPED),
    ("instance ended by root", ClaimEnd.INSTANCE_ENDED),
    ("lease-expired", ClaimEnd.LEASE_EXPIRED),
    ("failed: reply refused (invalid)", ClaimEnd.FAILED),
    ("runner stopped", ClaimEnd.SHUT_DOWN),
    ("released early", ClaimEnd.DONE),
]


@pytest.mark.parametrize(("sentence", "how"), SENTENCES)
def test_ended_how_of_stored_sentence(sentence: str, how: ClaimEnd) -> None:
    assert CLAIM_ENDED_HOW.ended_how(sentence) == how


def migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target])


@pytest.fixture
def back_to_the_latest() -> object:
    """Whatever a test migrates to, the database ends at the latest migrations again."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_migrate_0005_maps_stored_claims(
    human: Actor, assistant_run: Actor, back_to_the_latest: None
) -> None:
    """Claims ended before the field existed get the end their sentence names; open ones none."""
    product = factories.project(human)
    ended = []
    for index, (sentence, _) in enumerate(SENTENCES):
        claim = factories.claim(assistant_run, factories.thread(human, product, f"t{index}"))
        ended.append(actions.end_claim(assistant_run, claim_id=claim.pk))
        ThreadClaim.objects.filter(pk=claim.pk).update(end_reason=sentence)
    still_open = factories.claim(assistant_run, factories.thread(human, product, "open"))

    migrate(BEFORE)
    migrate(AFTER)

    stored = dict(ThreadClaim.objects.values_list("pk", "ended_how"))
    assert [stored[claim.pk] for claim in ended] == [how for _, how in SENTENCES]
    assert stored[still_open.pk] == ""
    assert ThreadClaim.objects.get(pk=still_open.pk).ended_at is None


@pytest.mark.django_db(transaction=True)
def test_migrate_0007_writes_down_each_stored_turns_reply_state(
    human: Actor, assistant_run: Actor, back_to_the_latest: None
) -> None:
    """Turns answered or stopped before the lifecycle keep that state; the others are pending."""
    from broker.models import Message, TurnProgress

    product = factories.project(human)
    answered_thread, stopped_thread, waiting_thread = (
        factories.thread(human, product, name) for name in ("a", "s", "w")
    )
    answered = actions.send_to_thread(human, thread_id=answered_thread.pk, body="a").message
    claim = factories.claim(assistant_run, answered_thread)
    actions.send_message(
        assistant_run,
        to="human",
        message_class="RESULT",
        in_reply_to=answered.pk,
        claim_id=claim.pk,
        body="reply",
    )
    stopped = actions.send_to_thread(human, thread_id=stopped_thread.pk, body="s").message
    factories.claim(assistant_run, stopped_thread)
    actions.stop_assistant(human, thread_id=stopped_thread.pk)
    waiting = actions.send_to_thread(human, thread_id=waiting_thread.pk, body="w").message
    TurnProgress.objects.all().delete()

    migrate(("broker", "0006_thread_list_index"))
    migrate(("broker", "0007_turn_lifecycle"))

    # Read with the columns 0007 knows: later migrations are not applied yet.
    stored = Message.objects.select_related("progress").only("message_class", "progress__state")
    states = {turn: stored.get(pk=turn.pk).reply_state for turn in (answered, stopped, waiting)}
    assert states == {answered: "answered", stopped: "stopped", waiting: "pending"}


@pytest.mark.django_db(transaction=True)
def test_migrate_0009_labels_stored_trail_rows_by_their_fields(
    human: Actor, tester: Actor, assistant_run: Actor, back_to_the_latest: None
) -> None:
    """Rows stored before the trail had kinds get theirs from their stored fields (message,
    thread, the decisions and claims they name), and the name their thread has; messages
    stored before the channel was kept have none."""
    from broker.models import RoleDefinition, TrailRow

    RoleDefinition.objects.filter(name="assistant").update(cross_role=["human"])
    product = factories.project(human)
    thread = factories.thread(human, product, "work")
    probe = factories.thread(tester, product, "probe")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="hi").message
    claim = factories.claim(assistant_run, thread)
    actions.create_decision(assistant_run, claim_id=claim.pk, body="ship?")
    actions.end_claim(assistant_run, claim_id=claim.pk)
    actions.send_to_thread(tester, thread_id=probe.pk, body="probe")
    factories.claim(assistant_run, probe)
    actions.stop_assistant(tester)
    actions.end_instance(
        Actor.staff(business_id=human.business_id, username="root"), instance="assistant"
    )
    expected = list(TrailRow.objects.order_by("pk").values_list("kind", "thread_name"))

    migrate(("broker", "0008_instance_reply_settings"))
    migrate(("broker", "0009_inbox"))

    assert list(TrailRow.objects.order_by("pk").values_list("kind", "thread_name")) == expected
    assert [kind for kind, _ in expected] == [
        "message",
        "decision",
        "claim.ended",
        "message",
        "claim.ended",
        "instance.ended",
    ]
    assert TrailRow.objects.get(message=turn).via is None


@pytest.mark.django_db(transaction=True)
def test_migrate_0017_gives_stored_threads_their_last_activity(
    human: Actor, assistant_run: Actor, back_to_the_latest: None
) -> None:
    """Threads stored before the inbox's order get the time of their newest message, a reply
    included, or their creation when they have none; none is pinned."""
    from broker.models import Thread

    product = factories.project(human)
    talked, quiet = (factories.thread(human, product, name) for name in ("talked", "quiet"))
    turn = actions.send_to_thread(human, thread_id=talked.pk, body="hi").message
    answer = factories.reply(assistant_run, turn)

    migrate(("broker", "0016_threads_and_tasks_never_deleted"))
    migrate(("broker", "0017_thread_activity_and_pins"))

    # Only the columns 0017 knows: later migrations add others.
    columns = ("pk", "created_at", "active_at", "pinned_at")
    stored = {thread.pk: thread for thread in Thread.objects.only(*columns)}
    assert stored[talked.pk].active_at == answer.created_at
    assert stored[quiet.pk].active_at == stored[quiet.pk].created_at
    assert [thread.pinned for thread in stored.values()] == [False, False]


@pytest.mark.django_db(transaction=True)
def test_migrate_0018_adds_versions_and_branches_in_place_with_every_guard(
    human: Actor, assistant_run: Actor, back_to_the_latest: None
) -> None:
    """R24's columns are added to the stored rows, none a version or a branch, back and forth;
    every guard is there after each way, the branch's own once its columns are."""
    from broker import guards
    from broker.models import Message, Thread

    talked = factories.thread(human, factories.project(human), "talked")
    turn = actions.send_to_thread(human, thread_id=talked.pk, body="hi").message
    factories.reply(assistant_run, turn)

    migrate(("broker", "0017_thread_activity_and_pins"))
    assert [name for name in guards.missing(connection) if "keeps_branch" not in name] == []
    migrate(("broker", "0018_versions_and_branches"))

    assert guards.missing(connection) == []
    assert list(Message.objects.values_list("version_of", flat=True)) == [None, None]
    assert list(Thread.objects.values_list("branched_from", "branched_at")) == [(None, None)]


def plain_case(tester: Actor, run_id: int) -> Any:
    """A case recorded in run `run_id` with nothing but its verdict, as a client before
    statistics and costs recorded one."""
    from broker.actions import suite_runs

    return suite_runs.record_suite_case(
        tester,
        run_id=run_id,
        suite="smoke",
        case="greets",
        instance="",
        verdict="pass",
        passed_runs=1,
        runs=1,
    )


@pytest.mark.django_db(transaction=True)
def test_migrate_0019_keeps_stored_runs_comparable_with_every_guard(
    tester: Actor, back_to_the_latest: None
) -> None:
    """Runs stored before their end was typed: an ended one `finished` (a run was ended only
    after its last case), a running one running, each active since its newest case or its
    start; their cases keep their change and have no statistics. Back and forth, every guard
    is there after each way."""
    from broker import guards
    from broker.actions import suite_runs
    from broker.models import SuiteCase, SuiteRun

    ended = suite_runs.start_suite_run(tester, suites=["smoke"])
    case = plain_case(tester, ended.pk)
    suite_runs.end_suite_run(tester, run_id=ended.pk)
    running = suite_runs.start_suite_run(tester, suites=["smoke"])

    migrate(("broker", "0018_versions_and_branches"))
    assert guards.missing(connection) == []
    migrate(("broker", "0019_suite_run_baselines_and_statistics"))

    assert guards.missing(connection) == []
    stored = {run.pk: run for run in SuiteRun.objects.all()}
    assert (stored[ended.pk].state, stored[ended.pk].end_reason) == ("finished", "")
    # Read column by column: the model has the columns of migrations after this one too.
    cases = SuiteCase.objects.filter(pk=case.pk)
    assert stored[ended.pk].active_at == cases.values_list("created_at", flat=True).get()
    assert (stored[running.pk].state, stored[running.pk].active_at) == (
        "running",
        stored[running.pk].started_at,
    )
    assert (stored[ended.pk].alpha, stored[ended.pk].instances, stored[ended.pk].keyword) == (
        0.05,
        [],
        "",
    )
    kept = cases.values_list("change", "pass_rate", "definition_hash", "p_value").get()
    assert kept == ("new", None, "", None)


@pytest.mark.django_db(transaction=True)
def test_migrate_0020_gives_stored_cases_no_cost_with_every_guard(
    tester: Actor, back_to_the_latest: None
) -> None:
    """A case stored before costs has none (its cost is unknown, not zero), and its run counts
    it among the cases without one. Back and forth, every guard is there after each way."""
    from broker import guards
    from broker.actions import suite_runs
    from broker.models import SuiteCase

    run = suite_runs.start_suite_run(tester, suites=["smoke"])
    case = plain_case(tester, run.pk)

    migrate(("broker", "0019_suite_run_baselines_and_statistics"))
    assert guards.missing(connection) == []
    migrate(("broker", "0020_suite_case_costs"))

    assert guards.missing(connection) == []
    assert SuiteCase.objects.get(pk=case.pk).cost is None
    cost = suite_runs.read_suite_run(tester, run_id=run.pk).run.cost
    assert (cost["amount"], cost["turns"], cost["cases_without_cost"]) == (None, 0, 1)
