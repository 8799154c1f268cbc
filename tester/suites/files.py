"""Suite files: TOML naming conversations with the assistant and what each reply must hold.

A file is read and checked whole before anything is sent, and every file before any is run;
each problem is told with its file, line and reason (`SuiteFileRefused`), every problem found
at once (`SuiteFilesRefused`): each of the file's keys and tables is checked apart, so one
mistake hides no other, but a turn or an expectation stops at its first. The format is in
docs/suite-file.md. This module reads the suite, its cases (one per row of a dataset,
`datasets`), their turns and simulated users; a turn's `expect` and a case's
`expect_conversation` are read by `expectation_keys`, the `[judge]` and `[pricing]` tables by
`judge_and_pricing_tables`, and a key's line is found by `key_lines`.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from . import datasets
from .costs import Price
from .expectation_keys import (
    DEFAULT_WITHIN,
    WITHIN_MAX,
    ConversationExpect,
    Expect,
    ExpectationReader,
)
from .judge import JudgeConfig
from .judge_and_pricing_tables import NO_JUDGE, JudgeAndPricingReader
from .key_lines import KeyPath, line_of
from .key_reader import SuiteFileRefused, SuiteFilesRefused, is_int, is_number, is_text

SUITE_SUFFIX = ".suite.toml"
# Suite and case names go into thread names (`<suite> · <case> · <UTC time>`), which the
# listener takes up to 200 characters by default.
NAME_MAX = 80
PROJECT_MAX = 200
REPEAT_MAX = 100
SIMULATED_TURNS_MAX = 50
# An instance's name: an address on the bus (docs/business-file.md).
_INSTANCE = re.compile(r"[A-Za-z0-9_-]{1,100}")

_SUITE_KEYS = frozenset({"name", "project", "instances", "judge", "pricing", "cases"})
_CASE_KEYS = frozenset(
    {
        "name",
        "instance",
        "repeat",
        "pass_rate",
        "turns",
        "simulate",
        "expect_conversation",
        "vars",
        "vars_file",
    }
)
_SIMULATE_KEYS = frozenset({"persona", "goal", "max_turns", "within"})
_TURN_KEYS = frozenset({"send", "regenerate", "expect"})

T = TypeVar("T")


class _CaseRefused(Exception):
    """A case whose problems are told already: the suite reads on without it."""


@dataclass(frozen=True)
class Simulate:
    """A simulated user (`[cases.simulate]`): the judge writes each turn from the persona and
    the goal, and says after each reply whether the goal is met."""

    persona: str
    goal: str
    max_turns: int
    within: float = DEFAULT_WITHIN


@dataclass(frozen=True)
class Turn:
    """One turn of a case: a message sent, or (`regenerate`) the turn before asked again as a
    new version of it (R24), whose text `send` then is."""

    send: str
    expect: Expect
    line: int
    regenerate: bool = False


@dataclass(frozen=True)
class Case:
    name: str
    # Empty for a case whose turns a simulated user writes.
    turns: tuple[Turn, ...]
    instance: str | None
    line: int
    repeat: int = 1
    pass_rate: float = 1.0
    simulate: Simulate | None = None
    # Frozen: one default shared by every case is safe (ruff cannot tell from another module).
    expect_conversation: ConversationExpect = ConversationExpect()  # noqa: RUF009
    # A row of the case's dataset (`vars`, `vars_file`): each column's name and value.
    vars: datasets.Row = ()

    @property
    def uses_judge(self) -> bool:
        return (
            self.simulate is not None
            or self.expect_conversation.judge is not None
            or any(turn.expect.judge is not None for turn in self.turns)
        )


@dataclass(frozen=True)
class Suite:
    name: str
    project: str
    cases: tuple[Case, ...]
    file: str
    # The instances every case without its own runs against, side by side; empty: the
    # business's default instance.
    instances: tuple[str, ...] = ()
    judge: JudgeConfig | None = None
    # `[pricing.MODEL]`: each model's prices, by the name a reply records.
    pricing: Mapping[str, Price] = field(default_factory=dict, hash=False)

    def price_of(self, model: str | None) -> Price | None:
        """The price of a reply that recorded `model`; None: unknown."""
        return None if model is None else self.pricing.get(model)


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


def load_suites(
    paths: Iterable[str | Path], environ: Mapping[str, str] = os.environ
) -> list[Suite]:
    """Every suite of `paths`, each checked whole; every problem of every file is raised at
    once (`SuiteFilesRefused`)."""
    suites: list[Suite] = []
    problems: list[SuiteFileRefused] = []
    for given in paths:
        try:
            files = suite_files([given])
        except SuiteFileRefused as refusal:
            problems.append(refusal)
            continue
        for path in files:
            try:
                suites.append(load_suite(path, environ))
            except SuiteFileRefused as refusal:
                problems.append(refusal)
    if problems:
        raise SuiteFilesRefused(problems)
    return suites


def load_suite(path: str | Path, environ: Mapping[str, str] = os.environ) -> Suite:
    """Read and check one suite file; every problem found is raised at once. Sends nothing;
    reads the file, any JSON Schema file it names, and the judge's variables in `environ`."""
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
    return _Reader(source, text, Path(path).parent, environ).suite(document)


class _Reader(ExpectationReader, JudgeAndPricingReader):
    """Checks one parsed document key by key; each refusal names the key's line. The suite's
    and each case's keys and tables are checked apart (`collect`), so that every problem is
    found; a turn stops at its first."""

    def collect(self, read: Callable[[], T]) -> T | None:
        """What `read` reads, or None when it is refused: the refusal is kept, and the
        reading goes on."""
        try:
            return read()
        except SuiteFileRefused as refusal:
            self.problems.append(refusal)
        except _CaseRefused:
            pass
        return None

    def suite(self, document: Mapping[str, Any]) -> Suite:
        self.collect(lambda: self.only(document, _SUITE_KEYS, (), "a suite file"))
        name = self.collect(lambda: self.name(document, ("name",), "the suite's name", NAME_MAX))
        project = self.collect(
            lambda: self.name(document, ("project",), "the project", PROJECT_MAX)
        )
        instances = self.collect(lambda: self.instances(document))
        told = len(self.problems)
        judge = self.collect(lambda: self.judge(document.get("judge")))
        # A judge table that is refused is not one that is missing.
        judge_refused = len(self.problems) > told
        pricing = self.collect(lambda: self.pricing(document.get("pricing")))
        cases = self.collect(lambda: self.tables(document, ("cases",), "a suite file", "[[cases]]"))
        read: list[Case] = []
        seen: set[str] = set()
        for index, table in enumerate(cases or ()):
            where = ("cases", index)
            # A case with a dataset is a case per row.
            found = self.collect(partial(self.cases, table, where))
            given = table.get("name")
            # A refused case's name as written: it is taken all the same.
            names = (
                [case.name for case in found]
                if found is not None
                else [given]
                if isinstance(given, str) and given.strip()
                else []
            )
            for case_name in names:
                if case_name in seen:
                    self.problems.append(
                        self.refuse((*where, "name"), f"a second case named {case_name!r}")
                    )
                seen.add(case_name)
            read += found or ()
            if any(case.uses_judge for case in found or ()) and judge is None and not judge_refused:
                self.problems.append(self.refuse(self.judge_key(table, where), NO_JUDGE))
        if self.problems:
            # In the file's order, whatever order they were found in.
            raise SuiteFilesRefused(sorted(self.problems, key=lambda problem: problem.line))
        assert name is not None and project is not None and instances is not None
        assert pricing is not None
        return Suite(name, project, tuple(read), self.source, instances, judge, pricing)

    def instances(self, document: Mapping[str, Any]) -> tuple[str, ...]:
        value = document.get("instances", [])
        if (
            not isinstance(value, list)
            or not all(isinstance(v, str) and _INSTANCE.fullmatch(v) for v in value)
            or len(set(value)) != len(value)
        ):
            raise self.refuse(("instances",), "instances must be a list of distinct instance names")
        return tuple(value)

    def judge_key(self, table: Mapping[str, Any], where: KeyPath) -> KeyPath:
        """Where a case first asks for the judge, for the refusal to point at."""
        if "simulate" in table:
            return (*where, "simulate")
        if isinstance(table.get("expect_conversation"), dict) and (
            "judge" in table["expect_conversation"]
        ):
            return (*where, "expect_conversation", "judge")
        for index, turn in enumerate(table.get("turns", [])):
            if isinstance(turn.get("expect"), dict) and "judge" in turn["expect"]:
                return (*where, "turns", index, "expect", "judge")
        return where

    def cases(self, table: Mapping[str, Any], where: KeyPath) -> list[Case]:
        """A case; with `vars` or `vars_file`, one per row, named from its values, its texts
        filled with them (`datasets`). A refusal about one row says which."""
        self.only(table, _CASE_KEYS, where, "a case")
        rows = self.rows(table, where)
        if rows is None:
            return [self.case(table, where)]
        key = (*where, "vars" if "vars" in table else "vars_file")
        try:
            datasets.check_templates(table, [name for name, _ in rows[0]])
        except datasets.DatasetRefused as refused:
            at = (*where, *refused.where) if refused.where else key
            raise self.refuse(at, refused.reason) from None
        found = []
        for number, row in enumerate(rows, start=1):
            before = len(self.problems)
            try:
                case = self.case(datasets.filled(table, row), where)
            except SuiteFileRefused as refused:
                raise self.in_row(refused, number, row) from None
            except _CaseRefused:
                # The row's problems, kept as they were found, each told with its row.
                kept = self.problems[before:]
                self.problems[before:] = [self.in_row(p, number, row) for p in kept]
                raise
            name = datasets.row_name(case.name, row, NAME_MAX)
            found.append(replace(case, name=name, vars=row))
        return found

    @staticmethod
    def in_row(refused: SuiteFileRefused, number: int, row: datasets.Row) -> SuiteFileRefused:
        """`refused` told of a dataset's row: `row 2 (city=Porto): …`."""
        told = ", ".join(f"{name}={value}" for name, value in row)
        return SuiteFileRefused(
            refused.file, refused.line, f"row {number} ({told}): {refused.reason}"
        )

    def rows(self, table: Mapping[str, Any], where: KeyPath) -> list[datasets.Row] | None:
        """The rows of a case's `vars` or `vars_file` (relative to the suite file), or None."""
        if "vars" in table and "vars_file" in table:
            raise self.refuse((*where, "vars_file"), "a case takes vars or vars_file, not both")
        try:
            if "vars" in table:
                return datasets.inline_rows(table["vars"])
            if "vars_file" in table:
                given = table["vars_file"]
                if not isinstance(given, str) or not given.strip():
                    raise datasets.DatasetRefused("vars_file must be a file's path, as a text")
                return datasets.file_rows(self.directory / given, given)
        except datasets.DatasetRefused as refused:
            key = "vars" if "vars" in table else "vars_file"
            raise self.refuse((*where, key, *refused.where), refused.reason) from None
        return None

    def case(self, table: Mapping[str, Any], where: KeyPath) -> Case:
        """A case, each of its keys and turns checked apart; `_CaseRefused` once every problem
        of it is told."""
        told = len(self.problems)
        self.collect(lambda: self.only(table, _CASE_KEYS, where, "a case"))
        name = self.collect(lambda: self.name(table, (*where, "name"), "a case's name", NAME_MAX))
        instance = self.collect(lambda: self.case_instance(table, where))
        repeat = self.collect(lambda: self.repeat(table, where))
        pass_rate = self.collect(lambda: self.pass_rate(table, where))
        before_simulate = len(self.problems)
        simulate = self.collect(lambda: self.simulate(table, (*where, "simulate")))
        turns: tuple[Turn, ...] = ()
        if simulate is not None and "turns" in table:
            self.problems.append(
                self.refuse(
                    (*where, "turns"),
                    "a case has turns or a simulated user ([cases.simulate]), not both",
                )
            )
        elif simulate is None and len(self.problems) == before_simulate:
            turns = self.turns(table, where, name or "")
        conversation = self.collect(
            lambda: self.conversation(table, (*where, "expect_conversation"))
        )
        if len(self.problems) > told:
            raise _CaseRefused
        assert name is not None and repeat is not None and pass_rate is not None
        assert conversation is not None
        return Case(
            name=name,
            turns=turns,
            instance=instance or None,
            line=line_of(self.lines, where),
            repeat=repeat,
            pass_rate=pass_rate,
            simulate=simulate,
            expect_conversation=conversation,
        )

    def case_instance(self, table: Mapping[str, Any], where: KeyPath) -> str:
        """A case's own instance, "" when it names none."""
        instance = table.get("instance")
        if instance is None:
            return ""
        if not (isinstance(instance, str) and _INSTANCE.fullmatch(instance)):
            raise self.refuse(
                (*where, "instance"), "instance must be an instance's name: A-Z, a-z, 0-9, _ or -"
            )
        return instance

    def repeat(self, table: Mapping[str, Any], where: KeyPath) -> int:
        repeat = table.get("repeat", 1)
        if not is_int(repeat) or not 1 <= repeat <= REPEAT_MAX:
            raise self.refuse(
                (*where, "repeat"), f"repeat must be a whole number, 1 to {REPEAT_MAX}"
            )
        return repeat

    def pass_rate(self, table: Mapping[str, Any], where: KeyPath) -> float:
        pass_rate = table.get("pass_rate", 1.0)
        if not is_number(pass_rate) or not 0 < pass_rate <= 1:
            raise self.refuse((*where, "pass_rate"), "pass_rate must be more than 0 and at most 1")
        return float(pass_rate)

    def turns(self, table: Mapping[str, Any], where: KeyPath, case: str) -> tuple[Turn, ...]:
        """The case's turns, each checked apart (its problems collected); a turn refused
        stands, for a `regenerate` after it, as a turn of no text."""
        tables = self.collect(
            lambda: self.tables(table, (*where, "turns"), f"case {case!r}", "[[cases.turns]]")
        )
        turns: list[Turn] = []
        before: Turn | None = None
        for index, given in enumerate(tables or ()):
            turn = self.collect(partial(self.turn, given, (*where, "turns", index), case, before))
            before = turn or Turn("", Expect(), 0)
            if turn is not None:
                turns.append(turn)
        return tuple(turns)

    def simulate(self, table: Mapping[str, Any], where: KeyPath) -> Simulate | None:
        value = table.get("simulate")
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.refuse(where, "simulate must be a table")
        self.only(value, _SIMULATE_KEYS, where, "[cases.simulate]")
        texts = {}
        for key in ("persona", "goal"):
            text = value.get(key)
            if not isinstance(text, str) or not text.strip():
                raise self.refuse((*where, key), f"a simulated user needs {key}, a text")
            texts[key] = text
        max_turns = value.get("max_turns")
        if not is_int(max_turns) or not 1 <= max_turns <= SIMULATED_TURNS_MAX:
            raise self.refuse(
                (*where, "max_turns"),
                f"a simulated user needs max_turns, a whole number from 1 to {SIMULATED_TURNS_MAX}",
            )
        within = self.seconds(value, (*where, "within"), WITHIN_MAX)
        return Simulate(
            texts["persona"], texts["goal"], max_turns, DEFAULT_WITHIN if within is None else within
        )

    def turn(
        self, table: Mapping[str, Any], where: KeyPath, case: str, before: Turn | None
    ) -> Turn:
        """A turn; `regenerate = true` asks `before`, the case's turn before, again (R24)."""
        self.only(table, _TURN_KEYS, where, "a turn")
        regenerate = "regenerate" in table
        if regenerate:
            send = self.regenerated(table, where, case, before)
        else:
            given = table.get("send")
            if not isinstance(given, str) or not given.strip():
                raise self.refuse(
                    (*where, "send"),
                    "a turn needs send, a text that is not empty (or regenerate = true, to ask "
                    "the turn before again)",
                )
            send = given
        expect = table.get("expect", {})
        if not isinstance(expect, dict):
            raise self.refuse((*where, "expect"), "expect must be a table")
        return Turn(
            send=send,
            expect=self.expect(expect, (*where, "expect")),
            line=line_of(self.lines, (*where, "regenerate" if regenerate else "send")),
            regenerate=regenerate,
        )

    def regenerated(
        self, table: Mapping[str, Any], where: KeyPath, case: str, before: Turn | None
    ) -> str:
        """The text a `regenerate` turn asks again: its turn before's, which it must have."""
        key = (*where, "regenerate")
        if table["regenerate"] is not True:
            raise self.refuse(
                key,
                "regenerate must be true: it asks the turn before again (a new message is "
                'send = "…")',
            )
        if "send" in table:
            raise self.refuse(
                key,
                "a turn sends a new message (send) or asks the turn before again "
                "(regenerate = true), not both",
            )
        if before is None:
            raise self.refuse(
                key,
                f"turn 1 of case {case!r} has no turn before it to regenerate: a case's first "
                'turn sends (send = "…")',
            )
        return before.send

    def name(self, table: Mapping[str, Any], where: KeyPath, what: str, limit: int) -> str:
        value = table.get(str(where[-1]))
        if not isinstance(value, str) or not value.strip():
            raise self.refuse(where, f'{what} is missing or empty ({where[-1]} = "…")')
        if len(value) > limit or not is_text(value):
            raise self.refuse(where, f"{what} must be at most {limit} characters, none a control")
        return value

    def tables(
        self, table: Mapping[str, Any], where: KeyPath, owner: str, header: str
    ) -> Sequence[Mapping[str, Any]]:
        value = table.get(str(where[-1]))
        if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
            raise self.refuse(where, f"{owner} needs at least one {header} table")
        return value
