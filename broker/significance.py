"""Whether a case's pass rate moved beyond chance between two suite runs: Fisher's exact test.

A stochastic assistant passes a case in some repeats and not others, so two runs' `k/N` differ
by chance alone. The broker calls a case `regressed` (or `fixed`) only when the drop (or the
rise) is significant: a one-sided Fisher exact test on the 2×2 table of passed and failed
repeats, baseline against now, whose p-value is below the run's `alpha` (strictly: p < alpha).

Pure arithmetic with exact fractions (`math.comb`), no database and no dependencies, so the
p-value of 3/3 → 0/3 is exactly 1/20 and a boundary is never decided by a rounding error.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import comb


@dataclass(frozen=True)
class Tally:
    """`passed` of `repeats` passed (0 ≤ passed ≤ repeats, repeats ≥ 1)."""

    passed: int
    repeats: int

    @property
    def rate(self) -> Fraction:
        return Fraction(self.passed, self.repeats)


def _now_passes(baseline: Tally, now: Tally) -> tuple[range, int, int, int]:
    """The hypergeometric distribution of now's passes given the table's margins: the values
    they can take, and the total passes, total repeats and now's repeats."""
    passes = baseline.passed + now.passed
    total = baseline.repeats + now.repeats
    low = max(0, passes - baseline.repeats)
    high = min(passes, now.repeats)
    return range(low, high + 1), passes, total, now.repeats


def _tail(baseline: Tally, now: Tally, *, lower: bool) -> Fraction:
    """The chance that now passes as few times as it did or fewer (`lower`), or as many or
    more. A table with x of now's repeats passing has the chance
    T(x) / C(total, drawn), T(x) = C(passes, x)·C(total − passes, drawn − x): the tail's T(x)
    are summed as integers over that one denominator, each from the one before it
    (T(x + 1) = T(x)·(passes − x)(drawn − x) / ((x + 1)(total − passes − drawn + x + 1)),
    exact in integers), so a comparison of thousands of cases of hundreds of repeats each does
    no fraction arithmetic and no binomial per table."""
    values, passes, total, drawn = _now_passes(baseline, now)
    first, last = (values.start, now.passed) if lower else (now.passed, values.stop - 1)
    table = comb(passes, first) * comb(total - passes, drawn - first)
    tables = 0
    for x in range(first, last + 1):
        tables += table
        table = table * (passes - x) * (drawn - x) // ((x + 1) * (total - passes - drawn + x + 1))
    return Fraction(tables, comb(total, drawn))


def drop_p_value(baseline: Tally, now: Tally) -> Fraction:
    """The one-sided p-value that now's pass rate is lower than the baseline's: the chance,
    with both runs' repeats drawn from one pass rate, that now passes as few as it did or
    fewer. `scipy.stats.fisher_exact([[b, n1 - b], [c, n2 - c]], alternative="greater")`."""
    return _tail(baseline, now, lower=True)


def rise_p_value(baseline: Tally, now: Tally) -> Fraction:
    """The one-sided p-value that now's pass rate is higher than the baseline's (the mirror
    of `drop_p_value`)."""
    return _tail(baseline, now, lower=False)


def change_p_value(baseline: Tally, now: Tally) -> Fraction:
    """The p-value of the change the rates show: of a drop when now's rate is not higher than
    the baseline's (equal rates included: the question a gate asks is whether it got worse),
    else of a rise."""
    if now.rate <= baseline.rate:
        return drop_p_value(baseline, now)
    return rise_p_value(baseline, now)


def significant(p_value: Fraction, alpha: float) -> bool:
    """p < alpha, with `alpha` read as the decimal it was written as (0.05 is 1/20, not the
    binary float just above it), so 3/3 → 0/3 at 0.05 is not significant."""
    return p_value < Fraction(repr(alpha))
