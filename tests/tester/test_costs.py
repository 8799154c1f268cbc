"""What replies cost: each turn's tokens at its model's price, sums that count the turns whose
cost is unknown rather than reading them as zero, and `--max-cost`'s budget (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from tester.suites.client import Reply
from tester.suites.costs import (
    Budget,
    Price,
    Spend,
    TurnCost,
    instance_prices,
    money,
    plain,
    turn_cost,
)

GPT = Price(input=2.5, output=10.0)


def reply(usage: Any = None, model: str | None = "gpt-x") -> Reply:
    return Reply("ok", {"id": 2, "usage": usage, "model": model})


@pytest.mark.parametrize(
    ("made", "price", "cost", "unknown"),
    [
        # 1,000 prompt tokens at 2.5 a million and 200 completion tokens at 10 a million.
        (
            reply({"prompt_tokens": 1000, "completion_tokens": 200}),
            GPT,
            TurnCost(1000, 200, 0.0045, "gpt-x"),
            "",
        ),
        (
            reply({"prompt_tokens": 0, "completion_tokens": 0}),
            GPT,
            TurnCost(0, 0, 0.0, "gpt-x"),
            "",
        ),
        (
            reply({"prompt_tokens": 1000, "completion_tokens": 200}),
            None,
            TurnCost(1000, 200, None, "gpt-x"),
            "no price for model 'gpt-x' in the suite file's [pricing], nor for its instance in "
            "the business file",
        ),
        (
            reply({"prompt_tokens": 1000, "completion_tokens": 200}, model=None),
            None,
            TurnCost(1000, 200, None, None),
            "the reply recorded no model to price",
        ),
        (reply(None), GPT, TurnCost(model="gpt-x"), "the backend recorded no token usage"),
        # Half a usage, or counts that are no counts, are no usage.
        (
            reply({"prompt_tokens": 1000}),
            GPT,
            TurnCost(model="gpt-x"),
            "the backend recorded no token usage",
        ),
        (
            reply({"prompt_tokens": True, "completion_tokens": 2}),
            GPT,
            TurnCost(model="gpt-x"),
            "the backend recorded no token usage",
        ),
        (
            reply({"prompt_tokens": -1, "completion_tokens": 2}),
            GPT,
            TurnCost(model="gpt-x"),
            "the backend recorded no token usage",
        ),
        (None, GPT, TurnCost(), "the backend recorded no token usage"),
    ],
)
def test_turn_cost_prices_recorded_usage_or_says_why_it_is_unknown(
    made: Reply | None, price: Price | None, cost: TurnCost, unknown: str
) -> None:
    found = turn_cost(made, price)
    assert found == cost
    assert found.unknown == unknown


KNOWN = TurnCost(1000, 200, 0.0045, "gpt-x")
NO_USAGE = TurnCost(model="gpt-x")
NO_PRICE = TurnCost(30, 4, None, "other")


@pytest.mark.parametrize(
    ("costs", "told", "as_json"),
    [
        (
            [KNOWN, KNOWN],
            "tokens 2,000 in, 400 out · cost $0.009",
            {"turns": 2, "prompt_tokens": 2000, "completion_tokens": 400, "amount": 0.009,
             "turns_without_usage": 0, "turns_without_price": 0},
        ),
        (
            [KNOWN, NO_USAGE, NO_USAGE],
            "tokens 1,000 in, 200 out · cost $0.0045 (2 turns without usage)",
            {"turns": 3, "prompt_tokens": 1000, "completion_tokens": 200, "amount": 0.0045,
             "turns_without_usage": 2, "turns_without_price": 0},
        ),
        (
            [NO_USAGE],
            "tokens unknown · cost unknown (1 turn without usage)",
            {"turns": 1, "prompt_tokens": 0, "completion_tokens": 0, "amount": None,
             "turns_without_usage": 1, "turns_without_price": 0},
        ),
        (
            [NO_PRICE],
            "tokens 30 in, 4 out · cost unknown (1 turn without a price)",
            {"turns": 1, "prompt_tokens": 30, "completion_tokens": 4, "amount": None,
             "turns_without_usage": 0, "turns_without_price": 1},
        ),
        (
            [KNOWN, NO_USAGE, NO_PRICE, NO_PRICE],
            "tokens 1,060 in, 208 out · cost $0.0045 (1 turn without usage, 2 without a price)",
            {"turns": 4, "prompt_tokens": 1060, "completion_tokens": 208, "amount": 0.0045,
             "turns_without_usage": 1, "turns_without_price": 2},
        ),
        # A free model is priced at zero: that zero is known.
        (
            [TurnCost(5, 5, 0.0, "free")],
            "tokens 5 in, 5 out · cost $0",
            {"turns": 1, "prompt_tokens": 5, "completion_tokens": 5, "amount": 0.0,
             "turns_without_usage": 0, "turns_without_price": 0},
        ),
    ],
)  # fmt: skip
def test_spend_counts_unknown_turns_and_never_tells_them_as_zero(
    costs: list[TurnCost], told: str, as_json: dict[str, Any]
) -> None:
    spend = Spend.of(costs)
    assert spend.told() == told
    assert spend.as_json() == as_json
    # Sums add up whichever way they are grouped.
    assert Spend.of(costs[:1]) + Spend.of(costs[1:]) == spend


@pytest.mark.parametrize(
    ("amount", "shown", "written"),
    [
        (0.0, "$0", "0"),
        (0.0045, "$0.0045", "0.0045"),
        (0.012345, "$0.01235", "0.012345"),
        (0.5, "$0.5", "0.5"),
        (0.00000015, "$0.00000015", "0.00000015"),
        (1.0, "$1.00", "1"),
        (1234.5678, "$1,234.57", "1234.5678"),
    ],
)
def test_money_shows_cents_from_a_dollar_and_four_digits_below(
    amount: float, shown: str, written: str
) -> None:
    assert (money(amount), plain(amount)) == (shown, written)


def test_budget_counts_known_costs_and_is_reached_at_its_limit() -> None:
    budget = Budget(0.009)
    budget.add(KNOWN)
    budget.add(NO_USAGE)
    assert (budget.reached, budget.spent.without_usage) == (False, 1)
    budget.add(KNOWN)
    assert budget.reached
    assert budget.told() == "the test run reached --max-cost $0.009 ($0.009 counted)"


def test_instance_prices_read_what_the_listener_lists_of_each_instance() -> None:
    listed = [
        {"name": "assistant", "default": True, "pricing": None},
        {"name": "rival", "default": False, "pricing": {"input": 0, "output": 4.5}},
        # A listener older than prices lists none.
        {"name": "old", "default": False},
        {"name": "odd", "default": False, "pricing": {"input": "1"}},
    ]
    assert instance_prices(listed) == {"rival": Price(0.0, 4.5)}
