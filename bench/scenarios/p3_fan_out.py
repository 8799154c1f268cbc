"""P3: fan-out of each row to many open Consoles — the p99 until the last of them has the row,
and the rows lost — and P3 sustained: many Consoles following a steady rate of rows."""

from __future__ import annotations

from typing import Any

from bench import report
from bench.harness import Harness
from bench.plans import LAYERS
from bench.stats import median_of
from bench.streams import stream_rows


def p3_section(harness: Harness, setup: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    section = harness.section(
        f"P3 {setup}",
        f"P3 — fan-out of each row to {harness.plan.p3_consoles} open Consoles ({LAYERS[setup]})",
        "p99 to the last Console ≤ 250 ms; 0 lost",
        rows=stream_rows(runs, "last_console"),
    )
    product = median_of([r["last_console"] for r in runs["product"]], "p99")
    section["verdicts"] = [
        report.verdict("product p99 to the last Console (ms)", product, 250, higher=False),
        report.verdict("rows lost by the product", float(section["rows"][0]["lost"]), 0, False),
    ]
    section["note"] = (
        f"{harness.plan.p3_rate:.0f} rows/s; latency is from each send's scheduled time until the "
        "last of the Consoles has the row. Lost counts row × Console deliveries missing after "
        "a 3-second drain; the baseline's rows lost here are SPEC §11's silent layer drops."
    )
    harness.raw[section["key"]] = runs


def p3s_section(harness: Harness, setup: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    plan = harness.plan
    section = harness.section(
        f"P3 sustained {setup}",
        f"P3 — {plan.p3s_consoles} open Consoles × {plan.p3s_rate:.0f} rows/s ({LAYERS[setup]})",
        "p99 to the last Console ≤ 1 s; 0 lost",
        rows=stream_rows(runs, "last_console"),
    )
    product = median_of([r["last_console"] for r in runs["product"]], "p99")
    section["verdicts"] = [
        report.verdict("product p99 to the last Console (ms)", product, 1000, higher=False),
        report.verdict("rows lost by the product", float(section["rows"][0]["lost"]), 0, False),
    ]
    section["note"] = (
        f"Every Console follows the trail of the business the rows go to; {plan.repeats} "
        f"bursts of {plan.p3s_seconds:g} s at {plan.p3s_rate:.0f} sends/s, open loop. Latency "
        "and lost as in P3 above."
    )
    harness.raw[section["key"]] = runs
