"""JSON in from clients, HTTP bodies and WebSocket frames alike: nesting is bounded.

Python's JSON decoder recurses once per level: a body of two thousand `[` raises
`RecursionError`, which is no `ValueError`, so DRF's parser let it through as a 500. Every
input this API takes is a flat object, so anything nested deeper than `DEPTH_MAX` is refused
`invalid` here, before a later encoder (the idempotency fingerprint, a log line) could recurse
on it again.
"""

from __future__ import annotations

import json
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

# Containers within containers, the outermost counting one. Our inputs need one.
DEPTH_MAX = 32


def _nested_too_deep(value: Any) -> bool:
    """Whether containers nest deeper than DEPTH_MAX (iterative: no recursion to exhaust)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > DEPTH_MAX:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def checked_depth(value: Any) -> Any:
    """`value` as decoded, or ValueError when it nests deeper than DEPTH_MAX."""
    if isinstance(value, (dict, list)) and _nested_too_deep(value):
        raise ValueError(f"JSON nested deeper than {DEPTH_MAX} levels")
    return value


def load_json(text: str | bytes) -> Any:
    """A WebSocket frame's JSON; ValueError for anything that is not JSON of bounded depth."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {DEPTH_MAX} levels") from None
    return checked_depth(value)


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, with nesting too deep for the decoder refused as a parse error."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            value = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {DEPTH_MAX} levels") from None
        try:
            return checked_depth(value)
        except ValueError as error:
            raise ParseError(f"JSON parse error - {error}") from None
