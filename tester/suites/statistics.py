"""What a case's repeats say, with their uncertainty: its pass rate, the 95% Wilson score
interval around it, and pass^k; and how many repeats a comparison needs to show a drop.

The client holds the repeats, so it computes these and sends them with the stored record; the
listener checks they are coherent and stores them as sent. Whether a change between two runs is
significant is the listener's (a one-sided Fisher exact test on the two `k/N`): the client only
knows the smallest p-value its repeats allow, to say when no drop could be significant.
"""

from __future__ import annotations

import math
from fractions import Fraction

# The standard normal quantile of 0.975: a two-sided 95% interval.
Z_95 = 1.959963984540054
# The significance level of a comparison unless `--alpha` names another.
DEFAULT_ALPHA = 0.05


def wilson_interval(passed: int, repeats: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval for `passed` of `repeats` (Wilson 1927): unlike the normal
    approximation it stays within [0, 1] and is not empty at 0/N or N/N, where a stochastic
    assistant's cases often sit."""
    rate = passed / repeats
    spread = z * z / repeats
    centre = (rate + spread / 2) / (1 + spread)
    half = z / (1 + spread) * math.sqrt(rate * (1 - rate) / repeats + spread / (4 * repeats))
    # Exactly 0 at 0/N and 1 at N/N, whatever the float arithmetic leaves.
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == repeats else min(1.0, centre + half)
    return low, high


def pass_hat_k(passed: int, repeats: int, k: int) -> float | None:
    """pass^k as τ-bench defines it (Yao et al. 2024): the chance that k repeats drawn from the
    `repeats` run all passed, C(passed, k) / C(repeats, k). With repeats = k it is 1 when all
    passed, else 0. None when fewer than k repeats ran (a halted case)."""
    if repeats < k:
        return None
    return math.comb(passed, k) / math.comb(repeats, k)


def smallest_drop_p_value(repeats: int) -> Fraction:
    """The smallest one-sided Fisher p-value a drop can have with `repeats` in both runs:
    N/N → 0/N, 1 / C(2N, N). When it is not below alpha, no drop can be significant."""
    return Fraction(1, math.comb(2 * repeats, repeats))


def can_show_a_drop(repeats: int, alpha: float) -> bool:
    """Whether some drop between two runs of `repeats` each can be significant at `alpha`
    (p < alpha, alpha read as the decimal it was written as, as the listener reads it)."""
    return smallest_drop_p_value(repeats) < Fraction(repr(alpha))


def repeats_to_show_a_drop(alpha: float) -> int:
    """The smallest `repeat` at which a drop (all passed, then none) is significant."""
    repeats = 1
    while not can_show_a_drop(repeats, alpha):
        repeats += 1
    return repeats
