"""P1c: each server's CPU per send at P2's rate, read over P2's bursts (`bench.streams`, from
`bench.cpu`'s reading of /proc), the product against the baseline."""

from __future__ import annotations

import math
import statistics
from typing import Any

from bench import report
from bench.harness import Harness
from bench.plans import LAYERS, SERVICES
from bench.scenarios.p2_trail_latency import P2_RATE

# Product CPU per send ÷ the baseline's, at most: on PostgreSQL + Redis the product is to spend
# less than the plain app, as it does on SQLite.
P1C_TARGETS = {SERVICES: 0.8}
P1C_TARGET = 1.25


def p1c_section(harness: Harness, setup: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    target = P1C_TARGETS.get(setup, P1C_TARGET)
    section = harness.section(
        f"P1c {setup}",
        f"P1c — server CPU per send at {P2_RATE} sends/s ({LAYERS[setup]})",
        f"≤ {target:g}× the baseline's CPU per send",
    )
    figures = {}
    for name in ("product", "baseline"):
        per_send = [r["cpu_per_send"] for r in runs[name] if r.get("cpu_per_send") is not None]
        figures[name] = statistics.median(per_send) if per_send else math.nan
        section["rows"].append(
            {
                "setup": name,
                "figure": f"{1000 * figures[name]:.2f} ms CPU per send ("
                + ", ".join(f"{1000 * v:.2f}" for v in per_send)
                + ")",
            }
        )
    section["verdicts"] = [
        report.verdict(
            "product CPU per send ÷ baseline's",
            figures["product"] / figures["baseline"],
            target,
            higher=False,
        )
    ]
    section["note"] = (
        "Measured over P2's bursts (open loop, one Console open): the server's process tree's "
        "CPU time (utime + stime of the process and its descendants, from /proc) from the "
        "burst's first send until its last row reached the Console, divided by the sends "
        "answered 2xx. The server is pinned to one CPU and the load generator to the other."
    )
