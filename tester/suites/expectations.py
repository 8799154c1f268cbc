"""What a turn's reply must hold (`expect` of a suite file), checked in the file's order.

The judge is asked last, and only when everything else held: it is the slow, costly check. A
judge that cannot be asked, or gives no valid vote, raises `JudgeError`; about a turn, its
message ends with the reply it was asked about, as a failed judgement's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .client import Outcome, Reply, describe_no_reply
from .costs import Price, Spend, money, turn_cost
from .expectation_keys import ConversationExpect, Expect
from .isolation import ThreadsHeard
from .judge import Judge, JudgeError, Transcript, Verdict, Vote, quoted
from .matchers import Failure, json_failure, text_failure
from .trajectories import steps_failure


@dataclass(frozen=True)
class Checked:
    """A turn's verdict: its first failure (None: it met every expectation), and the judge's
    votes when it was asked."""

    failure: Failure | None
    votes: tuple[Vote, ...] = field(default=())


def check_turn(
    expect: Expect,
    outcome: Outcome,
    *,
    transcript: Transcript = (),
    judge: Judge | None = None,
    price: Price | None = None,
) -> Checked:
    """`outcome` against `expect`; `transcript` is the conversation up to and including this
    reply, what a judge grades it in; `price` the price of the model the reply recorded."""
    within = f"{expect.within:g} s"
    if not expect.reply:
        # No reply expected: a stopped turn, a failed one or silence all pass.
        if outcome.reply is None:
            return Checked(None)
        return Checked(Failure(f"no reply within {within}", outcome.reply.body))
    if outcome.reply is None:
        return Checked(
            Failure(f"a reply within {within}", describe_no_reply(outcome, expect.within))
        )
    failure = first_failure(expect, outcome.reply, price)
    if failure is not None or expect.judge is None:
        return Checked(failure)
    if judge is None:
        raise ValueError("an expectation with a judge needs a judge")
    try:
        verdict = judge.grade_reply(expect.judge, transcript)
    except JudgeError as error:
        raise JudgeError(
            f"{error} — the reply: {quoted(outcome.reply.body)}", error.votes
        ) from None
    return judged(verdict, f"it ({expect.judge})", after=f" — the reply: {outcome.reply.body}")


def judged(verdict: Verdict, expected: str, *, after: str = "") -> Checked:
    """The judge's verdict as a check: when it failed, the judge was expected to pass
    `expected` and failed it for its reasons, followed by `after`."""
    if verdict.passed:
        return Checked(None, verdict.votes)
    return Checked(
        Failure(
            f"the judge passes {expected}",
            f"the judge failed it: {'; '.join(verdict.reasons)}{after}",
        ),
        verdict.votes,
    )


def first_failure(expect: Expect, reply: Reply, price: Price | None = None) -> Failure | None:
    """The first expectation short of the judge that `reply` misses, or None."""
    return (
        text_failure(expect, reply.body)
        or json_failure(expect, reply.body)
        or recorded_failure(expect, reply)
        or cost_failure(expect.max_cost, reply, price)
        or steps_failure(expect, reply.steps)
    )


def cost_failure(limit: float | None, reply: Reply, price: Price | None) -> Failure | None:
    """`max_cost`: the reply cost at most `limit` at `price`; a cost that is unknown (no
    usage recorded, no price for its model) is no pass."""
    if limit is None:
        return None
    cost = turn_cost(reply, price)
    expected = f"a cost of at most {money(limit)}"
    if cost.amount is None:
        return Failure(expected, f"the cost is unknown: {cost.unknown}")
    if cost.amount > limit:
        return Failure(
            expected,
            f"it cost {money(cost.amount)} ({cost.prompt_tokens:,} tokens in, "
            f"{cost.completion_tokens:,} out)",
        )
    return None


def recorded_failure(expect: Expect, reply: Reply) -> Failure | None:
    """Timings, and what the reply recorded of its model (SPEC §7.1)."""
    if expect.max_seconds is not None and reply.seconds > expect.max_seconds:
        return Failure(
            f"the whole reply within {expect.max_seconds:g} s", f"it took {reply.seconds:.2f} s"
        )
    limit = expect.max_first_token_seconds
    if limit is not None and reply.first_token_seconds > limit:
        return Failure(
            f"the first token within {limit:g} s",
            f"the first token came after {reply.first_token_seconds:.2f} s",
        )
    if expect.max_completion_tokens is not None:
        usage = reply.usage or {}
        tokens = usage.get("completion_tokens")
        if not isinstance(tokens, int):
            return Failure(
                f"at most {expect.max_completion_tokens} completion tokens",
                "the backend recorded no token usage",
            )
        if tokens > expect.max_completion_tokens:
            return Failure(
                f"at most {expect.max_completion_tokens} completion tokens",
                f"{tokens} completion tokens",
            )
    for name, wanted in (("model", expect.model), ("finish_reason", expect.finish_reason)):
        if wanted is None:
            continue
        recorded = reply.message.get(name)
        if recorded is None:
            return Failure(f"{name} {wanted!r}", f"the backend recorded no {name}")
        if recorded != wanted:
            return Failure(f"{name} {wanted!r}", f"{name} {recorded!r}")
    return None


def check_conversation(
    expect: ConversationExpect,
    *,
    transcript: Transcript,
    seconds: Sequence[float],
    judge: Judge | None,
    spend: Spend | None = None,
    heard: ThreadsHeard | None = None,
) -> Checked:
    """A whole conversation against `[cases.expect_conversation]`: every turn's reply within
    `max_turn_seconds`, what its turns `spend` within `max_cost`, every thread `heard` of its
    own (`only_own_threads`), then the judge over the whole transcript."""
    limit = expect.max_turn_seconds
    if limit is not None:
        for number, took in enumerate(seconds, start=1):
            if took > limit:
                return Checked(
                    Failure(f"every reply within {limit:g} s", f"turn {number} took {took:.2f} s")
                )
    failure = spend_failure(expect.max_cost, spend or Spend()) or isolation_failure(
        expect.only_own_threads, heard
    )
    if failure is not None:
        return Checked(failure)
    if expect.judge is None:
        return Checked(None)
    if judge is None:
        raise ValueError("an expectation with a judge needs a judge")
    verdict = judge.grade_conversation(expect.judge, transcript)
    return judged(verdict, f"the conversation ({expect.judge})")


def isolation_failure(only_own_threads: bool, heard: ThreadsHeard | None) -> Failure | None:
    """`only_own_threads`: no thread but the repeat's own was named by anything its client
    received (R3, R20); the first other one is told with where it was named."""
    if not only_own_threads:
        return None
    if heard is None:
        raise ValueError("only_own_threads needs the threads the client heard of")
    foreign = heard.foreign
    if not foreign:
        return None
    thread, where = next(iter(foreign.items()))
    others = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
    return Failure(
        f"only its own thread {heard.own} named in what the client received",
        f"thread {thread} was named by {where}{others}",
    )


def spend_failure(limit: float | None, spend: Spend) -> Failure | None:
    """The conversation's `max_cost`: its turns cost at most `limit` together; a turn whose
    cost is unknown makes the sum unknown, which is no pass."""
    if limit is None:
        return None
    expected = f"the conversation to cost at most {money(limit)}"
    if spend.unknown:
        return Failure(
            expected, f"the cost is unknown: {spend.unknown}, of its {spend.turns} turns"
        )
    if spend.amount > limit:
        return Failure(expected, f"it cost {money(spend.amount)}")
    return None
