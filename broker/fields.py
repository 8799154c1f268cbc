"""Field limits of SPEC §6: names and message bodies, checked once for every transport."""

from __future__ import annotations

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


# Bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069). In a name
# they reorder what a reader sees ("report\u202egpj.exe" shows as "reportexe.jpg"), and names
# are what people pick threads and projects by.
BIDI_CONTROLS = frozenset(chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))
# Characters that show nothing though they are neither whitespace nor format characters (Cf):
# the combining grapheme joiner, Hangul and Khmer fillers, the blank Braille pattern and the
# variation selectors.
_BLANK = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0"
    + "".join(chr(code) for code in range(0xFE00, 0xFE10))
)


def _has_control_characters(value: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in value)


def _shows_nothing(value: str) -> bool:
    """Only whitespace, format characters (zero-width ones among them) and blanks."""
    return all(
        char.isspace() or char in _BLANK or unicodedata.category(char) == "Cf" for char in value
    )


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
    """A project or thread name: 1 to MOSAIC_NAME_MAX characters (or `limit`, for names of
    other things), something visible among them, no control characters and no bidirectional
    controls."""
    text = clean_text(value, what=what)
    if limit is None:
        limit = settings.MOSAIC_NAME_MAX
    if _shows_nothing(text):
        raise Refusal(refusals.INVALID, f"The {what} must not be empty or invisible.")
    if len(text) > limit:
        raise Refusal(refusals.INVALID, f"The {what} must be at most {limit} characters.")
    if _has_control_characters(text):
        raise Refusal(refusals.INVALID, f"The {what} must not contain control characters.")
    if not BIDI_CONTROLS.isdisjoint(text):
        raise Refusal(refusals.INVALID, f"The {what} must not contain bidirectional controls.")
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
