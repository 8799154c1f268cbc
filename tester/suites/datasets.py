"""Datasets: a case run once per row of values, its texts templates of `{name}` placeholders.

A case's `vars` (a list of tables) or `vars_file` (a CSV file with a header row, a JSON array
of objects, or JSON Lines) gives rows of named values. Every text of the case's turns,
`simulate` and `expect_conversation` is then a template: `{name}` is the row's value, `{{` and
`}}` are literal braces, and any other brace is refused, as are a name no column has and a
column no placeholder uses. Each row becomes a case of its own, named from its values
(`row_name`). The format is in docs/suite-file.md; `files` turns a `DatasetRefused` into the
suite file's refusal at the key it names.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# A column's name, as a placeholder writes it.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The most rows one case may take: each is a case of its own, run `repeat` times.
ROWS_MAX = 1000
# The formats of a `vars_file`, by its name's ending.
FILE_FORMATS = (".csv", ".json", ".jsonl")
# The keys of a case whose texts are templates.
TEMPLATED = ("turns", "simulate", "expect_conversation")
# Expectations whose text is a regular expression: a value goes in matching itself only.
_PATTERNS = frozenset({"matches", "not_matches"})
_PIECE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# How a cut row name ends: an ellipsis, then the row's digest, so cut names stay unique.
_DIGEST = 6

# A row: each column's name and value, in the columns' order.
Row = tuple[tuple[str, str], ...]
# Where in the case, as `key_lines.KeyPath` is.
Where = tuple[str | int, ...]


class DatasetRefused(Exception):
    """A dataset or a template that cannot be used: why, and where under the case's table."""

    def __init__(self, reason: str, where: Where = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.where = where


# --- rows ----------------------------------------------------------------------------------


def inline_rows(value: object) -> list[Row]:
    """`vars = [{...}, ...]`: at least one table, each of the same names, each value a text,
    a number or true/false."""
    if not isinstance(value, list) or not value:
        raise DatasetRefused('vars must be a list of one or more tables: [{ name = "…" }, …]')
    found = []
    for index, entry in enumerate(value):
        if not isinstance(entry, dict):
            raise DatasetRefused(f"vars row {index + 1} must be a table", (index,))
        found.append(_row(entry, f"vars row {index + 1}", (index,)))
    return checked_rows(found, "vars", inline=True)


def file_rows(path: Path, shown: str) -> list[Row]:
    """`vars_file`: the rows of a CSV file (its first row the header), a JSON array of objects
    or a JSON Lines file, by the ending of its name; `shown` names it in a refusal."""
    if path.suffix.lower() not in FILE_FORMATS:
        raise DatasetRefused(
            f"vars_file {shown} must be a {', '.join(FILE_FORMATS[:-1])} or {FILE_FORMATS[-1]} file"
        )
    try:
        # `utf-8-sig`: a spreadsheet's CSV often starts with a byte-order mark.
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise DatasetRefused(f"vars_file {shown} cannot be read ({reason})") from error
    suffix = path.suffix.lower()
    if suffix == ".csv":
        rows = _csv_rows(text, shown)
    elif suffix == ".json":
        rows = _json_rows(text, shown)
    else:
        rows = _jsonl_rows(text, shown)
    return checked_rows(rows, f"vars_file {shown}")


def _csv_rows(text: str, shown: str) -> list[Row]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None or header == []:
            raise DatasetRefused(f"vars_file {shown} has no header row (the columns' names)")
        _check_header(header, f"vars_file {shown}")
        rows: list[Row] = []
        for values in reader:
            if not values:
                continue  # a blank line
            if len(rows) == ROWS_MAX:
                raise DatasetRefused(f"vars_file {shown} has more than {ROWS_MAX} rows")
            line = reader.line_num
            if len(values) != len(header):
                raise DatasetRefused(
                    f"vars_file {shown} line {line} has {len(values)} values; the header names "
                    f"{len(header)} columns"
                )
            values_of = dict(zip(header, values, strict=True))
            rows.append(_row(values_of, f"vars_file {shown} line {line}"))
    except csv.Error as error:
        raise DatasetRefused(
            f"vars_file {shown} is not valid CSV at line {reader.line_num}: {error}"
        ) from error
    return rows


def _check_header(header: Sequence[str], what: str) -> None:
    for name in header:
        if not NAME.fullmatch(name):
            raise DatasetRefused(
                f"{what}: column {name!r} is no name a placeholder can use (A-Z, a-z, 0-9 and _, "
                "not starting with a digit)"
            )
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise DatasetRefused(f"{what}: column {twice[0]!r} is named twice")


def _json_rows(text: str, shown: str) -> list[Row]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise DatasetRefused(
            f"vars_file {shown} is not JSON at line {error.lineno}: {error.msg}"
        ) from error
    if not isinstance(value, list):
        raise DatasetRefused(f"vars_file {shown} must hold a JSON array of objects")
    return _objects([(f"row {n}", entry) for n, entry in enumerate(value, start=1)], shown)


def _jsonl_rows(text: str, shown: str) -> list[Row]:
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entries.append((f"line {number}", json.loads(line)))
        except json.JSONDecodeError as error:
            raise DatasetRefused(
                f"vars_file {shown} line {number} is not JSON: {error.msg}"
            ) from error
    return _objects(entries, shown)


def _objects(entries: Sequence[tuple[str, object]], shown: str) -> list[Row]:
    """Each JSON value a row, where it is in the file named in a refusal: an object."""
    rows = []
    for where, entry in entries:
        if not isinstance(entry, dict):
            raise DatasetRefused(f"vars_file {shown} {where} must be a JSON object")
        rows.append(_row(entry, f"vars_file {shown} {where}"))
    return rows


def _row(entry: Mapping[str, Any], what: str, where: Where = ()) -> Row:
    """One row's values as texts: a text as it is, a number as written, true or false."""
    row = []
    for name, value in entry.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, str | int | float):
            text = str(value)
        else:
            raise DatasetRefused(
                f"{what}: {name} must be a text, a number, true or false", (*where, name)
            )
        row.append((name, text))
    return tuple(row)


def checked_rows(rows: Sequence[Row], what: str, *, inline: bool = False) -> list[Row]:
    """At least one row and at most `ROWS_MAX`, every row of the same columns, named as
    placeholders are, and no two rows alike (they would be one case twice). `inline`: rows
    of `vars`, whose refusals point at the row."""
    if not rows:
        raise DatasetRefused(f"{what} has no rows")
    if len(rows) > ROWS_MAX:
        raise DatasetRefused(f"{what} has {len(rows)} rows, more than {ROWS_MAX}")
    columns = [name for name, _ in rows[0]]
    if not columns:
        raise DatasetRefused(f"{what} row 1 has no values")
    _check_header(columns, what)
    seen: dict[Row, int] = {}
    for number, row in enumerate(rows, start=1):
        names = [name for name, _ in row]
        if set(names) != set(columns):
            missing = sorted(set(columns) - set(names)) or sorted(set(names) - set(columns))
            raise DatasetRefused(
                f"{what} row {number} does not have the columns of row 1 "
                f"({', '.join(columns)}): {missing[0]} differs",
                (number - 1,) if inline else (),
            )
        ordered = tuple((name, dict(row)[name]) for name in columns)
        if ordered in seen:
            raise DatasetRefused(
                f"{what} rows {seen[ordered]} and {number} hold the same values",
                (number - 1,) if inline else (),
            )
        seen[ordered] = number
    return list(seen)


# --- templates -----------------------------------------------------------------------------


def templates(case: Mapping[str, Any]) -> Iterator[tuple[Where, str]]:
    """Every text of a case's table that is a template, with where it is, in the file's order."""
    for key in TEMPLATED:
        if key in case:
            yield from _texts(case[key], (key,))


def _texts(value: object, where: Where) -> Iterator[tuple[Where, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, (*where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, (*where, index))


def placeholders(text: str, where: Where) -> list[str]:
    """The names `text` places, in order; a brace that is neither a placeholder nor doubled
    is refused."""
    names = []
    for piece in _PIECE.finditer(text):
        if piece.group(0) in ("{{", "}}"):
            continue
        name = piece.group(1)
        if name is None or not NAME.fullmatch(name):
            raise DatasetRefused(
                f"{piece.group(0)!r} in {_key(where)} is no placeholder: a case with vars "
                "writes {name} for a value and {{ or }} for a brace",
                where,
            )
        names.append(name)
    return names


def check_templates(case: Mapping[str, Any], columns: Sequence[str]) -> None:
    """Every placeholder names a column, and every column is placed somewhere."""
    used = set()
    for where, text in templates(case):
        for name in placeholders(text, where):
            if name not in columns:
                raise DatasetRefused(
                    f"{{{name}}} in {_key(where)} names no column of the case's vars "
                    f"({', '.join(columns)})",
                    where,
                )
            used.add(name)
    unused = [name for name in columns if name not in used]
    if unused:
        raise DatasetRefused(
            f"column {unused[0]} of the case's vars is placed nowhere: each column is a "
            f"{{{unused[0]}}} in a turn, simulate or expect_conversation (a column that changes "
            "nothing would run the same case twice)"
        )


def filled(case: Mapping[str, Any], row: Row) -> dict[str, Any]:
    """The case's table with the row's values in every template; in a regular expression
    (`matches`, `not_matches`, not inside a `json_schema`), a value matches itself only."""
    values = dict(row)
    copy = {key: value for key, value in case.items() if key not in ("vars", "vars_file")}
    for key in TEMPLATED:
        if key in copy:
            copy[key] = _filled(copy[key], values, pattern=False, schema=False)
    return copy


def _filled(value: object, values: Mapping[str, str], *, pattern: bool, schema: bool) -> Any:
    if isinstance(value, str):
        return fill(value, values, pattern=pattern)
    if isinstance(value, dict):
        return {
            key: _filled(
                item,
                values,
                pattern=key in _PATTERNS and not schema,
                schema=schema or key == "json_schema",
            )
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_filled(item, values, pattern=pattern, schema=schema) for item in value]
    return value


def fill(text: str, values: Mapping[str, str], *, pattern: bool = False) -> str:
    """`text` with each `{name}` its value, `{{` and `}}` braces. In a `pattern` the value is
    escaped, and a doubled brace stays the regular expression's own (`\\d{{2}}` is `\\d{2}`)."""

    def piece(found: re.Match[str]) -> str:
        if found.group(0) in ("{{", "}}"):
            return found.group(0)[0]
        value = values[found.group(1)]
        return re.escape(value) if pattern else value

    return _PIECE.sub(piece, text)


def row_name(case: str, row: Row, limit: int) -> str:
    """`case [name=value, …]`, each value on one line and its control characters escaped; a
    name over `limit` characters is cut, ending with the row's digest so it stays unique."""
    told = ", ".join(f"{name}={_shown(value)}" for name, value in row)
    whole = f"{case} [{told}]"
    if len(whole) <= limit:
        return whole
    digest = hashlib.sha256(json.dumps(row).encode()).hexdigest()[:_DIGEST]
    ending = f"… #{digest}]"
    return whole[: limit - len(ending)] + ending


def _shown(value: str) -> str:
    line = " ".join(value.split())
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group(0)):02x}", line)


def _key(where: Where) -> str:
    """A template's key as a person reads it: `turns[2].expect.matches`."""
    told = ""
    for part in where:
        told += f"[{part + 1}]" if isinstance(part, int) else f".{part}" if told else part
    return told
