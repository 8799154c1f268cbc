"""What a turn's reply must hold (`expect` of a suite file), checked in the file's order."""

from __future__ import annotations

from dataclasses import dataclass

from tester.suites.client import Outcome, describe_no_reply
from tester.suites.files import Expect


@dataclass(frozen=True)
class Failure:
    """The first expectation a turn did not meet: what was expected and what came."""

    expected: str
    actual: str


def first_failure(expect: Expect, outcome: Outcome) -> Failure | None:
    """None when the outcome meets every expectation; else the first it misses."""
    within = f"{expect.within:g} s"
    if not expect.reply:
        # No reply expected: a stopped turn, a failed one or silence all pass.
        if outcome.reply is None:
            return None
        return Failure(f"no reply within {within}", outcome.reply.body)
    if outcome.reply is None:
        return Failure(f"a reply within {within}", describe_no_reply(outcome, expect.within))
    body = outcome.reply.body
    for text in expect.contains:
        if text not in body:
            return Failure(f"the reply contains {text!r}", body)
    for text in expect.not_contains:
        if text in body:
            return Failure(f"the reply does not contain {text!r}", body)
    if expect.matches is not None and expect.matches.search(body) is None:
        return Failure(f"the reply matches {expect.matches.pattern!r}", body)
    return None
