"""A case's definition, hashed: what it sends and expects, so a comparison can tell a case that
changed from one that regressed.

The hash is the sha256 of the case's canonical definition as JSON (keys sorted, no spaces): its
turns (each `send`, `regenerate` and `expect`, a JSON Schema as its content), its simulated
user, its `expect_conversation`, and, when it asks the judge, the judge's model and votes. Not
part of it: the case's name and instance (a stored case is found by them), `repeat` and
`pass_rate` (how often and how strictly it is run, not what it tests), the lines it was read
from, and where the judge is served (`base_url`, the key's variable). A field left at its
default is left out, so a version of the client that learns a new key with a default gives
every existing case the same hash as before.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from .files import Case, Suite

# Positions in the file and texts derived from the rest: not the definition.
_NOT_DEFINITION = frozenset({"line", "shown"})


def _is_default(field: dataclasses.Field[Any], value: object) -> bool:
    if field.default is not dataclasses.MISSING:
        return bool(value == field.default)
    if field.default_factory is not dataclasses.MISSING:
        return bool(value == field.default_factory())
    return False


def canonical(value: object) -> Any:
    """`value` as plain JSON: dataclasses as objects of their fields (defaults left out),
    regular expressions as their pattern and flags, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: canonical(getattr(value, field.name))
            for field in dataclasses.fields(value)
            if field.name not in _NOT_DEFINITION
            and not _is_default(field, getattr(value, field.name))
        }
    if isinstance(value, re.Pattern):
        return {"pattern": value.pattern, "flags": value.flags}
    if isinstance(value, Mapping):
        return {str(key): canonical(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    return value


def definition(suite: Suite, case: Case) -> dict[str, Any]:
    """What the case tests, as plain JSON."""
    told: dict[str, Any] = {
        "turns": canonical(case.turns),
        "simulate": canonical(case.simulate),
        "expect_conversation": canonical(case.expect_conversation),
    }
    if case.uses_judge and suite.judge is not None:
        told["judge"] = {"model": suite.judge.model, "votes": suite.judge.votes}
    return told


def definition_hash(suite: Suite, case: Case) -> str:
    """The sha256 of the case's canonical definition, 64 lowercase hexadecimal digits."""
    text = json.dumps(
        definition(suite, case), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
