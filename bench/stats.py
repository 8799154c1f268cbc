"""Summaries of latency samples and of repeated runs."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile; NaN for no samples."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "max": max(values) if values else float("nan"),
    }


def median_of(runs: Sequence[dict[str, Any]], key: str) -> float:
    """The median over repeats of one figure; NaN when no repeat has it."""
    values = [run[key] for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else float("nan")


def median_summary(runs: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per-figure medians of several summaries (p50 of the p50s, and so on)."""
    return {key: median_of(runs, key) for key in ("n", "p50", "p95", "p99", "max")}
