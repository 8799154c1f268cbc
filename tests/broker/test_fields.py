"""Field rules of `broker.fields`, for every channel: text UTF-8 can carry, names a reader can
trust, ids in ASCII digits (SPEC §6 `invalid`)."""

from __future__ import annotations

import itertools
import unicodedata

import pytest

from broker import actions, fields, refusals
from broker.actors import Actor
from broker.models import Event, Message, Project, Thread
from broker.refusals import Refusal
from tests.broker import factories
from tests.support.names import REFUSED_NAMES

BIDI = [chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]
# Names that show nothing: zero-width space, word joiner, byte order mark, soft hyphen,
# Hangul filler, variation selectors, the combining grapheme joiner, a Mongolian free variation
# selector, and whitespace around a zero-width joiner.
INVISIBLE = [
    "\u200b",
    "\u2060\u200b",
    "\ufeff",
    "\u00ad",
    "\u3164",
    "\ufe0f",
    "\U000e0100",
    "\u034f",
    "\u180b",
    " \u200d\u3000",
]


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


ORDINARY_NAMES = [
    "שלום עולם",
    "مشروع",
    "नमस्ते",
    "Ａ１",
    "Café crème",
    "東京の計画",
    "한국어 프로젝트",
    "❤ team",
    "🚀 launch",
    "👍🏽 thumbs",
    "🇫🇷 France",
]


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_project_create_right_to_left_marked_cjk_and_emoji_name_is_accepted(
    human: Actor, name: str
) -> None:
    """Right-to-left scripts, combining marks after a letter, accents, CJK and Hangul, and
    emoji (a skin tone and a flag among them) are ordinary names."""
    assert fields.name_problem(name, what="project name") is None
    assert actions.create_project(human, name=name).name == name


# Characters that show as nothing and are no format character: the default-ignorable ones of
# other categories (a grapheme joiner, Hangul fillers, Khmer inherent vowels, a Mongolian free
# variation selector, variation selectors), and the line and paragraph separators.
INVISIBLE_INSIDE = {
    "combining grapheme joiner": "\u034f",
    "Hangul choseong filler": "\u115f",
    "Hangul filler": "\u3164",
    "halfwidth Hangul filler": "\uffa0",
    "Khmer vowel inherent aq": "\u17b4",
    "Mongolian free variation selector one": "\u180b",
    "variation selector-16": "\ufe0f",
    "variation selector-17": "\U000e0100",
    "line separator": "\u2028",
    "paragraph separator": "\u2029",
}


@pytest.mark.parametrize("char", INVISIBLE_INSIDE.values(), ids=INVISIBLE_INSIDE.keys())
def test_project_and_thread_name_with_invisible_character_inside_is_invalid_naming_it(
    human: Actor, char: str
) -> None:
    """Inside a visible name too, a character that shows as nothing is refused (`invalid`),
    and the sentence names it and where it stands; nothing is stored."""
    project = factories.project(human)
    name = f"la{char}unch"
    for create in (
        lambda: actions.create_project(human, name=name),
        lambda: actions.create_thread(human, project_id=project.pk, name=name),
    ):
        with pytest.raises(Refusal) as refusal:
            create()
        assert refusal.value.code == refusals.INVALID
        assert f"U+{ord(char):04X} " in refusal.value.detail
        assert "(character 3)" in refusal.value.detail
    assert (Project.objects.count(), Thread.objects.count()) == (1, 0)


def test_emoji_with_variation_selector_is_refused_and_without_it_accepted(human: Actor) -> None:
    """An emoji's variation selector is invisible like any other: "❤\ufe0f team" would sit
    beside "❤ team" under the same look. The emoji alone is the name."""
    problem = fields.name_problem("❤\ufe0f team", what="project name")
    assert problem is not None and "U+FE0F VARIATION SELECTOR-16" in problem
    assert fields.name_problem("❤ team", what="project name") is None


def ignorable_code_points() -> list[int]:
    return [code for first, last in fields.DEFAULT_IGNORABLE for code in range(first, last + 1)]


def test_default_ignorable_table_is_unicodes_property() -> None:
    """The table holds Unicode's Default_Ignorable_Code_Point: 4,174 code points, in ranges
    sorted and apart; what Python's own tables say of them is format characters, marks that
    show nothing, the Hangul fillers (letters by category) and unassigned code points."""
    assert len(ignorable_code_points()) == 4174
    for (_, last), (first, _) in itertools.pairwise(fields.DEFAULT_IGNORABLE):
        assert last + 1 < first
    assert {unicodedata.category(chr(code)) for code in ignorable_code_points()} == {
        "Cf",
        "Mn",
        "Lo",
        "Cn",
    }


def test_every_default_ignorable_code_point_is_refused_inside_a_name() -> None:
    """By property, not by a list of the ones found: each of the 4,174, the unassigned ones
    too, is refused inside a visible name and named by its code point."""
    for code in ignorable_code_points():
        problem = fields.name_problem(f"la{chr(code)}unch", what="thread name")
        assert problem is not None and f"U+{code:04X}" in problem, hex(code)


# The table's edges from the outside: each shows, and passes.
@pytest.mark.parametrize(
    "code",
    [0x00AC, 0x00AE, 0x115E, 0x17B3, 0x17B6, 0x3163, 0x3165, 0xFE10, 0xFF9F, 0xFFA1],
    ids=lambda code: f"U+{code:04X}",
)
def test_character_beside_a_default_ignorable_range_is_accepted(code: int) -> None:
    assert not fields.default_ignorable(chr(code))
    assert fields.name_problem(f"la{chr(code)}unch", what="thread name") is None


# The table's edges from the inside, and the code points between them.
@pytest.mark.parametrize(
    "code",
    [
        0x061C,
        0x1160,
        0x17B5,
        0x180E,
        0x180F,
        0x2065,
        0x206F,
        0xFE00,
        0xFFF0,
        0xFFF8,
        0x1BCA0,
        0x1BCA3,
        0x1D173,
        0x1D17A,
        0xE0000,
        0xE0001,
        0xE007F,
        0xE01EF,
        0xE0FFF,
    ],
    ids=lambda code: f"U+{code:04X}",
)
def test_default_ignorable_edge_is_refused_naming_it(code: int) -> None:
    assert fields.default_ignorable(chr(code))
    problem = fields.name_problem(f"la{chr(code)}unch", what="project name")
    assert problem is not None and f"U+{code:04X}" in problem


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
