"""Field limits of SPEC §6: names and message bodies, checked once for every transport."""

from __future__ import annotations

import bisect
import re
import unicodedata

from django.conf import settings

from broker import refusals
from broker.refusals import Refusal

DEFAULT_LIMIT = 100
MAX_LIMIT = 500

# An id written as text (a path, a query, a command line): ASCII digits only, and few enough
# to fit the database's integers. `str.isdigit()` and `int()` also take "²", "٣" or "１", and
# `int()` takes "1_0", " 1" and "+1"; none of those is an id.
ID_DIGITS = "[0-9]{1,18}"
_ID = re.compile(ID_DIGITS)


# Characters that show nothing though they are neither whitespace nor format characters (Cf):
# the Hangul fillers and the blank Braille pattern. At either end of a name they are a space
# by another name ("launch\u3164" beside "launch").
FILLERS = frozenset("\u115f\u1160\u2800\u3164\uffa0")

# Unicode's Default_Ignorable_Code_Point property: the code points a renderer shows as nothing
# when it has no glyph for them (fillers, joiners, variation selectors, tags, the bidirectional
# controls, and unassigned code points kept for more of the same). Python's `unicodedata` does
# not carry the property, so its ranges are written here as Unicode 15.1's
# DerivedCoreProperties.txt lists them, adjacent lines merged: 4,174 code points.
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_IGNORABLE_STARTS = tuple(first for first, _ in DEFAULT_IGNORABLE)

# Unicode general categories: control, format, the line and paragraph separators, and the three
# kinds of combining mark.
_CONTROL = "Cc"
_FORMAT = "Cf"
# The categories no name may hold anywhere, as a sentence names them.
_UNSEEN_KINDS = {
    _CONTROL: "control characters",
    _FORMAT: "format characters",
    "Zl": "line separators",
    "Zp": "paragraph separators",
}
# What a sentence calls a default-ignorable character of no category above.
_IGNORABLE_KIND = "invisible characters"
_COMBINING_MARKS = frozenset({"Mn", "Mc", "Me"})


def default_ignorable(char: str) -> bool:
    """Whether `char` has Unicode's Default_Ignorable_Code_Point property."""
    code = ord(char)
    index = bisect.bisect_right(_IGNORABLE_STARTS, code) - 1
    return index >= 0 and code <= DEFAULT_IGNORABLE[index][1]


def _unseen_kind(char: str) -> str | None:
    """The kind of character, as a sentence names it in the plural, that no name may hold
    anywhere; None for any other."""
    kind = _UNSEEN_KINDS.get(unicodedata.category(char))
    if kind is None and default_ignorable(char):
        return _IGNORABLE_KIND
    return kind


def _shows_nothing(value: str) -> bool:
    """Only whitespace, format characters (zero-width ones among them), the fillers and the
    default-ignorable characters (variation selectors, the combining grapheme joiner …)."""
    return all(
        char.isspace()
        or char in FILLERS
        or default_ignorable(char)
        or unicodedata.category(char) == _FORMAT
        for char in value
    )


def _is_space(char: str) -> bool:
    """A space of any kind: whitespace (the no-break and ideographic spaces among them) or a
    filler that shows as one."""
    return char.isspace() or char in FILLERS


def character_label(char: str) -> str:
    """`U+200B ZERO WIDTH SPACE`: a character as a sentence can name it, whether or not it shows."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X} {name}" if name else f"U+{ord(char):04X}"


def name_problem(text: str, *, what: str) -> str | None:
    """Why `text` is no name a person could tell apart from another, as a sentence; None when
    it is one. The one rule for project and thread names (and the names of suites, cases and
    instances), read by every path that takes a name and by the start check of stored ones.

    A name people pick things by must look like what it is: no control or format characters
    (zero-width ones, the byte order mark and the bidirectional controls are all format
    characters, category Cf), no line or paragraph separator, no default-ignorable character
    (the Hangul fillers, variation selectors, the combining grapheme joiner, tags: each shows
    as nothing), no space of any kind at either end, no combining mark to start it (it would
    join whatever stands before the name), something visible, and in Unicode normal form C,
    so that one look is one name.
    """
    if not text or _shows_nothing(text):
        return f"The {what} must not be empty or invisible."
    for position, char in enumerate(text, start=1):
        kind = _unseen_kind(char)
        if kind is not None:
            return (
                f"The {what} must not contain {kind} such as "
                f"{character_label(char)} (character {position})."
            )
    if _is_space(text[0]):
        return f"The {what} must not start with a space ({character_label(text[0])})."
    if _is_space(text[-1]):
        return f"The {what} must not end with a space ({character_label(text[-1])})."
    if unicodedata.category(text[0]) in _COMBINING_MARKS:
        return f"The {what} must not start with a combining mark ({character_label(text[0])})."
    if not unicodedata.is_normalized("NFC", text):
        return f"The {what} must be in Unicode normal form C."
    return None


def normal_name(text: str) -> str:
    """`text` in Unicode normal form C, the form every name is stored and looked up in: "é"
    typed as one character or as "e" and a combining accent is one name."""
    return unicodedata.normalize("NFC", text)


def clean_text(value: object, *, what: str) -> str:
    """Any text a caller hands in — a name, a body, a username to look up: a string that every
    database can store and UTF-8 can carry. A lone surrogate ("\\ud800", or an undecodable byte
    of a command line) can be neither stored nor printed; PostgreSQL refuses NUL in text."""
    if not isinstance(value, str):
        raise Refusal(refusals.INVALID, f"The {what} must be a string.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Refusal(refusals.INVALID, f"The {what} must not contain lone surrogates.") from None
    if "\x00" in value:
        raise Refusal(refusals.INVALID, f"The {what} must not contain NUL characters.")
    return value


def clean_name(value: object, *, what: str, limit: int | None = None) -> str:
    """A project or thread name (or a name of another thing, with its own `limit`), in normal
    form C (`normal_name`), that `name_problem` finds nothing wrong with, and 1 to
    MOSAIC_NAME_MAX characters."""
    text = normal_name(clean_text(value, what=what))
    if limit is None:
        limit = settings.MOSAIC_NAME_MAX
    problem = name_problem(text, what=what)
    if problem is not None:
        raise Refusal(refusals.INVALID, problem)
    if len(text) > limit:
        raise Refusal(refusals.INVALID, f"The {what} must be at most {limit} characters.")
    return text


def clean_body(value: object) -> str:
    """A message body: 1 to MOSAIC_BODY_MAX characters, something visible among them, no NUL
    (line breaks and right-to-left text allowed)."""
    text = clean_text(value, what="message body")
    limit: int = settings.MOSAIC_BODY_MAX
    if len(text) > limit:
        raise Refusal(refusals.INVALID, f"The message body must be at most {limit} characters.")
    if _shows_nothing(text):
        raise Refusal(refusals.INVALID, "The message body must not be empty or invisible.")
    return text


# A thread's preview in the thread list: its newest message's body on one line, at most this
# many characters.
PREVIEW_MAX = 120
# How much of that body the thread list reads to make it (one character more tells that the
# body goes on): enough for PREVIEW_MAX characters unless it opens with long runs of spaces.
PREVIEW_READ = 2000


def one_line(text: str) -> str:
    """`text` with its whitespace collapsed to single spaces and cut to PREVIEW_MAX characters,
    "…" added when cut; a text longer than PREVIEW_READ counts as cut there."""
    line = " ".join(text[:PREVIEW_READ].split())
    if len(line) > PREVIEW_MAX:
        return line[:PREVIEW_MAX].rstrip() + "…"
    return line + "…" if len(text) > PREVIEW_READ else line


# A search hit's snippet (`snippet`): this many characters of the body before the first match,
# and at most this many from the match on.
SNIPPET_BEFORE = 40
SNIPPET_FROM = 120
# A search term's length, in characters.
SEARCH_MAX = 200


def clean_search(value: object) -> str:
    """A search term: 1 to SEARCH_MAX characters, not only whitespace, else `invalid`."""
    if not isinstance(value, str) or not value.strip():
        raise Refusal(refusals.INVALID, "Give a search term: 1 to 200 characters.")
    if len(value) > SEARCH_MAX:
        raise Refusal(refusals.INVALID, f"The search term is longer than {SEARCH_MAX} characters.")
    return value


def snippet(text: str, term: str) -> str:
    """The part of `text` around the first match of `term` (case ignored) on one line, "…"
    where it is cut; the start of `text` when the match is not found as the database found it
    (a letter whose upper case is longer, as "ß")."""
    found = re.search(re.escape(term), text, re.IGNORECASE)
    start = max(0, found.start() - SNIPPET_BEFORE) if found else 0
    end = (found.start() if found else 0) + SNIPPET_FROM
    if found and found.end() > end:
        end = found.end()
    part = " ".join(text[start:end].split())
    head = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    return f"{head}{part}{tail}"


def clean_limit(value: int | None) -> int:
    """A list's page size: default 100, between 1 and 500."""
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise Refusal(refusals.INVALID, f"The limit must be between 1 and {MAX_LIMIT}.")
    return value


def parse_id(text: object, *, what: str) -> int:
    """An id or cursor written as text: 1 to 18 ASCII digits (0 included), else `invalid`."""
    if not isinstance(text, str) or _ID.fullmatch(text) is None:
        raise Refusal(refusals.INVALID, f"The {what} must be an id: 1 to 18 digits 0-9.")
    return int(text)


def clean_cursor(value: int | None, *, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refusal(refusals.INVALID, f"The {what} cursor must be a non-negative id.")
    return value
