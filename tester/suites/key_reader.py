"""A suite file's tables read key by key, strictly: each refusal is told with its file, line and
reason (`SuiteFileRefused`), every problem found at once (`SuiteFilesRefused`).

`KeyReader` is what every part of the reading shares: a refusal at a key's line, the check that
a table holds only the keys it takes (an unknown key is refused, so a typo never turns a check
off), and seconds. The suite file's parts are read by its subclasses: `expect` and
`expect_conversation` (`expectation_keys`), `[judge]` and `[pricing]`
(`judge_and_pricing_tables`), and the rest (`files`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

from .key_lines import KeyPath, key_lines, line_of

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class SuiteFileRefused(Exception):
    """A suite file that cannot run: where, and why."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(f"{file}:{line}: {reason}")
        self.file = file
        self.line = line
        self.reason = reason

    @property
    def problems(self) -> tuple[SuiteFileRefused, ...]:
        """Every problem this refusal tells, in order: itself alone."""
        return (self,)


class SuiteFilesRefused(SuiteFileRefused):
    """Every problem found in one file or more, in their files' order and each file's lines';
    where one refusal is read, the first (its `file`, `line` and `reason`). Told as one line
    per problem."""

    def __init__(self, problems: Sequence[SuiteFileRefused]) -> None:
        told = tuple(told for problem in problems for told in problem.problems)
        first = told[0]
        super().__init__(first.file, first.line, first.reason)
        self.told = told

    @property
    def problems(self) -> tuple[SuiteFileRefused, ...]:
        return self.told

    def __str__(self) -> str:
        return "\n".join(SuiteFileRefused.__str__(problem) for problem in self.told)


class KeyReader:
    """Reads one parsed document of `source`; each refusal names the key's line in `text`.
    Problems told beside the one raised are kept in `problems`. `directory` is where the
    files a suite file names are found, `environ` where its variables are."""

    def __init__(self, source: str, text: str, directory: Path, environ: Mapping[str, str]) -> None:
        self.source = source
        self.lines = key_lines(text)
        self.directory = directory
        self.environ = environ
        self.problems: list[SuiteFileRefused] = []

    def refuse(self, where: KeyPath, reason: str) -> SuiteFileRefused:
        # A key missing from the top of the file points at its first line.
        return SuiteFileRefused(self.source, max(line_of(self.lines, where), 1), reason)

    def only(
        self, table: Mapping[str, Any], known: frozenset[str], where: KeyPath, what: str
    ) -> None:
        """Refuses the first key of `table` not `known`; any other unknown key is told too,
        in `problems`, when the reader collects them."""
        unknown = [key for key in table if key not in known]
        refusals = [
            self.refuse(
                (*where, key), f"unknown key {key!r} in {what}; it takes {', '.join(sorted(known))}"
            )
            for key in unknown
        ]
        if refusals:
            self.problems += refusals[1:]
            raise refusals[0]

    def seconds(self, table: Mapping[str, Any], where: KeyPath, limit: float) -> float | None:
        key = str(where[-1])
        value = table.get(key)
        if value is None:
            return None
        if not is_number(value) or not 0 < value <= limit:
            raise self.refuse(where, f"{key} must be seconds, more than 0 and at most {limit:g}")
        return float(value)


def is_text(value: object) -> TypeGuard[str]:
    """A text with something in it, and no control character."""
    return isinstance(value, str) and bool(value.strip()) and not _CONTROL.search(value)


def is_int(value: object) -> TypeGuard[int]:
    """A whole number: TOML's `true` is none, though Python's `bool` is an `int`."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
