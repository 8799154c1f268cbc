"""What a test run's replies cost: the tokens each reply recorded, at its model's prices.

A suite file's `[pricing.MODEL]` gives `input` and `output`, each the price of a million
tokens; for a model it does not price, the instance's own prices (the business file's
`reply.pricing`, as `GET /api/chat/instances` lists them) apply. A turn's cost is known when
its reply recorded both token counts (SPEC §7.1's `usage`) and has a price; otherwise it is
unknown, and counted as unknown, never
as zero: a turn without usage (no reply, or a backend that reports none) and a turn whose model
has no price are each counted, and every report says how many (`Spend`). `Budget` is
`--max-cost`: the known cost of a whole test run against its limit.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from .client import Reply

# Prices are of a million tokens; the largest a price or a limit may be.
MILLION = 1_000_000
PRICE_MAX = 1_000_000.0


@dataclass(frozen=True)
class Price:
    """A model's prices: of a million prompt (`input`) and completion (`output`) tokens."""

    input: float
    output: float


@dataclass(frozen=True)
class TurnCost:
    """What one turn's reply used and cost; None where it is unknown. `model` is the model the
    reply recorded, named when it has no price."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    amount: float | None = None
    model: str | None = None

    @property
    def has_usage(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None

    @property
    def unknown(self) -> str:
        """Why the cost is unknown (empty when it is known)."""
        if self.amount is not None:
            return ""
        if not self.has_usage:
            return "the backend recorded no token usage"
        if self.model is None:
            return "the reply recorded no model to price"
        return (
            f"no price for model {self.model!r} in the suite file's [pricing], nor for its "
            "instance in the business file"
        )


def turn_cost(reply: Reply | None, price: Price | None) -> TurnCost:
    """The cost of `reply` at `price`, as far as it is known."""
    if reply is None:
        return TurnCost()
    usage = reply.usage or {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not (_is_count(prompt) and _is_count(completion)):
        return TurnCost(model=reply.model)
    amount = None
    if price is not None:
        amount = (prompt * price.input + completion * price.output) / MILLION
    return TurnCost(prompt, completion, amount, reply.model)


def instance_prices(instances: Iterable[Mapping[str, Any]]) -> dict[str, Price]:
    """Each instance's prices as the listener lists them; an instance without (or a listener
    that does not list them) has none."""
    prices = {}
    for instance in instances:
        pricing = instance.get("pricing")
        if isinstance(pricing, Mapping) and all(
            _is_price(pricing.get(key)) for key in ("input", "output")
        ):
            prices[str(instance["name"])] = Price(float(pricing["input"]), float(pricing["output"]))
    return prices


def _is_price(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class Spend:
    """The tokens and cost of some turns: the sums over those whose usage (and price) is
    known, and how many had none."""

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    amount: float = 0.0
    without_usage: int = 0
    without_price: int = 0

    @classmethod
    def of(cls, costs: Iterable[TurnCost]) -> Spend:
        total = cls()
        for cost in costs:
            total += cls(
                turns=1,
                prompt_tokens=cost.prompt_tokens or 0,
                completion_tokens=cost.completion_tokens or 0,
                amount=cost.amount or 0.0,
                without_usage=0 if cost.has_usage else 1,
                without_price=1 if cost.has_usage and cost.amount is None else 0,
            )
        return total

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.turns + other.turns,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.amount + other.amount,
            self.without_usage + other.without_usage,
            self.without_price + other.without_price,
        )

    @property
    def with_usage(self) -> int:
        return self.turns - self.without_usage

    @property
    def priced(self) -> int:
        return self.with_usage - self.without_price

    @property
    def unknown(self) -> str:
        """How many turns' cost is unknown, and why: `2 turns without usage, 1 without a
        price`; empty when every turn's is known."""
        parts = []
        if self.without_usage:
            parts.append(f"{_turns(self.without_usage)} without usage")
        if self.without_price:
            counted = str(self.without_price) if parts else _turns(self.without_price)
            parts.append(f"{counted} without a price")
        return ", ".join(parts)

    def told(self) -> str:
        """`tokens 1,234 in, 56 out · cost $0.0123 (2 turns without usage)`: what is known,
        and how many turns are not, never a zero for what is unknown."""
        tokens = (
            f"tokens {self.prompt_tokens:,} in, {self.completion_tokens:,} out"
            if self.with_usage
            else "tokens unknown"
        )
        cost = f"cost {money(self.amount)}" if self.priced else "cost unknown"
        unknown = f" ({self.unknown})" if self.unknown else ""
        return f"{tokens} · {cost}{unknown}"

    def as_json(self) -> dict[str, Any]:
        """The sums of the turns whose usage (and price) is known; `amount` null when no turn
        was priced."""
        return {
            "turns": self.turns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "amount": round(self.amount, 10) if self.priced else None,
            "turns_without_usage": self.without_usage,
            "turns_without_price": self.without_price,
        }


def _turns(count: int) -> str:
    return f"{count} turn" if count == 1 else f"{count} turns"


def money(amount: float) -> str:
    """An amount as a person reads it: cents from a dollar up, four significant digits below."""
    if amount >= 1:
        return f"${amount:,.2f}"
    if amount <= 0:
        return "$0"
    digits = min(12, max(2, 3 - math.floor(math.log10(amount))))
    return "$" + f"{amount:.{digits}f}".rstrip("0").rstrip(".")


def plain(amount: float) -> str:
    """An amount for a machine: a decimal number, no exponent, no currency."""
    return f"{amount:.10f}".rstrip("0").rstrip(".") or "0"


class Budget:
    """`--max-cost`: the known cost of the test run's turns so far, shared by every repeat;
    `reached` once it is at the limit. A turn whose cost is unknown adds nothing to it and is
    counted in `spent` as such."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._spent = Spend()

    def add(self, cost: TurnCost) -> None:
        with self._lock:
            self._spent += Spend.of([cost])

    @property
    def spent(self) -> Spend:
        with self._lock:
            return self._spent

    @property
    def reached(self) -> bool:
        return self.spent.amount >= self.limit

    def told(self) -> str:
        """`the test run reached --max-cost $0.50 ($0.5123 counted)`."""
        return (
            f"the test run reached --max-cost {money(self.limit)} "
            f"({money(self.spent.amount)} counted)"
        )
