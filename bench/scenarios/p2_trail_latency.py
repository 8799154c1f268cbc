"""P2: send → trail frame at one open Console, open loop at `P2_RATE` sends/s, the product
against the baseline. The product's p99 is quoted beside P7's nominal."""

from __future__ import annotations

from typing import Any

from bench import report
from bench.harness import Harness
from bench.plans import LAYERS
from bench.stats import median_of
from bench.streams import stream_rows

# The rate P2 and P1c send at, as their targets name it.
P2_RATE = 50


def p2_section(harness: Harness, setup: str, runs: dict[str, list[dict[str, Any]]]) -> float:
    """P2's table; returns the product's p99 in ms (quoted beside P7's nominal)."""
    section = harness.section(
        f"P2 {setup}",
        f"P2 — send → trail frame at one Console, {P2_RATE} sends/s ({LAYERS[setup]})",
        "p99 ≤ 1.5× the baseline's send → frame p99; 0 lost",
        rows=stream_rows(runs, "last_console"),
    )
    product = median_of([r["last_console"] for r in runs["product"]], "p99")
    baseline = median_of([r["last_console"] for r in runs["baseline"]], "p99")
    section["verdicts"] = [
        report.verdict("product p99 ÷ baseline p99", product / baseline, 1.5, higher=False),
        report.verdict("rows lost by the product", float(section["rows"][0]["lost"]), 0, False),
    ]
    section["note"] = (
        f"Open loop, {P2_RATE} sends/s, {harness.plan.repeats} bursts of "
        f"{harness.plan.p2_seconds:g} s with the Console open throughout; latency is from each "
        "send's scheduled time until its row's frame reaches the Console."
    )
    harness.raw[section["key"]] = runs
    return product
