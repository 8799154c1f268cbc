"""What a turn's steps must hold: `max_steps`, `no_tools`, and `tools` compared as
`tools_order` says, with the four trajectory match modes of LangSmith's agentevals:

- `strict`: the same calls in the same order, one for one.
- `unordered`: the same calls in any order (as multisets: each expected entry pairs with one
  call of its own, and no call is left over).
- `subset` (the default): every call the turn made is among the expected ones (each pairs with
  an entry of its own); an expected call not made is no miss.
- `superset`: every expected call is among the calls made (each pairs with a call of its own);
  other calls are no miss.

An entry matches a call when the tool is the same, each argument it names holds its matchers
(arguments it does not name are free) and, when it says one, the outcome is the same.
agentevals pairs calls with entries greedily, first come first served; here the pairing is a
maximum matching, which finds a pairing whenever there is one (with entries that match
different calls, `{ name = "t" }` and `{ name = "t", args = … }`, the greedy one can miss it).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .expectation_keys import ArgumentExpect, Expect, ExpectedCall
from .matchers import Failure, schema_failure, text_failure
from .steps import Step, describe_step, describe_steps


def steps_failure(expect: Expect, steps: Sequence[Step]) -> Failure | None:
    """The first of `max_steps`, `no_tools` and `tools` that `steps` misses, or None."""
    actual = f"the turn's steps: {describe_steps(steps)}"
    if expect.max_steps is not None and len(steps) > expect.max_steps:
        return Failure(f"at most {expect.max_steps} steps", f"{len(steps)} steps: {actual}")
    if expect.no_tools is True and steps:
        return Failure("no tool call", actual)
    if isinstance(expect.no_tools, tuple):
        for step in steps:
            if step.tool in expect.no_tools:
                return Failure(f"no call to {step.tool}", actual)
    if expect.tools is None:
        return None
    missed = ORDERS[expect.tools_order](expect.tools, steps)
    return None if missed is None else Failure(missed, actual)


def argument_holds(argument: ArgumentExpect, arguments: Any) -> bool:
    """The named argument is there and holds its matchers."""
    if not isinstance(arguments, dict) or argument.name not in arguments:
        return False
    value = arguments[argument.name]
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if text_failure(argument.expect, text) is not None:
        return False
    schema = argument.expect.json_schema
    return schema is None or schema_failure(schema, value, what=argument.name) is None


def matches(call: ExpectedCall, step: Step) -> bool:
    """`step` is a call `call` expects."""
    return (
        step.tool == call.name
        and (call.outcome is None or step.outcome == call.outcome)
        and all(argument_holds(argument, step.arguments) for argument in call.args)
    )


def pairing(calls: Sequence[ExpectedCall], steps: Sequence[Step]) -> dict[int, int]:
    """A maximum matching of entries to steps (entry index → step index), by augmenting
    paths: a turn has few steps, so this is cheap."""
    fits = [[j for j, step in enumerate(steps) if matches(call, step)] for call in calls]
    step_to_call: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in step_to_call or augment(step_to_call[j], seen):
                step_to_call[j] = i
                return True
        return False

    for i in range(len(calls)):
        augment(i, set())
    return {i: j for j, i in step_to_call.items()}


def _call(call: ExpectedCall) -> str:
    return f"a call {call}"


def _extra(calls: Sequence[ExpectedCall], step: Step) -> str:
    among = f"only calls among: {'; '.join(map(str, calls))}" if calls else "no tool call"
    return f"{among} — not {describe_step(step)}"


def strict(calls: Sequence[ExpectedCall], steps: Sequence[Step]) -> str | None:
    for number, (call, step) in enumerate(zip(calls, steps, strict=False), start=1):
        if not matches(call, step):
            return f"call {number} to be {call}, not {describe_step(step)}"
    if len(steps) < len(calls):
        return f"call {len(steps) + 1} to be {calls[len(steps)]}, and none came"
    if len(steps) > len(calls):
        extra = describe_step(steps[len(calls)])
        return f"{len(calls)} calls, with no call after them; then came {extra}"
    return None


def unordered(calls: Sequence[ExpectedCall], steps: Sequence[Step]) -> str | None:
    return superset(calls, steps) or subset(calls, steps)


def subset(calls: Sequence[ExpectedCall], steps: Sequence[Step]) -> str | None:
    paired = set(pairing(calls, steps).values())
    extra = next((step for j, step in enumerate(steps) if j not in paired), None)
    return None if extra is None else _extra(calls, extra)


def superset(calls: Sequence[ExpectedCall], steps: Sequence[Step]) -> str | None:
    paired = pairing(calls, steps)
    missed = next((call for i, call in enumerate(calls) if i not in paired), None)
    return None if missed is None else _call(missed)


ORDERS: dict[str, Callable[[Sequence[ExpectedCall], Sequence[Step]], str | None]] = {
    "subset": subset,
    "superset": superset,
    "unordered": unordered,
    "strict": strict,
}
