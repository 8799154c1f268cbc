"""The expectations of a suite file: what a turn's reply must hold (`expect`) and what a whole
conversation must (`expect_conversation`), read key by key into `Expect` and
`ConversationExpect`, each refusal at its key's line.

A turn's expectation stops at its first mistake: its keys depend on each other (`reply = false`
refuses the rest, `tools_order` needs `tools`). The pytest plugin's `reply.check(**expect)`
reads its keywords through the same reader (`expect_of`), so a key and its refusals are the
same there. The keys are in docs/suite-file.md; they are checked against a reply by
`expectations`, `matchers` and `trajectories`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from .costs import PRICE_MAX
from .key_lines import KeyPath
from .key_reader import KeyReader, is_int, is_number, is_text
from .steps import OUTCOMES

DEFAULT_WITHIN = 30.0
# The longest wait a turn may ask for: an hour is already far beyond any reply.
WITHIN_MAX = 3600.0
# The most steps `max_steps` may allow: far beyond the rounds a turn may take (SPEC §7.2).
STEPS_MAX = 1000
# How a turn's calls are compared with `tools` (LangSmith agentevals' trajectory match modes);
# the first is the default.
TOOLS_ORDERS = ("subset", "superset", "unordered", "strict")

_CONVERSATION_KEYS = frozenset({"judge", "max_turn_seconds", "max_cost", "only_own_threads"})
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


class ExpectationReader(KeyReader):
    """Reads `expect` and `expect_conversation` tables; a refusal names the key's line."""

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
        if tokens is not None and (not is_int(tokens) or tokens < 1):
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
            or (isinstance(no_tools, list) and all(is_text(name) for name in no_tools))
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
        if max_steps is not None and (not is_int(max_steps) or not 0 <= max_steps <= STEPS_MAX):
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
        if not is_text(name):
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

    def max_cost(self, table: Mapping[str, Any], where: KeyPath) -> float | None:
        """`max_cost`: the most a reply, or a conversation, may cost."""
        value = table.get("max_cost")
        if value is None:
            return None
        if not is_number(value) or not 0 < value <= PRICE_MAX:
            raise self.refuse(
                where, f"max_cost must be an amount, more than 0 and at most {PRICE_MAX:,.0f}"
            )
        return float(value)


def expect_of(table: Mapping[str, Any], *, directory: Path | None = None) -> Expect:
    """Keyword expectations (`reply.check(**expect)`), read as a suite file's `expect` table:
    the same keys, the same refusals (a `SuiteFileRefused` whose `reason` says what is wrong)."""
    reader = ExpectationReader("reply.check", "", directory or Path.cwd(), os.environ)
    return reader.expect(table, ("expect",))
