"""P1: each server's sends/s through POST …/messages, the product against the baseline, with
`p1_concurrency` sends always in flight (closed loop); the database's commit floor (`bench.floor`:
one connection committing one-row inserts) stands beside them for scale. The product's sends/s
on PostgreSQL + Redis is P7's capacity."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from bench import processes as proc
from bench import report
from bench.harness import Harness
from bench.plans import LAYERS, SERVICES, Plan
from bench.stats import median_of, median_summary

# Product ÷ baseline, at least. On PostgreSQL + Redis, the configuration a deployment that
# outgrows SQLite moves to, the product is to keep the lead it has on SQLite.
P1_TARGETS = {SERVICES: 1.5}
P1_TARGET = 1.0


def p1_config(plan: Plan) -> dict[str, Any]:
    return {"scenario": "closed", "concurrency": plan.p1_concurrency, "window": plan.p1_seconds}


def sends_per_second(
    harness: Harness, pair: list[tuple[str, proc.Process, list[int]]], floor: Callable[[], float]
) -> dict[str, Any]:
    """P1: each server's sends/s with `p1_concurrency` sends always in flight."""
    plan = harness.plan
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in pair}
    floors = []
    for repeat in range(plan.repeats):
        for name, server, threads in harness.order(repeat, pair):
            result = proc.load(
                {**p1_config(plan), "run": harness.tag(), "target": harness.target(server, threads)}
            )
            runs[name].append(result)
            harness.log(f"P1 {name}: {result['throughput']:.0f} sends/s {result['statuses']}")
        floors.append(floor())
    return {"runs": runs, "floors": floors}


def sqlite_floor(harness: Harness) -> float:
    path = harness.workdir / f"floor-{harness.tag()}.sqlite3"
    seconds = min(2.0, harness.plan.p1_seconds)
    done = subprocess.run(
        [sys.executable, "-m", "bench.floor", "sqlite", str(path), str(seconds)],
        cwd=proc.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return float(json.loads(done.stdout.splitlines()[-1])["result"]["commits_per_s"])


def pg_floor(harness: Harness, url: str) -> float:
    seconds = min(2.0, harness.plan.p1_seconds)
    done = subprocess.run(
        [sys.executable, "-m", "bench.floor", "postgres", url, str(seconds)],
        cwd=proc.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return float(json.loads(done.stdout.splitlines()[-1])["result"]["commits_per_s"])


def p1_section(harness: Harness, setup: str, measured: dict[str, Any]) -> float:
    """P1's table; returns the product's sends/s (P7's capacity)."""
    runs = measured["runs"]
    product = median_of(runs["product"], "throughput")
    baseline = median_of(runs["baseline"], "throughput")
    floor = statistics.median(measured["floors"])
    target = P1_TARGETS.get(setup, P1_TARGET)
    section = harness.section(
        f"P1 {setup}",
        f"P1 — sends/s through POST …/messages, {harness.plan.p1_concurrency} concurrent "
        f"({LAYERS[setup]})",
        f"≥ {target:g}× the baseline's sends/s",
    )
    for name in ("product", "baseline"):
        errors = sum(
            n for r in runs[name] for status, n in r["statuses"].items() if status[0] != "2"
        )
        section["rows"].append(
            {
                "setup": name,
                "latency": median_summary([r["latency"] for r in runs[name]]),
                "errors": errors,
                "figure": f"{median_of(runs[name], 'throughput'):.0f} sends/s ("
                + ", ".join(f"{r['throughput']:.0f}" for r in runs[name])
                + ")",
            }
        )
    section["rows"].append({"setup": "commit floor", "figure": f"{floor:.0f} commits/s"})
    section["verdicts"] = [
        report.verdict("product ÷ baseline", product / baseline, target, higher=True),
    ]
    section["note"] = (
        f"Closed loop: {harness.plan.p1_concurrency} senders on keep-alive connections, each "
        f"sending again as soon as its answer came, for {harness.plan.p1_seconds:g} s per repeat; "
        "sends/s is the 2xx answers within the window, and the latencies are those of a server "
        f"with {harness.plan.p1_concurrency} sends always in flight. Product and baseline "
        "alternate who goes first. The product's sends go round-robin to 20 threads. The commit "
        "floor (one connection committing one-row inserts) is for scale, not a target."
    )
    harness.raw[section["key"]] = measured
    return product
