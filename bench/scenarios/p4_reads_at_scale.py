"""P4: the thread list and a message page with many threads and messages seeded (`bench.seed`),
beside the same reads with 10 threads; and the selectors' query counts at both sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import processes as proc
from bench import report
from bench.harness import Harness
from bench.stats import median_summary

# P4 measures how long one read takes at scale, not how many reads the server bears: each path
# is read at a rate well inside one server's capacity, so the figure is not queueing.
P4_RATE = 10


def p4(harness: Harness, template: Path) -> None:
    plan = harness.plan
    database = harness.sqlite_copy(template, "p4")
    seeded = proc.seed(database, plan.p4_threads, plan.p4_messages)
    harness.log(f"P4 seeded {seeded['threads']} threads, {seeded['messages']} messages")
    server = proc.product_server(harness.workdir, database, label="product-p4")
    paths = {
        f"thread list ({plan.p4_threads:,} threads)": (
            f"/api/chat/threads?project={seeded['big_project']}"
        ),
        f"message page ({plan.p4_messages // 10:,} in the thread)": (
            f"/api/chat/threads/{seeded['big_thread']}/messages"
        ),
        "thread list (10 threads)": f"/api/chat/threads?project={seeded['small_project']}",
        "message page (10 in the thread)": f"/api/chat/threads/{seeded['small_thread']}/messages",
    }
    runs: list[dict[str, Any]] = []
    with harness.running(server):
        for _ in range(plan.slow_repeats):
            runs.append(
                proc.load(
                    {
                        "scenario": "reads",
                        "run": harness.tag(),
                        "target": harness.target(server),
                        "paths": paths,
                        "rate": P4_RATE,
                        "duration": plan.p4_seconds,
                    }
                )
            )
    section = harness.section(
        "P4",
        f"P4 — thread list and message page with {seeded['threads']:,} threads and "
        f"{seeded['messages']:,} messages (SQLite)",
        "p99 ≤ 20 ms; query count the same as with 10 threads",
    )
    p99s = []
    for name in paths:
        latency = median_summary([r[name]["latency"] for r in runs])
        errors = sum(n for r in runs for s, n in r[name]["statuses"].items() if s[0] != "2")
        section["rows"].append({"setup": name, "latency": latency, "errors": errors})
        if "10 " not in name:
            p99s.append(latency["p99"])
    counts = seeded["queries"]
    section["verdicts"] = [
        report.verdict("worst p99 of the two big reads (ms)", max(p99s), 20, higher=False),
        report.check(
            "selector queries, big vs 10 threads: thread list "
            f"{counts['big']['threads']} vs {counts['small']['threads']}, message page "
            f"{counts['big']['messages']} vs {counts['small']['messages']}",
            counts["big"] == counts["small"],
        ),
    ]
    section["note"] = (
        f"{P4_RATE} reads/s of each path, open-loop, newest page (limit 100). Rows inserted in "
        "bulk; the thread list is of one project holding every seeded thread. Query counts are "
        "pinned in tests/broker/test_query_counts.py."
    )
    harness.raw["P4"] = {"seeded": seeded, "runs": runs}
