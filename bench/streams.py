"""What the stream scenarios share, P2 (with P1c's CPU reading) and P3: their load of open
Consoles and bursts of sends, and their table rows."""

from __future__ import annotations

from typing import Any

from bench import processes as proc
from bench.harness import Harness
from bench.stats import median_summary


def streams(
    harness: Harness,
    pair: list[tuple[str, proc.Process, list[int]]],
    *,
    consoles: int,
    rate: float,
    seconds: float,
    label: str,
    cpu: bool = False,
) -> dict[str, list[dict[str, Any]]]:
    """Each server's Consoles open once; the repeats are bursts of sends measured apart."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, server, threads in pair:
        runs[name] = proc.load(
            {
                "scenario": "stream",
                "run": harness.tag(),
                "target": harness.target(server, threads),
                "consoles": consoles,
                "rate": rate,
                "duration": seconds,
                "bursts": harness.plan.repeats,
                "drain": 3.0,
                "settle": 1.0 if consoles > 1 else 0.3,
                "cpu_pid": server.pid if cpu else None,
            }
        )
        for result in runs[name]:
            harness.log(
                f"{label} {name}: p99 {result['last_console']['p99']} ms to the last Console, "
                f"lost {result['lost']}, out of order {result['out_of_order']}"
                + (f", {1000 * result['cpu_per_send']:.2f} ms CPU/send" if cpu else "")
            )
    return runs


def stream_rows(runs: dict[str, list[dict[str, Any]]], figure: str) -> list[dict[str, Any]]:
    rows = []
    for name, results in runs.items():
        rows.append(
            {
                "setup": name,
                "latency": median_summary([r[figure] for r in results]),
                "lost": sum(r["lost"] for r in results),
                "duplicates": sum(r["duplicates"] for r in results),
                "out_of_order": sum(r["out_of_order"] for r in results),
                "errors": sum(
                    n
                    for r in results
                    for status, n in r["sends"]["statuses"].items()
                    if status[0] != "2"
                ),
                "figure": f"{sum(r['rows'] for r in results)} rows × {results[0]['consoles']} "
                f"Consoles; {results[0]['connect_retries']} connect retries",
            }
        )
    return rows
