"""Field rules of `broker.fields`, for every channel: text UTF-8 can carry, names a reader can
trust, ids in ASCII digits (SPEC §6 `invalid`)."""

from __future__ import annotations

import pytest

from broker import actions, fields, refusals
from broker.actors import Actor
from broker.models import Event, Message, Project, Thread
from broker.refusals import Refusal
from tests.broker import factories

BIDI = [chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
# Names that show nothing: zero-width space, word joiner, byte order mark, soft hyphen,
# Hangul filler, a variation selector, and whitespace around a zero-width joiner.
INVISIBLE = ["\u200b", "\u2060\u200b", "\ufeff", "\u00ad", "\u3164", "\ufe0f", " \u200d\u3000"]


def code_of(call) -> str:
    with pytest.raises(Refusal) as refusal:
        call()
    return refusal.value.code


@pytest.mark.parametrize(
    "name",
    [
        "a\ud800",
        "\udcff",
        *(f"report{control}gpj.exe" for control in BIDI),
        *INVISIBLE,
    ],
)
def test_project_and_thread_create_name_refused_is_invalid_and_stores_nothing(
    human: Actor, tester: Actor, name: str
) -> None:
    """A lone surrogate, a bidirectional control, or nothing visible: `invalid`, nothing stored."""
    project = factories.project(human)
    assert code_of(lambda: actions.create_project(tester, name=name)) == refusals.INVALID
    assert (
        code_of(lambda: actions.create_thread(tester, project_id=project.pk, name=name))
        == refusals.INVALID
    )
    assert (Project.objects.count(), Thread.objects.count()) == (1, 0)


@pytest.mark.parametrize("name", ["שלום עולם", "مشروع", "👩\u200d💻 team", "نامه\u200cها"])
def test_project_create_right_to_left_and_joined_name_is_accepted(human: Actor, name: str) -> None:
    """Right-to-left scripts, and joiners inside a visible name, are ordinary names."""
    assert actions.create_project(human, name=name).name == name


@pytest.mark.parametrize("body", ["hi\ud800", "\udcff", *INVISIBLE])
def test_thread_send_body_surrogate_or_invisible_is_invalid_and_stores_nothing(
    human: Actor, body: str
) -> None:
    thread = factories.thread(human, factories.project(human), "t")
    events = Event.objects.count()
    assert (
        code_of(lambda: actions.send_to_thread(human, thread_id=thread.pk, body=body))
        == refusals.INVALID
    )
    assert (Message.objects.count(), Event.objects.count()) == (0, events)


@pytest.mark.parametrize("body", [f"quote: {control}עברית{control}" for control in BIDI])
def test_thread_send_body_with_bidirectional_controls_is_accepted(human: Actor, body: str) -> None:
    """Bodies are text, not names: mixed-direction text legitimately carries these controls."""
    thread = factories.thread(human, factories.project(human), "t")
    assert actions.send_to_thread(human, thread_id=thread.pk, body=body).message.body == body


@pytest.mark.parametrize("text", ["0", "7", "007", "9" * 18])
def test_parse_id_ascii_digits_is_the_number(text: str) -> None:
    assert fields.parse_id(text, what="id") == int(text)


@pytest.mark.parametrize(
    "text", ["", "²", "٣", "１", "1_0", "+1", "-1", " 1", "1 ", "1\n", "1.0", "9" * 19, None, 7]
)
def test_parse_id_anything_else_is_invalid(text: object) -> None:
    assert code_of(lambda: fields.parse_id(text, what="id")) == refusals.INVALID
