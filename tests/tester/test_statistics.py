"""A case's statistics as the client computes them (`tester.suites.statistics`).

The Wilson intervals are statsmodels' `proportion_confint(k, n, alpha=0.05, method="wilson")`
(statsmodels 0.15.0 printed (0.0, 0.5614970317550455), (0.43850296824495444, 1.0),
(0.39677814746114537, 0.8922087325936989) and (0.2076596008020477, 0.9385080552796037) for the
rows below); pass^k is τ-bench's C(c, k) / C(n, k) (Yao et al. 2024, "τ-bench").
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from tester.suites.statistics import (
    can_show_a_drop,
    pass_hat_k,
    repeats_to_show_a_drop,
    smallest_drop_p_value,
    wilson_interval,
)

WILSON = [
    ((0, 3), (0.0, 0.5614970317550455)),
    ((3, 3), (0.43850296824495444, 1.0)),
    ((7, 10), (0.39677814746114537, 0.8922087325936989)),
    ((2, 3), (0.2076596008020477, 0.9385080552796037)),
]


@pytest.mark.parametrize(("tally", "expected"), WILSON, ids=repr)
def test_wilson_interval_matches_statsmodels(
    tally: tuple[int, int], expected: tuple[float, float]
) -> None:
    low, high = wilson_interval(*tally)
    assert (low, high) == (pytest.approx(expected[0], abs=1e-12), pytest.approx(expected[1]))


def test_wilson_interval_is_exactly_closed_at_none_and_all() -> None:
    """0/N starts at 0 and N/N ends at 1 exactly, never a float's hair inside."""
    assert wilson_interval(0, 7)[0] == 0.0
    assert wilson_interval(7, 7)[1] == 1.0


@pytest.mark.parametrize(
    ("passed", "repeats", "k", "expected"),
    [
        (3, 3, 3, 1.0),  # n = k: all passed
        (2, 3, 3, 0.0),  # n = k: one failed
        (8, 10, 3, 56 / 120),  # C(8,3) / C(10,3)
        (7, 10, 1, 0.7),  # pass^1 is the pass rate
        (2, 10, 3, 0.0),  # fewer passes than k
        (2, 2, 3, None),  # fewer repeats ran than k: no estimate
    ],
    ids=repr,
)
def test_pass_hat_k_is_the_share_of_k_blocks_that_all_pass(
    passed: int, repeats: int, k: int, expected: float | None
) -> None:
    assert pass_hat_k(passed, repeats, k) == (
        expected if expected is None else pytest.approx(expected)
    )


def test_smallest_drop_p_value_is_all_then_none() -> None:
    """N/N → 0/N: 1/C(2N, N), the same as the listener's Fisher test gives for it."""
    assert [smallest_drop_p_value(n) for n in (1, 3, 4)] == [
        Fraction(1, 2),
        Fraction(1, 20),
        Fraction(1, 70),
    ]


@pytest.mark.parametrize(
    ("alpha", "fewest"), [(0.05, 4), (0.01, 5), (0.1, 3), (0.5, 2), (0.001, 7)], ids=repr
)
def test_repeats_to_show_a_drop_is_the_first_below_alpha(alpha: float, fewest: int) -> None:
    """p < alpha strictly: at 0.05, three repeats cannot (3/3 → 0/3 is p = 0.05), four can."""
    assert repeats_to_show_a_drop(alpha) == fewest
    assert can_show_a_drop(fewest, alpha)
    assert not can_show_a_drop(fewest - 1, alpha)
