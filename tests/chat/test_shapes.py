"""The output shapes' planned reading writes what DRF's field-by-field reading writes (SPEC §6).

`Shape.to_representation` is planned once per shape for speed; these tests hold it to DRF's
own `Serializer.to_representation` for every shape, on rows of every kind a page can carry.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers

from broker import actions
from broker.actors import Actor
from broker.models import Decision, Message, MessageClass, ThreadOpen, TrailRow
from broker.replies import ReplyRecord
from chat.api import shapes
from tests.broker import factories


def drf_reading(shape: type[shapes.Shape[Any]], instance: Any) -> dict[str, Any]:
    return dict(serializers.Serializer.to_representation(shape(), instance))


@pytest.fixture
def rows(human: Actor, tester: Actor, assistant_run: Actor) -> list[tuple[type[Any], Any]]:
    project = factories.project(human)
    thread = factories.thread(human, project, "work")
    answered = actions.send_to_thread(human, thread_id=thread.pk, body="answer me").message
    claim = factories.claim(assistant_run, thread)
    actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=answered.pk)
    actions.send_message(
        assistant_run,
        to="human",
        body="an answer, cut",
        message_class=MessageClass.RESULT,
        in_reply_to=answered.pk,
        claim_id=claim.pk,
        record=ReplyRecord(
            model="small-1",
            finish_reason="length",
            prompt_tokens=12,
            completion_tokens=3,
            first_token_ms=40,
        ),
    )
    waiting = actions.send_to_thread(human, thread_id=thread.pk, body="and again").message
    actions.start_turn(assistant_run, claim_id=claim.pk, turn_id=waiting.pk)
    actions.fail_turn(
        assistant_run,
        claim_id=claim.pk,
        turn_id=waiting.pk,
        failure="The model server is busy.",
        transient=True,
    )
    tester_thread = factories.thread(tester, project, "checks")
    actions.send_to_thread(tester, thread_id=tester_thread.pk, body="tester turn")
    actions.open_thread(human, thread_id=thread.pk)
    return [
        (shapes.ProjectOut, project),
        (shapes.ThreadOut, thread),
        (shapes.ThreadOut, tester_thread),
        *((shapes.MessageOut, message) for message in Message.objects.all()),
        *((shapes.TrailRowOut, row) for row in TrailRow.objects.all()),
        *((shapes.OpenOut, opened) for opened in ThreadOpen.objects.all()),
        *((shapes.DecisionOut, decision) for decision in Decision.objects.all()),
    ]


def test_planned_reading_equals_drf_reading_for_every_row(rows) -> None:
    """Every shape, every kind of row: answered, cut off with usage, retrying, tester, trail."""
    kinds = {shape for shape, _ in rows}
    assert {shapes.ProjectOut, shapes.ThreadOut, shapes.MessageOut, shapes.TrailRowOut} <= kinds
    for shape, instance in rows:
        assert shape(instance).data == drf_reading(shape, instance), (shape.__name__, instance)


def test_planned_reading_covers_the_fields_that_matter(rows) -> None:
    """The comparison above is not vacuous: the rows carry usage, a retry time and a failure."""
    shown = [shapes.MessageOut(m).data for shape, m in rows if shape is shapes.MessageOut]
    assert any(m["usage"] == {"prompt_tokens": 12, "completion_tokens": 3} for m in shown)
    assert any(m["reply_state"] == "retrying" and m["retry_at"] for m in shown)
    assert any(m["failure"] == "The model server is busy." for m in shown)
    assert any(m["class"] == "RESULT" and m["finish_reason"] == "length" for m in shown)


def test_times_are_written_in_utc_whatever_the_current_time_zone(rows) -> None:
    """SPEC §6: times are ISO 8601 UTC — what DRF writes under the settings' zone, also when
    code runs with another zone active."""
    shape, instance = next((s, i) for s, i in rows if s is shapes.MessageOut)
    expected = drf_reading(shape, instance)
    with timezone.override("Europe/Paris"):
        shown = shape(instance).data
    assert shown == expected
    assert shown["created_at"].endswith("Z")


def test_a_page_is_planned_once_per_shape(rows) -> None:
    """Pages and single rows share one plan per shape, which keeps no row."""
    messages = [m for shape, m in rows if shape is shapes.MessageOut]
    page = shapes.MessageOut(messages, many=True).data
    assert [m["id"] for m in page] == [m.pk for m in messages]
    plan = shapes.Shape._plans[shapes.MessageOut]
    assert len(plan) == len(shapes.MessageOut().fields)
    single = shapes.MessageOut(messages[0]).data
    assert single["id"] == messages[0].pk
    assert shapes.Shape._plans[shapes.MessageOut] is plan
