"""Suite files: TOML naming conversations with the assistant and what each reply must hold.

A file is read and checked whole before anything is sent, and every file before any is run;
each problem is told with its file, line and reason (`SuiteFileRefused`), every problem found
at once (`SuiteFilesRefused`): each of the file's keys and tables is checked apart, so one
mistake hides no other, but a turn or an expectation stops at its first. The format is in
docs/suite-file.md. `tomllib` keeps no positions, so the line of a key is found by reading the
text (`line_of`).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

import jsonschema

from . import datasets
from .costs import PRICE_MAX, Price
from .judge import BASE_URL_VARIABLE, MODEL_VARIABLE, JudgeConfig
from .steps import OUTCOMES

SUITE_SUFFIX = ".suite.toml"
DEFAULT_WITHIN = 30.0
# The longest wait a turn may ask for: an hour is already far beyond any reply.
WITHIN_MAX = 3600.0
# Suite and case names go into thread names (`<suite> · <case> · <UTC time>`), which the
# listener takes up to 200 characters by default.
NAME_MAX = 80
PROJECT_MAX = 200
REPEAT_MAX = 100
VOTES_MAX = 15
SIMULATED_TURNS_MAX = 50
# The most steps `max_steps` may allow: far beyond the rounds a turn may take (SPEC §7.2).
STEPS_MAX = 1000
# How a turn's calls are compared with `tools` (LangSmith agentevals' trajectory match modes);
# the first is the default.
TOOLS_ORDERS = ("subset", "superset", "unordered", "strict")
# An instance's name: an address on the bus (docs/business-file.md).
_INSTANCE = re.compile(r"[A-Za-z0-9_-]{1,100}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*")
_URL = re.compile(r"https?://[^\s/]+(/\S*)?")

_SUITE_KEYS = frozenset({"name", "project", "instances", "judge", "pricing", "cases"})
_PRICE_KEYS = frozenset({"input", "output"})
# A model's name as a reply records it (the business file's limit on `model`).
MODEL_MAX = 200
_JUDGE_KEYS = frozenset({"base_url", "model", "api_key_env", "votes"})
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
_CONVERSATION_KEYS = frozenset({"judge", "max_turn_seconds", "max_cost", "only_own_threads"})
_TURN_KEYS = frozenset({"send", "regenerate", "expect"})
# Checked in this order (docs/suite-file.md); `within` and `reply` say how to wait.
_TEXT_KEYS = ("contains", "not_contains", "icontains", "equals", "matches", "not_matches")
_EXPECT_KEYS = frozenset(
    {
        *_TEXT_KEYS,
        "json",
        "json_schema",
        "max_seconds",
        "max_first_token_seconds",
        "max_completion_tokens",
        "max_cost",
        "model",
        "finish_reason",
        "judge",
        "within",
        "reply",
        "tools",
        "tools_order",
        "no_tools",
        "max_steps",
    }
)
_TOOL_CALL_KEYS = frozenset({"name", "args", "outcome"})
# The matchers an argument of a call takes: the reply's, over the argument's text.
_ARGUMENT_KEYS = frozenset({*_TEXT_KEYS, "json_schema"})
_LIST_KEYS = frozenset({"contains", "not_contains", "icontains"})

# A key path inside the document: table keys and array indexes, as `tomllib` gives them.
KeyPath = tuple[str | int, ...]


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


T = TypeVar("T")


class _CaseRefused(Exception):
    """A case whose problems are told already: the suite reads on without it."""


@dataclass(frozen=True)
class ArgumentExpect:
    """What one argument of an expected call must hold: `expect`'s text matchers over the
    argument's text (a value that is no text: its JSON), its `json_schema` over its value."""

    name: str
    expect: Expect
    # As the file wrote it, for a failure to name: `title icontains "photographer"`.
    shown: str


@dataclass(frozen=True)
class ExpectedCall:
    """One call `tools` expects: the tool, what its named arguments hold (others are free),
    and its outcome (None: any)."""

    name: str
    args: tuple[ArgumentExpect, ...] = ()
    outcome: str | None = None

    def __str__(self) -> str:
        told = self.name
        if self.args:
            told += f"({', '.join(argument.shown for argument in self.args)})"
        if self.outcome is not None:
            told += f" with outcome {self.outcome}"
        return told


@dataclass(frozen=True)
class Expect:
    """What the reply to one turn must hold; `reply=False` expects none within `within`."""

    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    icontains: tuple[str, ...] = ()
    equals: str | None = None
    matches: re.Pattern[str] | None = None
    not_matches: re.Pattern[str] | None = None
    json: bool = False
    # The JSON Schema the reply's JSON must validate against (already checked as a schema).
    json_schema: Mapping[str, Any] | None = field(default=None, hash=False, compare=False)
    max_seconds: float | None = None
    max_first_token_seconds: float | None = None
    max_completion_tokens: int | None = None
    # The most the reply may cost, at its model's price (`[pricing]`).
    max_cost: float | None = None
    model: str | None = None
    finish_reason: str | None = None
    # The rubric a judge grades the reply against.
    judge: str | None = None
    within: float = DEFAULT_WITHIN
    reply: bool = True
    # The turn's steps: the calls expected (None: not checked), compared as `tools_order`
    # says; tools never called (`True`: no call at all); at most `max_steps` steps.
    tools: tuple[ExpectedCall, ...] | None = None
    tools_order: str = TOOLS_ORDERS[0]
    no_tools: bool | tuple[str, ...] = False
    max_steps: int | None = None


@dataclass(frozen=True)
class ConversationExpect:
    """What a whole conversation must hold (`[cases.expect_conversation]`)."""

    judge: str | None = None
    max_turn_seconds: float | None = None
    # The most the conversation's replies may cost together.
    max_cost: float | None = None
    # Every thread named by what the client received is the repeat's own (`isolation`).
    only_own_threads: bool = False


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
    expect_conversation: ConversationExpect = ConversationExpect()
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


def judge_from_environment(environ: Mapping[str, str] = os.environ) -> JudgeConfig | None:
    """The judge the `MOSAIC_JUDGE_*` variables name alone, or None when they name none."""
    base_url = environ.get(BASE_URL_VARIABLE, "")
    model = environ.get(MODEL_VARIABLE, "")
    if not (base_url and model):
        return None
    return JudgeConfig(base_url=base_url, model=model)


class _Reader:
    """Checks one parsed document key by key; each refusal names the key's line. The suite's
    and each case's keys and tables are checked apart (`collect`), so that every problem is
    found; a turn stops at its first."""

    def __init__(self, source: str, text: str, directory: Path, environ: Mapping[str, str]) -> None:
        self.source = source
        self.lines = key_lines(text)
        self.directory = directory
        self.environ = environ
        self.problems: list[SuiteFileRefused] = []

    def refuse(self, where: KeyPath, reason: str) -> SuiteFileRefused:
        # A key missing from the top of the file points at its first line.
        return SuiteFileRefused(self.source, max(line_of(self.lines, where), 1), reason)

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

    def judge(self, table: object) -> JudgeConfig | None:
        """The `[judge]` table, its gaps filled from the `MOSAIC_JUDGE_*` variables."""
        where: KeyPath = ("judge",)
        if table is None:
            if judge_from_environment(self.environ) is None:
                return None
            # The variables alone name the judge: checked as a table of nothing would be.
            table = {}
        if not isinstance(table, dict):
            raise self.refuse(where, "judge must be a table")
        self.only(table, _JUDGE_KEYS, where, "[judge]")
        base_url = table.get("base_url", self.environ.get(BASE_URL_VARIABLE, ""))
        if not isinstance(base_url, str) or not _URL.fullmatch(base_url):
            raise self.refuse(
                (*where, "base_url"),
                f"the judge needs base_url, an http:// or https:// URL (or {BASE_URL_VARIABLE})",
            )
        model = table.get("model", self.environ.get(MODEL_VARIABLE, ""))
        if not isinstance(model, str) or not model.strip():
            raise self.refuse(
                (*where, "model"), f"the judge needs model, a text (or {MODEL_VARIABLE})"
            )
        api_key_env = table.get("api_key_env")
        if api_key_env is not None:
            if not isinstance(api_key_env, str) or not _VARIABLE.fullmatch(api_key_env):
                raise self.refuse(
                    (*where, "api_key_env"),
                    "api_key_env is the NAME of the variable holding the key (A-Z, 0-9, _)",
                )
            if not self.environ.get(api_key_env):
                raise self.refuse(
                    (*where, "api_key_env"), f"api_key_env names {api_key_env}, which is not set"
                )
        votes = table.get("votes", 1)
        if not _is_int(votes) or not (1 <= votes <= VOTES_MAX and votes % 2 == 1):
            raise self.refuse(
                (*where, "votes"), f"votes must be an odd number from 1 to {VOTES_MAX}"
            )
        return JudgeConfig(base_url, model, api_key_env, votes)

    def pricing(self, table: object) -> dict[str, Price]:
        """`[pricing.MODEL]`: for each model, by the name its replies record, the price of a
        million `input` and of a million `output` tokens."""
        where: KeyPath = ("pricing",)
        if table is None:
            return {}
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise self.refuse(
                where, "pricing must be a table per model: [pricing.MODEL] input = …, output = …"
            )
        prices = {}
        for model, price in table.items():
            at = (*where, model)
            if not _is_text(model) or len(model) > MODEL_MAX:
                raise self.refuse(
                    at, f"a priced model's name must be 1 to {MODEL_MAX} characters, none a control"
                )
            self.only(price, _PRICE_KEYS, at, f"[pricing.{model}]")
            for key in sorted(_PRICE_KEYS):
                value = price.get(key)
                if not _is_number(value) or not 0 <= value <= PRICE_MAX:
                    raise self.refuse(
                        (*at, key),
                        f"[pricing.{model}] needs {key}, the price of a million {key} tokens: a "
                        f"number from 0 to {PRICE_MAX:,.0f}",
                    )
            prices[model] = Price(float(price["input"]), float(price["output"]))
        return prices

    def max_cost(self, table: Mapping[str, Any], where: KeyPath) -> float | None:
        """`max_cost`: the most a reply, or a conversation, may cost."""
        value = table.get("max_cost")
        if value is None:
            return None
        if not _is_number(value) or not 0 < value <= PRICE_MAX:
            raise self.refuse(
                where, f"max_cost must be an amount, more than 0 and at most {PRICE_MAX:,.0f}"
            )
        return float(value)

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
        if not _is_int(repeat) or not 1 <= repeat <= REPEAT_MAX:
            raise self.refuse(
                (*where, "repeat"), f"repeat must be a whole number, 1 to {REPEAT_MAX}"
            )
        return repeat

    def pass_rate(self, table: Mapping[str, Any], where: KeyPath) -> float:
        pass_rate = table.get("pass_rate", 1.0)
        if not _is_number(pass_rate) or not 0 < pass_rate <= 1:
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
        if not _is_int(max_turns) or not 1 <= max_turns <= SIMULATED_TURNS_MAX:
            raise self.refuse(
                (*where, "max_turns"),
                f"a simulated user needs max_turns, a whole number from 1 to {SIMULATED_TURNS_MAX}",
            )
        within = self.seconds(value, (*where, "within"), WITHIN_MAX)
        return Simulate(
            texts["persona"], texts["goal"], max_turns, DEFAULT_WITHIN if within is None else within
        )

    def conversation(self, table: Mapping[str, Any], where: KeyPath) -> ConversationExpect:
        value = table.get("expect_conversation", {})
        if not isinstance(value, dict):
            raise self.refuse(where, "expect_conversation must be a table")
        self.only(value, _CONVERSATION_KEYS, where, "expect_conversation")
        only_own_threads = value.get("only_own_threads", False)
        if not isinstance(only_own_threads, bool):
            raise self.refuse(
                (*where, "only_own_threads"), "only_own_threads must be true or false"
            )
        return ConversationExpect(
            judge=self.rubric(value, (*where, "judge")),
            max_turn_seconds=self.seconds(value, (*where, "max_turn_seconds"), WITHIN_MAX),
            max_cost=self.max_cost(value, (*where, "max_cost")),
            only_own_threads=only_own_threads,
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

    def expect(self, table: Mapping[str, Any], where: KeyPath) -> Expect:
        self.only(table, _EXPECT_KEYS, where, "expect")
        within = self.seconds(table, (*where, "within"), WITHIN_MAX)
        reply = table.get("reply", True)
        if not isinstance(reply, bool):
            raise self.refuse((*where, "reply"), "reply must be true or false")
        if not reply:
            about = sorted(set(table) - {"within", "reply"})
            if about:
                raise self.refuse(
                    (*where, about[0]), f"reply = false expects no reply, so {about[0]} is refused"
                )
        json_wanted = table.get("json", False)
        if not isinstance(json_wanted, bool):
            raise self.refuse((*where, "json"), "json must be true or false")
        tokens = table.get("max_completion_tokens")
        if tokens is not None and (not _is_int(tokens) or tokens < 1):
            raise self.refuse(
                (*where, "max_completion_tokens"),
                "max_completion_tokens must be a whole number ≥ 1",
            )
        return Expect(
            contains=self.texts(table, (*where, "contains")),
            not_contains=self.texts(table, (*where, "not_contains")),
            icontains=self.texts(table, (*where, "icontains")),
            equals=self.text(table, (*where, "equals"), empty=True),
            matches=self.pattern(table, (*where, "matches")),
            not_matches=self.pattern(table, (*where, "not_matches")),
            json=json_wanted,
            json_schema=self.schema(table, (*where, "json_schema")),
            max_seconds=self.seconds(table, (*where, "max_seconds"), WITHIN_MAX),
            max_first_token_seconds=self.seconds(
                table, (*where, "max_first_token_seconds"), WITHIN_MAX
            ),
            max_completion_tokens=tokens,
            max_cost=self.max_cost(table, (*where, "max_cost")),
            model=self.text(table, (*where, "model")),
            finish_reason=self.text(table, (*where, "finish_reason")),
            judge=self.rubric(table, (*where, "judge")),
            within=DEFAULT_WITHIN if within is None else within,
            reply=reply,
            **self.steps(table, where),
        )

    def steps(self, table: Mapping[str, Any], where: KeyPath) -> dict[str, Any]:
        """`tools`, `tools_order`, `no_tools` and `max_steps`, as `Expect`'s fields."""
        tools = self.tools(table, (*where, "tools"))
        order = table.get("tools_order", TOOLS_ORDERS[0])
        if order not in TOOLS_ORDERS:
            raise self.refuse(
                (*where, "tools_order"), f"tools_order must be one of {', '.join(TOOLS_ORDERS)}"
            )
        if "tools_order" in table and tools is None:
            raise self.refuse((*where, "tools_order"), "tools_order orders tools, which is absent")
        no_tools = table.get("no_tools", False)
        if not (
            isinstance(no_tools, bool)
            or (isinstance(no_tools, list) and all(_is_text(name) for name in no_tools))
        ):
            raise self.refuse(
                (*where, "no_tools"), "no_tools must be true, or a list of tools' names"
            )
        expected = {call.name for call in tools or ()}
        if no_tools is True and expected:
            raise self.refuse((*where, "no_tools"), "no_tools = true contradicts tools")
        both = sorted(expected.intersection(no_tools if isinstance(no_tools, list) else ()))
        if both:
            raise self.refuse((*where, "no_tools"), f"{both[0]} is both in tools and in no_tools")
        max_steps = table.get("max_steps")
        if max_steps is not None and (not _is_int(max_steps) or not 0 <= max_steps <= STEPS_MAX):
            raise self.refuse(
                (*where, "max_steps"), f"max_steps must be a whole number, 0 to {STEPS_MAX}"
            )
        return {
            "tools": tools,
            "tools_order": order,
            "no_tools": tuple(no_tools) if isinstance(no_tools, list) else no_tools,
            "max_steps": max_steps,
        }

    def tools(self, table: Mapping[str, Any], where: KeyPath) -> tuple[ExpectedCall, ...] | None:
        value = table.get("tools")
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
            raise self.refuse(
                where,
                'tools must be a list of calls, each a table: { name = "…", args = { … }, '
                'outcome = "…" }',
            )
        return tuple(self.tool_call(entry, (*where, i)) for i, entry in enumerate(value))

    def tool_call(self, table: Mapping[str, Any], where: KeyPath) -> ExpectedCall:
        self.only(table, _TOOL_CALL_KEYS, where, "a tools entry")
        name = table.get("name")
        if not _is_text(name):
            raise self.refuse((*where, "name"), 'a tools entry needs name, the tool\'s name ("…")')
        args = table.get("args", {})
        if not isinstance(args, dict):
            raise self.refuse(
                (*where, "args"),
                "args must be a table of the call's arguments, each with its matchers: "
                '{ title = { icontains = "…" } }',
            )
        outcome = table.get("outcome")
        if outcome is not None and outcome not in OUTCOMES:
            raise self.refuse((*where, "outcome"), f"outcome must be one of {', '.join(OUTCOMES)}")
        return ExpectedCall(
            name=name,
            args=tuple(self.argument(args, (*where, "args", key)) for key in args),
            outcome=outcome,
        )

    def argument(self, args: Mapping[str, Any], where: KeyPath) -> ArgumentExpect:
        name = str(where[-1])
        value = args[name]
        if not isinstance(value, dict) or not value:
            raise self.refuse(
                where,
                f'argument {name!r} needs a table of matchers: {{ icontains = "…" }}; it takes '
                f"{', '.join(sorted(_ARGUMENT_KEYS))}",
            )
        self.only(value, _ARGUMENT_KEYS, where, f"argument {name!r}'s matchers")
        # An argument is one value: one text is what a contains-matcher is mostly given.
        read = {
            key: [given] if key in _LIST_KEYS and isinstance(given, str) else given
            for key, given in value.items()
        }
        shown = ", ".join(
            f"{name} {key} {json.dumps(given, ensure_ascii=False)}" for key, given in value.items()
        )
        return ArgumentExpect(name, self.expect(read, where), shown)

    def seconds(self, table: Mapping[str, Any], where: KeyPath, limit: float) -> float | None:
        key = str(where[-1])
        value = table.get(key)
        if value is None:
            return None
        if not _is_number(value) or not 0 < value <= limit:
            raise self.refuse(where, f"{key} must be seconds, more than 0 and at most {limit:g}")
        return float(value)

    def text(self, table: Mapping[str, Any], where: KeyPath, *, empty: bool = False) -> str | None:
        key = str(where[-1])
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not (empty or value.strip()):
            raise self.refuse(where, f"{key} must be a text")
        return value

    def rubric(self, table: Mapping[str, Any], where: KeyPath) -> str | None:
        value = table.get(str(where[-1]))
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.refuse(where, "judge must be the rubric, a text that is not empty")
        return value

    def texts(self, table: Mapping[str, Any], where: KeyPath) -> tuple[str, ...]:
        key = str(where[-1])
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.refuse(where, f"{key} must be a list of texts, none empty")
        return tuple(value)

    def pattern(self, table: Mapping[str, Any], where: KeyPath) -> re.Pattern[str] | None:
        key = str(where[-1])
        value = table.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.refuse(where, f"{key} must be a regular expression, as a text")
        try:
            return re.compile(value)
        except re.error as error:
            raise self.refuse(where, f"{key} is not a regular expression: {error}") from error

    def schema(self, table: Mapping[str, Any], where: KeyPath) -> Mapping[str, Any] | None:
        """`json_schema`: an inline table, or a JSON file's path relative to the suite file;
        checked as a JSON Schema here, so a broken one is refused before anything is sent."""
        value = table.get("json_schema")
        if value is None:
            return None
        if isinstance(value, str):
            path = self.directory / value
            try:
                value = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as error:
                reason = getattr(error, "strerror", None) or str(error)
                raise self.refuse(where, f"json_schema {path} cannot be read ({reason})") from error
            except ValueError as error:
                raise self.refuse(where, f"json_schema {path} is not JSON: {error}") from error
        if not isinstance(value, dict):
            raise self.refuse(
                where, "json_schema must be a JSON Schema: an inline table, or a JSON file's path"
            )
        try:
            jsonschema.validators.validator_for(value).check_schema(value)
        except jsonschema.SchemaError as error:
            raise self.refuse(
                where, f"json_schema is not a JSON Schema: {error.message}"
            ) from error
        return value

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


NO_JUDGE = (
    f"this asks a judge, and none is configured: add a [judge] table, or set "
    f"{BASE_URL_VARIABLE} and {MODEL_VARIABLE}"
)


def _is_text(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip()) and not _CONTROL.search(value)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- where a key is written ----------------------------------------------------------------

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


def expect_of(table: Mapping[str, Any], *, directory: Path | None = None) -> Expect:
    """Keyword expectations (`reply.check(**expect)`), read as a suite file's `expect` table:
    the same keys, the same refusals (a `SuiteFileRefused` whose `reason` says what is wrong)."""
    reader = _Reader("reply.check", "", directory or Path.cwd(), os.environ)
    return reader.expect(table, ("expect",))
