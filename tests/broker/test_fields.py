"""Field rules of `broker.fields`, for every channel: text UTF-8 can carry, names a reader can
trust, ids in ASCII digits (SPEC §6 `invalid`)."""

from __future__ import annotations

import pytest

from broker import actions, fields, refusals
from broker.actors import Actor
from broker.models import Event, Message, Project, Thread
from broker.refusals import Refusal
from tests.broker import factories
from tests.support.names import REFUSED_NAMES

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
        *(name for name, _ in REFUSED_NAMES.values()),
    ],
)
def test_project_and_thread_create_name_refused_is_invalid_and_stores_nothing(
    human: Actor, tester: Actor, name: str
) -> None:
    """A lone surrogate, nothing visible, and the name rule: a format character anywhere (the
    bidirectional controls among them), a space at an end, a combining mark first — `invalid`,
    nothing stored, from either side."""
    project = factories.project(human)
    assert code_of(lambda: actions.create_project(tester, name=name)) == refusals.INVALID
    assert code_of(lambda: actions.create_project(human, name=name)) == refusals.INVALID
    assert (
        code_of(lambda: actions.create_thread(tester, project_id=project.pk, name=name))
        == refusals.INVALID
    )
    assert (Project.objects.count(), Thread.objects.count()) == (1, 0)


@pytest.mark.parametrize("name", ["שלום עולם", "مشروع", "नमस्ते", "❤\ufe0f team", "Ａ１"])
def test_project_create_right_to_left_marked_and_emoji_name_is_accepted(
    human: Actor, name: str
) -> None:
    """Right-to-left scripts, combining marks after a letter, and an emoji's variation
    selector are ordinary names."""
    assert actions.create_project(human, name=name).name == name


def test_name_problem_names_the_format_character_and_its_position() -> None:
    problem = fields.name_problem("launch\u200b", what="project name")
    assert problem is not None
    assert "U+200B ZERO WIDTH SPACE" in problem
    assert "character 7" in problem


@pytest.mark.parametrize(("name", "code_point"), REFUSED_NAMES.values(), ids=REFUSED_NAMES.keys())
def test_name_problem_names_the_character_it_refuses(name: str, code_point: str) -> None:
    problem = fields.name_problem(name, what="thread name")
    assert problem is not None and f"{code_point} " in problem


def test_name_problem_of_a_name_not_in_normal_form_c() -> None:
    """Stored names are judged as they are: one written decomposed is reported."""
    assert fields.name_problem("Cafe\u0301", what="project name") is not None
    assert fields.name_problem("Caf\u00e9", what="project name") is None


def test_project_and_thread_names_are_stored_in_normal_form_c(human: Actor) -> None:
    """ "é" as one character or as "e" and a combining accent is one name, stored composed; the
    second spelling finds the first taken."""
    project = actions.create_project(human, name="Cafe\u0301")
    assert project.name == "Caf\u00e9"
    assert code_of(lambda: actions.create_project(human, name="Caf\u00e9")) == (
        refusals.PROJECT_EXISTS
    )
    thread = actions.create_thread(human, project_id=project.pk, name="Ångstro\u0308m")
    assert thread.name == "\u00c5ngstr\u00f6m"
    renamed = actions.rename_thread(human, thread_id=thread.pk, name="re\u0301sume\u0301")
    assert renamed.name == "r\u00e9sum\u00e9"


def test_name_normal_form_c_counts_toward_the_limit(human: Actor, settings) -> None:
    """The limit is of the stored (composed) name: 200 decomposed "é"s are 200 characters."""
    settings.MOSAIC_NAME_MAX = 200
    assert len(actions.create_project(human, name="e\u0301" * 200).name) == 200


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
