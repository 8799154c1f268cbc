"""Reads: cursors and limits (SPEC §6), search, the trail's scoping (R20), field limits."""

from __future__ import annotations

import pytest
from django.test import override_settings

from broker import actions, refusals, selectors
from broker.actors import Actor
from broker.models import Message, Project, Thread
from broker.refusals import Refusal
from tests.broker import factories


def code_of(call) -> str:
    with pytest.raises(Refusal) as refusal:
        call()
    return refusal.value.code


@pytest.fixture
def thread_with_ten(human: Actor):
    thread = factories.thread(human, factories.project(human), "long")
    ids = [
        actions.send_to_thread(human, thread_id=thread.pk, body=f"m{i}").message.pk
        for i in range(10)
    ]
    return thread, ids


def test_thread_messages_without_cursor_gives_newest_oldest_first(human: Actor, thread_with_ten):
    thread, ids = thread_with_ten
    rows = selectors.thread_messages(human, thread_id=thread.pk, limit=3)
    assert [m.pk for m in rows] == ids[-3:]


def test_thread_messages_after_gives_first_greater(human: Actor, thread_with_ten):
    thread, ids = thread_with_ten
    rows = selectors.thread_messages(human, thread_id=thread.pk, after=ids[2], limit=3)
    assert [m.pk for m in rows] == ids[3:6]


def test_thread_messages_before_gives_last_smaller(human: Actor, thread_with_ten):
    thread, ids = thread_with_ten
    rows = selectors.thread_messages(human, thread_id=thread.pk, before=ids[5], limit=2)
    assert [m.pk for m in rows] == ids[3:5]


@pytest.mark.parametrize(
    "kwargs",
    [{"limit": 0}, {"limit": 501}, {"limit": True}, {"after": -1}, {"after": 1, "before": 5}],
)
def test_thread_messages_bad_cursor_or_limit_is_invalid(human: Actor, thread_with_ten, kwargs):
    thread, _ = thread_with_ten
    assert (
        code_of(lambda: selectors.thread_messages(human, thread_id=thread.pk, **kwargs))
        == refusals.INVALID
    )


def test_thread_list_query_searches_own_names_and_messages_only(human: Actor, tester: Actor):
    """R3: the search runs over the actor's own threads; the tester's words never match."""
    project = factories.project(human)
    by_name = factories.thread(human, project, "Quarterly plan")
    by_text = factories.thread(human, project, "misc")
    actions.send_to_thread(human, thread_id=by_text.pk, body="the quarterly numbers")
    hidden = factories.thread(tester, project, "quarterly tester")
    actions.send_to_thread(tester, thread_id=hidden.pk, body="quarterly")
    found = selectors.list_threads(human, query="QUARTERLY")
    assert sorted(t.pk for t in found) == sorted([by_name.pk, by_text.pk])
    assert [t.pk for t in selectors.list_threads(tester, query="quarterly")] == [hidden.pk]


def test_thread_list_by_project_filters(human: Actor):
    first = factories.project(human, "one")
    second = factories.project(human, "two")
    factories.thread(human, first, "a")
    wanted = factories.thread(human, second, "b")
    assert [t.pk for t in selectors.list_threads(human, project_id=second.pk)] == [wanted.pk]


def test_project_list_shows_both_sides_projects(human: Actor, tester: Actor):
    """Projects belong to the business and are listed to both sides (SPEC §6)."""
    mine = factories.project(human, "human's")
    theirs = factories.project(tester, "tester's")
    for actor in (human, tester):
        assert [p.pk for p in selectors.list_projects(actor)] == [mine.pk, theirs.pk]
    assert theirs.created_by == "tester"


def test_trail_of_tester_holds_only_its_own_rows(human: Actor, tester: Actor):
    """R20: the tester's trail has its own thread's rows; the human's trail has both."""
    project = factories.project(human)
    human_thread = factories.thread(human, project, "h")
    tester_thread = factories.thread(tester, project, "t")
    actions.send_to_thread(human, thread_id=human_thread.pk, body="secret plan")
    actions.send_to_thread(tester, thread_id=tester_thread.pk, body="probe")
    assert [row.text for row in selectors.read_trail(tester)] == ["tester to assistant: probe"]
    assert [row.text for row in selectors.read_trail(human)] == [
        "human to assistant: secret plan",
        "tester to assistant: probe",
    ]


def test_trail_of_other_business_is_empty(human: Actor, other_human: Actor):
    thread = factories.thread(human, factories.project(human), "h")
    actions.send_to_thread(human, thread_id=thread.pk, body="ours")
    assert selectors.read_trail(other_human) == []


@pytest.mark.parametrize("name", ["", "   ", "a" * 201, "tab\there", "nul\x00", 7, None, ["list"]])
def test_project_create_bad_name_is_invalid(human: Actor, name: object) -> None:
    """SPEC §6 field limits: 1–200 characters, no control characters, a string."""
    assert code_of(lambda: actions.create_project(human, name=name)) == refusals.INVALID
    assert not Project.objects.exists()


def test_project_create_name_of_200_characters_is_accepted(human: Actor) -> None:
    assert actions.create_project(human, name="a" * 200).name == "a" * 200


def test_project_create_twice_refuses_project_exists(human: Actor, tester: Actor) -> None:
    actions.create_project(human, name="same")
    assert code_of(lambda: actions.create_project(tester, name="same")) == refusals.PROJECT_EXISTS


def test_thread_create_name_used_by_other_side_refuses_thread_exists(
    human: Actor, tester: Actor
) -> None:
    """R18, the accepted leak: the name is taken; nothing else about the thread is told."""
    project = factories.project(human)
    factories.thread(human, project, "taken")
    with pytest.raises(Refusal) as refusal:
        actions.create_thread(tester, project_id=project.pk, name="taken")
    assert refusal.value.code == refusals.THREAD_EXISTS
    assert "ada" not in refusal.value.detail
    assert Thread.objects.count() == 1


def test_thread_create_in_other_business_project_is_not_found(
    human: Actor, other_human: Actor
) -> None:
    project = factories.project(other_human)
    assert (
        code_of(lambda: actions.create_thread(human, project_id=project.pk, name="x"))
        == refusals.NOT_FOUND
    )


def test_thread_create_unknown_instance_is_not_found(human: Actor) -> None:
    project = factories.project(human)
    assert (
        code_of(
            lambda: actions.create_thread(human, project_id=project.pk, name="x", instance="nope")
        )
        == refusals.NOT_FOUND
    )


@pytest.mark.parametrize("body", ["", "  \n ", 12, None, "x\x00y"])
def test_thread_send_bad_body_is_invalid_and_stores_nothing(human: Actor, body: object) -> None:
    thread = factories.thread(human, factories.project(human), "t")
    assert (
        code_of(lambda: actions.send_to_thread(human, thread_id=thread.pk, body=body))
        == refusals.INVALID
    )
    assert not Message.objects.exists()


@override_settings(MOSAIC_BODY_MAX=10)
def test_thread_send_body_over_limit_is_invalid(human: Actor) -> None:
    thread = factories.thread(human, factories.project(human), "t")
    assert (
        code_of(lambda: actions.send_to_thread(human, thread_id=thread.pk, body="x" * 11))
        == refusals.INVALID
    )
    assert actions.send_to_thread(human, thread_id=thread.pk, body="x" * 10).message.pk
