"""Suite files: TOML naming conversations with the assistant and what each reply must hold.

A file is read and checked whole before anything is sent; the first problem refuses it with the
file, the line and the reason (`SuiteFileRefused`). The format is in docs/suite-file.md.
`tomllib` keeps no positions, so the line of a key is found by reading the text (`line_of`).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUITE_SUFFIX = ".suite.toml"
DEFAULT_WITHIN = 30.0
# The longest wait a turn may ask for: an hour is already far beyond any reply.
WITHIN_MAX = 3600.0
# Suite and case names go into thread names (`<suite> · <case> · <UTC time>`), which the
# listener takes up to 200 characters by default.
NAME_MAX = 80
PROJECT_MAX = 200
# An instance's name: an address on the bus (docs/business-file.md).
_INSTANCE = re.compile(r"[A-Za-z0-9_-]{1,100}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

_SUITE_KEYS = frozenset({"name", "project", "cases"})
_CASE_KEYS = frozenset({"name", "instance", "turns"})
_TURN_KEYS = frozenset({"send", "expect"})
_EXPECT_KEYS = frozenset({"contains", "not_contains", "matches", "within", "reply"})

# A key path inside the document: table keys and array indexes, as `tomllib` gives them.
KeyPath = tuple[str | int, ...]


class SuiteFileRefused(Exception):
    """A suite file that cannot run: where, and why."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(f"{file}:{line}: {reason}")
        self.file = file
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class Expect:
    """What the reply to one turn must hold; `reply=False` expects none within `within`."""

    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    matches: re.Pattern[str] | None = None
    within: float = DEFAULT_WITHIN
    reply: bool = True


@dataclass(frozen=True)
class Turn:
    send: str
    expect: Expect
    line: int


@dataclass(frozen=True)
class Case:
    name: str
    turns: tuple[Turn, ...]
    instance: str | None
    line: int


@dataclass(frozen=True)
class Suite:
    name: str
    project: str
    cases: tuple[Case, ...]
    file: str


def suite_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files named, and every `*.suite.toml` under each directory named, in order."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            inside = sorted(p for p in path.rglob(f"*{SUITE_SUFFIX}") if p.is_file())
            if not inside:
                raise SuiteFileRefused(str(path), 0, f"no {SUITE_SUFFIX} file in this directory")
            found += inside
        else:
            found.append(path)
    return found


def load_suites(paths: Iterable[str | Path]) -> list[Suite]:
    """Every suite of `paths`, each checked whole; the first refusal is raised."""
    return [load_suite(path) for path in suite_files(paths)]


def load_suite(path: str | Path) -> Suite:
    """Read and check one suite file. Pure: reads the file, sends nothing."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise SuiteFileRefused(source, 0, f"cannot be read ({reason})") from error
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        found = re.search(r"\(at line (\d+), column \d+\)", str(error))
        line = int(found.group(1)) if found else 0
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        raise SuiteFileRefused(source, line, f"not valid TOML: {reason}") from error
    return _Reader(source, text).suite(document)


class _Reader:
    """Checks one parsed document key by key; each refusal names the key's line."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.lines = key_lines(text)

    def refuse(self, where: KeyPath, reason: str) -> SuiteFileRefused:
        # A key missing from the top of the file points at its first line.
        return SuiteFileRefused(self.source, max(line_of(self.lines, where), 1), reason)

    def suite(self, document: Mapping[str, Any]) -> Suite:
        self.only(document, _SUITE_KEYS, (), "a suite file")
        name = self.name(document, ("name",), "the suite's name", NAME_MAX)
        project = self.name(document, ("project",), "the project", PROJECT_MAX)
        cases = self.tables(document, ("cases",), "a suite file", "[[cases]]")
        read = tuple(self.case(case, ("cases", index)) for index, case in enumerate(cases))
        seen: set[str] = set()
        for index, case in enumerate(read):
            if case.name in seen:
                raise self.refuse(("cases", index, "name"), f"a second case named {case.name!r}")
            seen.add(case.name)
        return Suite(name=name, project=project, cases=read, file=self.source)

    def case(self, table: Mapping[str, Any], where: KeyPath) -> Case:
        self.only(table, _CASE_KEYS, where, "a case")
        name = self.name(table, (*where, "name"), "a case's name", NAME_MAX)
        instance = table.get("instance")
        if instance is not None and not (
            isinstance(instance, str) and _INSTANCE.fullmatch(instance)
        ):
            raise self.refuse(
                (*where, "instance"), "instance must be an instance's name: A-Z, a-z, 0-9, _ or -"
            )
        turns = self.tables(table, (*where, "turns"), f"case {name!r}", "[[cases.turns]]")
        return Case(
            name=name,
            turns=tuple(self.turn(turn, (*where, "turns", i)) for i, turn in enumerate(turns)),
            instance=instance,
            line=line_of(self.lines, where),
        )

    def turn(self, table: Mapping[str, Any], where: KeyPath) -> Turn:
        self.only(table, _TURN_KEYS, where, "a turn")
        send = table.get("send")
        if not isinstance(send, str) or not send.strip():
            raise self.refuse((*where, "send"), "a turn needs send, a text that is not empty")
        expect = table.get("expect", {})
        if not isinstance(expect, dict):
            raise self.refuse((*where, "expect"), "expect must be a table")
        return Turn(
            send=send,
            expect=self.expect(expect, (*where, "expect")),
            line=line_of(self.lines, (*where, "send")),
        )

    def expect(self, table: Mapping[str, Any], where: KeyPath) -> Expect:
        self.only(table, _EXPECT_KEYS, where, "expect")
        within = table.get("within", DEFAULT_WITHIN)
        if isinstance(within, bool) or not isinstance(within, int | float):
            raise self.refuse((*where, "within"), "within must be a number of seconds")
        if not 0 < within <= WITHIN_MAX:
            raise self.refuse(
                (*where, "within"), f"within must be more than 0 and at most {WITHIN_MAX:g} seconds"
            )
        reply = table.get("reply", True)
        if not isinstance(reply, bool):
            raise self.refuse((*where, "reply"), "reply must be true or false")
        if not reply:
            about = sorted(set(table) & {"contains", "not_contains", "matches"})
            if about:
                raise self.refuse(
                    (*where, about[0]), f"reply = false expects no reply, so {about[0]} is refused"
                )
        return Expect(
            contains=self.texts(table, (*where, "contains")),
            not_contains=self.texts(table, (*where, "not_contains")),
            matches=self.pattern(table, (*where, "matches")),
            within=float(within),
            reply=reply,
        )

    def texts(self, table: Mapping[str, Any], where: KeyPath) -> tuple[str, ...]:
        key = str(where[-1])
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.refuse(where, f"{key} must be a list of texts, none empty")
        return tuple(value)

    def pattern(self, table: Mapping[str, Any], where: KeyPath) -> re.Pattern[str] | None:
        value = table.get("matches")
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.refuse(where, "matches must be a regular expression, as a text")
        try:
            return re.compile(value)
        except re.error as error:
            raise self.refuse(where, f"matches is not a regular expression: {error}") from error

    def name(self, table: Mapping[str, Any], where: KeyPath, what: str, limit: int) -> str:
        value = table.get(str(where[-1]))
        if not isinstance(value, str) or not value.strip():
            raise self.refuse(where, f'{what} is missing or empty ({where[-1]} = "…")')
        if len(value) > limit or _CONTROL.search(value):
            raise self.refuse(where, f"{what} must be at most {limit} characters, none a control")
        return value

    def tables(
        self, table: Mapping[str, Any], where: KeyPath, owner: str, header: str
    ) -> Sequence[Mapping[str, Any]]:
        value = table.get(str(where[-1]))
        if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
            raise self.refuse(where, f"{owner} needs at least one {header} table")
        return value

    def only(
        self, table: Mapping[str, Any], known: frozenset[str], where: KeyPath, what: str
    ) -> None:
        for key in table:
            if key not in known:
                raise self.refuse(
                    (*where, key),
                    f"unknown key {key!r} in {what}; it takes {', '.join(sorted(known))}",
                )


# --- where a key is written ----------------------------------------------------------------

_ARRAY_HEADER = re.compile(r"\s*\[\[\s*([^\]]+?)\s*\]\]")
_TABLE_HEADER = re.compile(r"\s*\[\s*([^\]]+?)\s*\]")
_KEY = re.compile(
    r"\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)


def _dotted(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in text.split(".")]


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
            if path == where[:depth]:
                return number
    return 0
