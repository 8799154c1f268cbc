"""P5: the assistant's replies. Offline: send → RESULT reply at a trail Console, the offline
backend answering at once (what the bus adds) and at its default pace (as `make run`). Concurrency
(full run): replies/s of `runassistant` processes against a model taking 200 ms per reply, with 50
busy threads — one turn at a time against the default on SQLite, one runner against two on
PostgreSQL."""

from __future__ import annotations

import math
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

from bench import processes as proc
from bench import report
from bench.harness import Harness
from bench.plans import Plan
from bench.postgres_sampler import PostgresSampler
from bench.stats import median_of, median_summary

# P5's model answers each request after this long; the runners' default concurrency (a
# runner's threads, `runner.service.DEFAULT_CONCURRENCY`); how long the runners run
# before the window.
P5_MODEL_SECONDS = 0.2
P5_RUNNER_CONCURRENCY = 8
P5_SETTLE = 0.5
# Two turns at a time per runner: one runner is held to 10 replies/s by the model, with CPU to
# spare for a second (P5's runners ÷ one at a load the machine carries).
P5_UNLOADED_CONCURRENCY = 2
UNLOADED_ONE = f"one runner, {P5_UNLOADED_CONCURRENCY} turns at a time"
UNLOADED_TWO = f"two runners, {P5_UNLOADED_CONCURRENCY} turns at a time each"


# P5 offline measures what the bus adds to a reply, so its verdict is taken with the offline
# backend answering at once; the paced row shows what `make run` looks like with drafts
# (MOSAIC_OFFLINE_PACE, SPEC §7.1), where the pauses are the backend's, not the bus's.
P5_PACES = (("bus only (pace 0)", "0"), ("as `make run` (default pace)", None))


def p5_offline(harness: Harness, template: Path) -> None:
    plan = harness.plan
    by_pace: dict[str, list[dict[str, Any]]] = {}
    for setup, pace in P5_PACES:
        backend = {} if pace is None else {"MOSAIC_OFFLINE_PACE": pace}
        label = "product-p5" if pace is None else "product-p5-unpaced"
        server = proc.product_server(
            harness.workdir,
            harness.sqlite_copy(template, label),
            runner=True,
            backend=backend,
            label=label,
        )
        runs = by_pace[setup] = []
        with harness.running(server):
            server.wait_for_line("assistant runner")
            for _ in range(plan.slow_repeats):
                threads = harness.threads(server, plan.p5_sends)
                result = proc.load(
                    {
                        "scenario": "replies",
                        "run": harness.tag(),
                        "target": harness.target(server, threads),
                        "rate": 5,
                        "drain": 10.0,
                    }
                )
                runs.append(result)
                harness.log(
                    f"P5 offline, {setup}: p50 {result['reply']['p50']} ms, lost {result['lost']}"
                )
    section = harness.section(
        "P5 offline",
        "P5 — send → RESULT reply, offline backend (SQLite, in-process runner)",
        "p50 ≤ 50 ms, bus only",
        rows=[
            {
                "setup": setup,
                "latency": median_summary([r["reply"] for r in runs]),
                "lost": sum(r["lost"] for r in runs),
                "figure": f"{sum(r['reply']['n'] for r in runs)} turns, 5/s, one per thread",
            }
            for setup, runs in by_pace.items()
        ],
    )
    bus_only = by_pace[P5_PACES[0][0]]
    p50 = median_of([r["reply"] for r in bus_only], "p50")
    section["verdicts"] = [report.verdict("p50 (ms), bus only", p50, 50, higher=False)]
    section["note"] = (
        "From the send's scheduled time until the reply's row reaches a trail Console. The "
        "verdict is on the unpaced row: there the offline backend answers at once, so the figure "
        "is what the bus adds. The paced row streams drafts as `make run` does; its extra time is "
        "the backend's own pauses. The baseline has no assistant, so there is no ratio here."
    )
    harness.raw["P5 offline"] = by_pace


def count_results(database: str) -> int:
    sql = "SELECT count(*) FROM broker_message WHERE class = 'RESULT'"
    if database.startswith("sqlite:///"):
        path = database[len("sqlite:///") :]
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10) as connection:
            return int(connection.execute(sql).fetchone()[0])
    import psycopg

    with psycopg.connect(database) as connection:
        row = connection.execute(sql).fetchone()
        return int(row[0]) if row else 0


class StreamLockWaits(PostgresSampler):
    """How many of a PostgreSQL database's connections wait for an advisory lock — the
    business's stream lock (`broker.actions.streams.do_lock_streams`), the only one the
    product takes — on average over a window, sampled every 20 ms. None on SQLite."""

    every = 0.02

    def __init__(self, database: str) -> None:
        super().__init__(database)
        self.samples: list[int] = []

    def look(self, connection: Any) -> None:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND wait_event = 'advisory'"
        ).fetchone()
        self.samples.append(int(row[0]) if row else 0)

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.samples) if self.samples else None


def replies_per_second(
    harness: Harness,
    database: str,
    server: proc.Process,
    threads: list[int],
    model: str,
    arguments: list[list[str]],
    turns_each: int,
    waits: list[float],
) -> float:
    """Queue turns in every thread, start the runners, count replies over the window; the
    window's mean stream-lock waiters are added to `waits` (PostgreSQL)."""
    proc.load(
        {
            "scenario": "sends",
            "run": harness.tag(),
            "target": harness.target(server, threads),
            "rate": 200,
            "duration": len(threads) * turns_each / 200,
            "connections": 8,
        },
    )
    backend = {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": model,
        "MOSAIC_ASSISTANT_MODEL": "bench",
    }
    runners = [
        proc.runner_process(
            harness.workdir, database, backend, *args, label=f"runner-{harness.tag()}"
        )
        for args in arguments
    ]
    with harness.running(*runners):
        for runner in runners:
            runner.wait_for_line("runassistant: run-")
        time.sleep(P5_SETTLE)  # past the first claims, into the steady state
        with StreamLockWaits(database) as watch:
            before, began = count_results(database), time.monotonic()
            time.sleep(harness.plan.p5_window)
            after, ended = count_results(database), time.monotonic()
    if watch.mean is not None:
        waits.append(watch.mean)
    return (after - before) / (ended - began)


def p5_turns_each(plan: Plan, threads: int, runners: int) -> int:
    """Turns to queue in each thread so that none has run dry when the window ends, even if
    the runners answered as fast as they could (every thread of each busy on the model).

    Three turns a thread ran dry within the window of two runners: at twice one runner's
    26 replies/s, 150 turns are gone before the window (0.5 s in, 3 s long) ends, and a window
    that outlasts the work understates the rate — two runners could not have shown more than
    about 1.6× one."""
    most = runners * P5_RUNNER_CONCURRENCY / P5_MODEL_SECONDS
    return math.ceil(most * (P5_SETTLE + plan.p5_window) / threads) + 1


def p5_concurrency(
    harness: Harness, database: str, engine: str, configs: dict[str, list[list[str]]]
):
    """P5 with a model taking 200 ms per reply and 50 busy threads."""
    model = proc.fake_model(harness.workdir, P5_MODEL_SECONDS)
    server = proc.product_server(harness.workdir, database, label=f"product-p5-{engine}")
    figures: dict[str, list[float]] = {name: [] for name in configs}
    waits: dict[str, list[float]] = {name: [] for name in configs}
    with harness.running(model, server):
        threads = harness.threads(server, 50)
        for repeat in range(harness.plan.slow_repeats):
            for name, arguments in harness.order(repeat, list(configs.items())):
                turns_each = p5_turns_each(harness.plan, len(threads), len(arguments))
                rate = replies_per_second(
                    harness,
                    database,
                    server,
                    threads,
                    model.url,  # type: ignore[attr-defined]
                    arguments,
                    turns_each=turns_each,
                    waits=waits[name],
                )
                figures[name].append(rate)
                harness.log(f"P5 {engine} {name}: {rate:.1f} replies/s")
    if any(waits.values()):
        harness.raw[f"P5 stream lock waiters ({engine})"] = waits
    return figures


def p5_sqlite(harness: Harness, template: Path) -> dict[str, list[float]]:
    database = harness.sqlite_copy(template, "p5c")
    return p5_concurrency(
        harness,
        database,
        "sqlite",
        {"one turn at a time": [["--concurrency", "1"]], "default concurrency": [[]]},
    )


def p5_postgres(harness: Harness, database: str) -> dict[str, list[float]]:
    """P5's runners on PostgreSQL: one and two, at their default concurrency and held to
    `P5_UNLOADED_CONCURRENCY` turns at a time."""
    return p5_concurrency(
        harness,
        database,
        "postgres",
        {
            "one runner": [[]],
            "two runners": [[], []],
            # The same pair held to two turns at a time each: the machine's two CPUs are then
            # not the bound, so a ratio short of 2 here is something the runners share.
            UNLOADED_ONE: [["--concurrency", str(P5_UNLOADED_CONCURRENCY)]],
            UNLOADED_TWO: [["--concurrency", str(P5_UNLOADED_CONCURRENCY)]] * 2,
        },
    )


def p5_concurrency_section(
    harness: Harness, sqlite: dict[str, list[float]], pg: dict[str, list[float]] | None
) -> None:
    section = harness.section(
        "P5 concurrency",
        "P5 — replies/s with a backend taking 200 ms per reply, 50 busy threads",
        "one runner ≥ 6× a runner held to one turn at a time; two runners on PostgreSQL ≥ 1.8× one",
    )
    for engine, figures in (("SQLite", sqlite), ("PostgreSQL", pg or {})):
        for name, rates in figures.items():
            section["rows"].append(
                {
                    "setup": f"{engine}: {name}",
                    "figure": f"{statistics.median(rates):.1f} replies/s "
                    f"({', '.join(f'{r:.1f}' for r in rates)})",
                }
            )
    one = statistics.median(sqlite["one turn at a time"])
    many = statistics.median(sqlite["default concurrency"])
    section["verdicts"] = [
        report.verdict("SQLite: default ÷ one turn at a time", many / one, 6, higher=True)
    ]
    if pg:
        single = statistics.median(pg["one runner"])
        double = statistics.median(pg["two runners"])
        section["verdicts"].append(
            report.verdict("PostgreSQL: two runners ÷ one", double / single, 1.8, higher=True)
        )
    else:
        section["verdicts"].append(report.skipped("PostgreSQL: two runners ÷ one"))
    section["note"] = (
        "Each runner is a `manage.py runassistant` process (default concurrency unless "
        "`--concurrency` is named) against a model server that answers every request after "
        "200 ms; replies/s is counted in the database over the window, after the runners "
        "started."
    )
    if pg and UNLOADED_ONE in pg and UNLOADED_TWO in pg:
        unloaded = statistics.median(pg[UNLOADED_TWO]) / statistics.median(pg[UNLOADED_ONE])
        section["note"] += (
            f" Held to {P5_UNLOADED_CONCURRENCY} turns at a time each, where the model and not "
            f"the machine's CPUs bounds a runner, two runners answer {unloaded:.2f}× what one "
            "does: "
            + (
                "at that pace nothing they share holds them back."
                if unloaded >= 1.8
                else "even at that pace, something the runners share holds them back."
            )
        )
    waiting = harness.raw.get("P5 stream lock waiters (postgres)", {})
    if waiting.get("one runner") and waiting.get("two runners"):
        section["note"] += (
            " Connections waiting for the business's stream lock, on average over the window: "
            + ", ".join(
                f"{name} {statistics.median(means):.2f}" for name, means in waiting.items() if means
            )
            + "."
        )
    harness.raw["P5 concurrency"] = {"sqlite": sqlite, "postgres": pg}


def p5_skipped(harness: Harness) -> None:
    section = harness.section(
        "P5 concurrency",
        "P5 — replies/s with a backend taking 200 ms per reply, 50 busy threads",
        "one runner ≥ 6× a runner held to one turn at a time; two runners on PostgreSQL ≥ 1.8× one",
    )
    section["verdicts"] = [report.skipped("runner concurrency (full run only)")]
