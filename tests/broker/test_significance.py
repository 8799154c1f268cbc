"""Fisher's exact test as the broker applies it to two runs' `k/N` (`broker.significance`).

The reference p-values are SciPy's: `scipy.stats.fisher_exact([[b, n1 - b], [c, n2 - c]],
alternative="greater")` for a drop from b/n1 to c/n2 (SciPy 1.17.1 printed 0.05000000000000001,
0.016253869969040248, 0.20000000000000004, 0.014285714285714284 and 1.0 for the rows below); the
exact fractions are the hypergeometric sums by hand, e.g. 3/3 → 0/3: C(3,3)·C(3,0)/C(6,3) = 1/20.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from broker.significance import (
    Tally,
    change_p_value,
    drop_p_value,
    rise_p_value,
    significant,
)

# baseline k/N → now k/N, the one-sided p-value of the drop, exactly and as SciPy prints it.
DROPS = [
    ((3, 3), (0, 3), Fraction(1, 20), 0.05000000000000001),
    ((10, 10), (5, 10), Fraction(3003, 184756), 0.016253869969040248),
    ((2, 3), (0, 3), Fraction(1, 5), 0.20000000000000004),
    ((4, 4), (0, 4), Fraction(1, 70), 0.014285714285714284),
    ((0, 3), (3, 3), Fraction(1), 1.0),
]


@pytest.mark.parametrize(("before", "now", "exact", "scipy"), DROPS, ids=repr)
def test_drop_p_value_matches_the_reference(
    before: tuple[int, int], now: tuple[int, int], exact: Fraction, scipy: float
) -> None:
    p_value = drop_p_value(Tally(*before), Tally(*now))
    assert p_value == exact
    assert float(p_value) == pytest.approx(scipy, rel=1e-12)


def test_rise_p_value_mirrors_the_drop() -> None:
    """0/4 → 4/4 rising is as unlikely as 4/4 → 0/4 falling; a drop is no rise at all."""
    assert rise_p_value(Tally(0, 4), Tally(4, 4)) == Fraction(1, 70)
    assert rise_p_value(Tally(4, 4), Tally(0, 4)) == Fraction(1)


def test_change_p_value_follows_the_rates_direction() -> None:
    """Lower or equal rates: the drop's p-value; a higher rate: the rise's."""
    assert change_p_value(Tally(3, 3), Tally(0, 3)) == Fraction(1, 20)
    assert change_p_value(Tally(0, 3), Tally(3, 3)) == Fraction(1, 20)
    assert change_p_value(Tally(2, 4), Tally(2, 4)) == drop_p_value(Tally(2, 4), Tally(2, 4))


def test_unequal_repeats_are_tested_as_they_are() -> None:
    """1/1 → 1/3: now passing one of three, of two passes in four repeats, has p =
    C(2,1)·C(2,2)/C(4,3) = 1/2: one repeat says almost nothing."""
    assert drop_p_value(Tally(1, 1), Tally(1, 3)) == Fraction(1, 2)


@pytest.mark.parametrize(
    ("p_value", "alpha", "expected"),
    [
        (Fraction(1, 20), 0.05, False),  # the boundary is not significant: p < alpha
        (Fraction(1, 70), 0.05, True),
        (Fraction(1, 20), 0.1, True),
        (Fraction(1, 100), 0.01, False),
        (Fraction(99, 10_000), 0.01, True),
    ],
    ids=repr,
)
def test_significant_is_strictly_below_alpha_as_written(
    p_value: Fraction, alpha: float, expected: bool
) -> None:
    """alpha is read as the decimal it was written as: 0.05 is 1/20 exactly, so a p-value of
    1/20 is not below it, whatever the float 0.05 rounds to."""
    assert significant(p_value, alpha) is expected
