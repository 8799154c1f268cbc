"""Field limits of SPEC §6: names and message bodies, checked once for every transport."""

from __future__ import annotations

import unicodedata

from django.conf import settings

from broker import refusals
from broker.refusals import Refusal

DEFAULT_LIMIT = 100
MAX_LIMIT = 500


def _has_control_characters(value: str) -> bool:
    return any(unicodedata.category(char) == "Cc" for char in value)


def clean_name(value: object, *, what: str) -> str:
    """A project or thread name: a string of 1 to MOSAIC_NAME_MAX characters, no control ones."""
    if not isinstance(value, str):
        raise Refusal(refusals.INVALID, f"The {what} must be a string.")
    limit: int = settings.MOSAIC_NAME_MAX
    if not value.strip():
        raise Refusal(refusals.INVALID, f"The {what} must not be empty.")
    if len(value) > limit:
        raise Refusal(refusals.INVALID, f"The {what} must be at most {limit} characters.")
    if _has_control_characters(value):
        raise Refusal(refusals.INVALID, f"The {what} must not contain control characters.")
    return value


def clean_body(value: object) -> str:
    """A message body: a string of 1 to MOSAIC_BODY_MAX characters (line breaks allowed)."""
    if not isinstance(value, str):
        raise Refusal(refusals.INVALID, "The message body must be a string.")
    limit: int = settings.MOSAIC_BODY_MAX
    if not value.strip():
        raise Refusal(refusals.INVALID, "The message body must not be empty.")
    if len(value) > limit:
        raise Refusal(refusals.INVALID, f"The message body must be at most {limit} characters.")
    if "\x00" in value:
        raise Refusal(refusals.INVALID, "The message body must not contain NUL characters.")
    return value


def clean_limit(value: int | None) -> int:
    """A list's page size: default 100, between 1 and 500."""
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise Refusal(refusals.INVALID, f"The limit must be between 1 and {MAX_LIMIT}.")
    return value


def clean_cursor(value: int | None, *, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Refusal(refusals.INVALID, f"The {what} cursor must be a non-negative id.")
    return value
