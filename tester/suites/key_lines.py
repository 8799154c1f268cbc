"""Where a key of a suite file is written: the line a refusal points at.

`tomllib` keeps no positions, so the text is read again, line by line, for its table headers
and keys (`key_lines`), and a key path is looked up among them (`line_of`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# A key path inside the document: table keys and array indexes, as `tomllib` gives them.
KeyPath = tuple[str | int, ...]

_ARRAY_HEADER = re.compile(r"\s*\[\[\s*([^\]]+?)\s*\]\]")
_TABLE_HEADER = re.compile(r"\s*\[\s*([^\]]+?)\s*\]")
_KEY = re.compile(
    r"\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)


_DOTTED_PART = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[^.]+?)\s*(?:\.|$)")


def _dotted(text: str) -> list[str]:
    """A dotted key's parts; a quoted part may hold dots (`pricing."gpt-4.1"`)."""
    return [part.strip("\"'") for part in _DOTTED_PART.findall(text.strip())]


def key_lines(text: str) -> list[tuple[KeyPath, int]]:
    """Each table header and key of `text` with its full path and line (1-based), in order.

    Array-of-tables headers count their entries, so `[[cases.turns]]` under the second
    `[[cases]]` is `("cases", 1, "turns", N)`. Multi-line strings are not followed: a line
    inside one that looks like a key may be listed, which only affects where a refusal points.
    """
    found: list[tuple[KeyPath, int]] = []
    counts: dict[tuple[str, ...], int] = {}
    current: KeyPath = ()
    for number, line in enumerate(text.splitlines(), start=1):
        header = _ARRAY_HEADER.match(line)
        if header:
            names = tuple(_dotted(header.group(1)))
            counts[names] = counts.get(names, 0) + 1
            for deeper in [key for key in counts if key[: len(names)] == names and key != names]:
                del counts[deeper]
            current = _positioned(names, counts)
            found.append((current, number))
            continue
        header = _TABLE_HEADER.match(line)
        if header:
            current = _positioned(tuple(_dotted(header.group(1))), counts, last_is_array=False)
            found.append((current, number))
            continue
        key = _KEY.match(line)
        if key:
            found.append(((*current, *_dotted(key.group(1))), number))
    return found


def _positioned(
    names: tuple[str, ...], counts: Mapping[tuple[str, ...], int], *, last_is_array: bool = True
) -> KeyPath:
    path: list[str | int] = []
    for end in range(1, len(names) + 1):
        path.append(names[end - 1])
        prefix = names[:end]
        if prefix in counts and (last_is_array or end < len(names)):
            path.append(counts[prefix] - 1)
    return tuple(path)


def line_of(lines: list[tuple[KeyPath, int]], where: KeyPath) -> int:
    """The line that writes `where`, or the nearest enclosing key or table that is written
    (a key of an inline table is on its table's line); 0 when nothing of it is."""
    for depth in range(len(where), 0, -1):
        for path, number in lines:
            # An array of tables is written as its entries: the first stands for all.
            if path in (where[:depth], (*where[:depth], 0)):
                return number
    return 0
