"""The text and JSON matchers of an `expect` table, over any text: a reply's body, or one
argument of a tool call (`tools = [{ args = { title = { icontains = "…" } } }]`).

Each returns the first `Failure` (what was expected, what came) or None; `what` names the text
in the failure ("the reply").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from .expectation_keys import Expect

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Failure:
    """The first expectation a turn did not meet: what was expected and what came."""

    expected: str
    actual: str


class NoJson(ValueError):
    """Neither the reply nor its only fenced code block is JSON."""


def json_of(body: str) -> Any:
    """The JSON the reply holds: the whole reply, or its only fenced code block."""
    try:
        return json.loads(body)
    except json.JSONDecodeError as whole:
        blocks = _FENCE.findall(body)
        if len(blocks) != 1:
            raise NoJson(
                f"not JSON ({whole.msg}), and {len(blocks)} fenced code blocks, not one"
            ) from None
        try:
            return json.loads(blocks[0])
        except json.JSONDecodeError as fenced:
            raise NoJson(f"its fenced code block is not JSON ({fenced.msg})") from None


def text_failure(expect: Expect, body: str, *, what: str = "the reply") -> Failure | None:
    """`contains`, `not_contains`, `icontains`, `equals`, `matches`, `not_matches`, in order."""
    for text in expect.contains:
        if text not in body:
            return Failure(f"{what} contains {text!r}", body)
    for text in expect.not_contains:
        if text in body:
            return Failure(f"{what} does not contain {text!r}", body)
    folded = body.casefold()
    for text in expect.icontains:
        if text.casefold() not in folded:
            return Failure(f"{what} contains {text!r}, in any case", body)
    if expect.equals is not None and body.strip() != expect.equals.strip():
        return Failure(f"{what} is {expect.equals.strip()!r}", body)
    if expect.matches is not None and expect.matches.search(body) is None:
        return Failure(f"{what} matches {expect.matches.pattern!r}", body)
    if expect.not_matches is not None and expect.not_matches.search(body) is not None:
        return Failure(f"{what} does not match {expect.not_matches.pattern!r}", body)
    return None


def json_failure(expect: Expect, body: str) -> Failure | None:
    """`json` and `json_schema` over a reply: the reply, or its only fenced block, is JSON."""
    if not (expect.json or expect.json_schema is not None):
        return None
    try:
        data = json_of(body)
    except NoJson as error:
        return Failure("the reply is JSON, or its only fenced code block is", f"{error}: {body}")
    if expect.json_schema is None:
        return None
    return schema_failure(expect.json_schema, data, what="the reply's JSON")


def schema_failure(schema: Mapping[str, Any], data: Any, *, what: str) -> Failure | None:
    """`data` against a JSON Schema already checked as one; the best error says where."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    invalid = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if invalid is None:
        return None
    where = "/".join(str(part) for part in invalid.absolute_path) or "the top"
    return Failure(f"{what} matches its json_schema", f"at {where}: {invalid.message}")
