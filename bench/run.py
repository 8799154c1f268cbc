"""The benchmark run: `python -m bench.run [--quick] [--only P1,P7] [--output PATH]`.

Starts the product (`manage.py serve`, as `make run` does) and the baseline (`bench/baseline`,
under daphne) on the same database engine and channel layer, drives both from a separate
load-generator process, and writes the figures and ratios as Markdown. Servers run on one core
and load generators on the other (`taskset`; `MOSAIC_BENCH_PIN=0` turns it off). Each figure is
the median over the repeats; ratios are taken between medians of the same run.

The full run (`make bench`) covers two configurations — SQLite with the in-memory layer, and
PostgreSQL with Redis — and rewrites `docs/benchmarks.md`. The quick run (`make bench-quick`)
covers SQLite with the in-memory layer only, with shorter windows and a 20-second soak, and
prints its tables. `--only` runs some scenarios alone (with what they need: P7 measures P1 on
PostgreSQL + Redis first, for the capacity) and writes nothing unless given `--output`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Self, cast

from bench import overload, report, staff_reads, tool_steps
from bench import processes as proc
from bench.profiles import summarise
from bench.stats import median_of, median_summary, summary

SQLITE = "SQLite"
SERVICES = "PostgreSQL + Redis"
LAYERS = {SQLITE: "SQLite, in-memory layer", SERVICES: "PostgreSQL, Redis layer"}
SCENARIOS = ("P1", "P1c", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9")
# P4 measures how long one read takes at scale, not how many reads the server bears: each path
# is read at a rate well inside one server's capacity, so the figure is not queueing.
P4_RATE = 10
# P2 and P1c: the rate the issue names.
P2_RATE = 50
# P7's nominal is the product at half capacity before the overload, measured for this long.
P7_CALM_SECONDS = 10.0
# The full run stays under about 15 minutes: profiles of misses start only before this.
PROFILE_BUDGET_MINUTES = 13.0


@dataclass(frozen=True)
class Plan:
    name: str
    repeats: int
    p1_seconds: float
    p1_concurrency: int
    p2_seconds: float
    p3_consoles: int
    p3_rows: int
    p3_rate: float
    p3s_consoles: int
    p3s_rate: float
    p3s_seconds: float
    p4_threads: int
    p4_messages: int
    p4_seconds: float
    p8_threads: int
    p8_messages: int
    p8_requests: int
    p5_sends: int
    p5_window: float
    slow_repeats: int
    p6_consoles: int
    soak_seconds: float
    p7_seconds: float
    services: bool
    profile: bool
    p5_concurrency: bool
    p9_turns: int


QUICK = Plan(
    name="quick",
    repeats=3,
    p1_seconds=1.5,
    p1_concurrency=8,
    p2_seconds=1.5,
    p3_consoles=100,
    p3_rows=5,
    p3_rate=10,
    p3s_consoles=50,
    p3s_rate=50,
    p3s_seconds=1.0,
    p4_threads=1_000,
    p4_messages=10_000,
    p4_seconds=0.6,
    p8_threads=1_000,
    p8_messages=10_000,
    p8_requests=5,
    p5_sends=10,
    p5_window=2.0,
    slow_repeats=1,
    p6_consoles=200,
    soak_seconds=20,
    p7_seconds=20,
    services=False,
    profile=False,
    p5_concurrency=False,
    p9_turns=40,
)
FULL = Plan(
    name="full",
    repeats=3,
    p1_seconds=5.0,
    p1_concurrency=8,
    p2_seconds=4.0,
    p3_consoles=500,
    p3_rows=10,
    p3_rate=10,
    p3s_consoles=100,
    p3s_rate=50,
    p3s_seconds=3.0,
    p4_threads=10_000,
    p4_messages=100_000,
    p4_seconds=10.0,
    p8_threads=20_000,
    p8_messages=1_000_000,
    p8_requests=15,
    p5_sends=15,
    p5_window=3.0,
    slow_repeats=3,
    p6_consoles=1_000,
    soak_seconds=300,
    p7_seconds=20,
    services=True,
    profile=True,
    p5_concurrency=True,
    p9_turns=200,
)


class Run:
    """One benchmark run: its scratch directory, its processes, its results."""

    def __init__(self, plan: Plan, workdir: Path, only: set[str] | None = None) -> None:
        self.plan = plan
        self.workdir = workdir
        self.only = only
        self.started: list[proc.Process] = []
        self.loads: list[subprocess.Popen[str]] = []
        self.databases: list[str] = []
        self.sections: list[dict[str, Any]] = []
        self.raw: dict[str, Any] = {}
        self.serial = 0
        self.began = time.monotonic()
        # Per configuration: where a profile of the product can be replayed.
        self.profile_targets: dict[str, dict[str, Any]] = {}

    # --- plumbing ------------------------------------------------------------------------

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.began:6.1f}s] {text}", flush=True)

    def tag(self) -> str:
        self.serial += 1
        return f"r{self.serial}x{int(time.time()) % 100000}"

    def wants(self, *scenarios: str) -> bool:
        return self.only is None or any(s in self.only for s in scenarios)

    @contextmanager
    def running(self, *servers: proc.Process) -> Iterator[None]:
        try:
            for server in servers:
                self.started.append(server)
                server.start()
            yield
        finally:
            for server in servers:
                server.stop()

    def cleanup(self) -> None:
        for load in self.loads:
            if load.poll() is None:
                load.kill()
                load.wait()
        for server in self.started:
            server.stop(timeout=5)
        for name in self.databases:
            try:
                proc.drop_pg(name)
            except Exception as error:  # the report matters more than a leftover scratch db
                self.log(f"could not drop {name}: {error}")

    def sqlite_copy(self, template: Path, label: str) -> str:
        return proc.copy_sqlite(template, self.workdir / f"{label}-{self.tag()}.sqlite3")

    def pg(self, suffix: str) -> str:
        name = f"mosaic_bench{proc.PG_BENCH_SUFFIX}_{suffix}"
        self.databases.append(name)
        return proc.create_pg(name)

    def target(self, server: proc.Process, threads: list[int] | None = None) -> dict[str, Any]:
        kind = "baseline" if server.name.startswith("baseline") else "product"
        port = server.tester_port  # type: ignore[attr-defined]
        return {"kind": kind, "port": port, "thread_ids": threads or []}

    def order(self, repeat: int, pair: list[Any]) -> list[Any]:
        """Alternate who goes first, so a drifting machine favours neither."""
        return pair if repeat % 2 == 0 else list(reversed(pair))

    # --- product set-up over HTTP, as the tester ---------------------------------------------

    def tester_post(self, server: proc.Process, path: str, payload: dict[str, Any]) -> Any:
        port = server.tester_port  # type: ignore[attr-defined]
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            data=json.dumps(payload).encode(),
            headers={
                "Origin": f"http://127.0.0.1:{port}",
                "Sec-Fetch-Site": "same-origin",
                "Content-Type": "application/json",
            },
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def threads(self, server: proc.Process, count: int) -> list[int]:
        project = self.tester_post(server, "/api/chat/projects", {"name": f"bench {self.tag()}"})
        project_id = project["project"]["id"]
        return [
            self.tester_post(server, "/api/chat/threads", {"project": project_id, "name": f"t{i}"})[
                "thread"
            ]["id"]
            for i in range(count)
        ]

    # --- figures ---------------------------------------------------------------------------

    def section(self, key: str, title: str, target: str, **content: Any) -> dict[str, Any]:
        section = {"key": key, "title": title, "target": target, "rows": [], "verdicts": []}
        section.update(content)
        self.sections.append(section)
        return section


# --- phases ---------------------------------------------------------------------------------


def templates(run: Run) -> tuple[Path, Path]:
    """Migrated SQLite files, copied fresh for each server (a migration costs seconds)."""
    product, baseline = run.workdir / "product.template", run.workdir / "baseline.template"
    with ThreadPoolExecutor(2) as pool:
        jobs = [
            pool.submit(proc.prepare_product, f"sqlite:///{product}"),
            pool.submit(proc.prepare_baseline, f"sqlite:///{baseline}"),
        ]
        for job in jobs:
            job.result()
    return product, baseline


def p1_config(plan: Plan) -> dict[str, Any]:
    return {"scenario": "closed", "concurrency": plan.p1_concurrency, "window": plan.p1_seconds}


def sends_per_second(
    run: Run, pair: list[tuple[str, proc.Process, list[int]]], floor: Callable[[], float]
) -> dict[str, Any]:
    """P1: each server's sends/s with `p1_concurrency` sends always in flight."""
    plan = run.plan
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in pair}
    floors = []
    for repeat in range(plan.repeats):
        for name, server, threads in run.order(repeat, pair):
            result = proc.load(
                {**p1_config(plan), "run": run.tag(), "target": run.target(server, threads)}
            )
            runs[name].append(result)
            run.log(f"P1 {name}: {result['throughput']:.0f} sends/s {result['statuses']}")
        floors.append(floor())
    return {"runs": runs, "floors": floors}


def sqlite_floor(run: Run) -> float:
    path = run.workdir / f"floor-{run.tag()}.sqlite3"
    seconds = min(2.0, run.plan.p1_seconds)
    done = subprocess.run(
        [sys.executable, "-m", "bench.floor", "sqlite", str(path), str(seconds)],
        cwd=proc.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return float(json.loads(done.stdout.splitlines()[-1])["result"]["commits_per_s"])


def pg_floor(run: Run, url: str) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "bench.floor", "postgres", url, str(min(2.0, run.plan.p1_seconds))],
        cwd=proc.ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return float(json.loads(done.stdout.splitlines()[-1])["result"]["commits_per_s"])


def p1_section(run: Run, setup: str, measured: dict[str, Any]) -> float:
    """P1's table; returns the product's sends/s (P7's capacity)."""
    runs = measured["runs"]
    product = median_of(runs["product"], "throughput")
    baseline = median_of(runs["baseline"], "throughput")
    floor = statistics.median(measured["floors"])
    section = run.section(
        f"P1 {setup}",
        f"P1 — sends/s through POST …/messages, {run.plan.p1_concurrency} concurrent "
        f"({LAYERS[setup]})",
        "≥ 1.0× the baseline's sends/s",
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
        report.verdict("product ÷ baseline", product / baseline, 1.0, higher=True),
    ]
    section["note"] = (
        f"Closed loop: {run.plan.p1_concurrency} senders on keep-alive connections, each "
        f"sending again as soon as its answer came, for {run.plan.p1_seconds:g} s per repeat; "
        "sends/s is the 2xx answers within the window, and the latencies are those of a server "
        f"with {run.plan.p1_concurrency} sends always in flight. Product and baseline alternate "
        "who goes first. The product's sends go round-robin to 20 threads. The commit floor "
        "(one connection committing one-row inserts) is for scale, not a target."
    )
    run.raw[section["key"]] = measured
    return product


def streams(
    run: Run,
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
                "run": run.tag(),
                "target": run.target(server, threads),
                "consoles": consoles,
                "rate": rate,
                "duration": seconds,
                "bursts": run.plan.repeats,
                "drain": 3.0,
                "settle": 1.0 if consoles > 1 else 0.3,
                "cpu_pid": server.pid if cpu else None,
            }
        )
        for result in runs[name]:
            run.log(
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


def p2_section(run: Run, setup: str, runs: dict[str, list[dict[str, Any]]]) -> float:
    """P2's table; returns the product's p99 in ms (quoted beside P7's nominal)."""
    section = run.section(
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
        f"Open loop, {P2_RATE} sends/s, {run.plan.repeats} bursts of {run.plan.p2_seconds:g} s "
        "with the Console open throughout; latency is from each send's scheduled time until "
        "its row's frame reaches the Console."
    )
    run.raw[section["key"]] = runs
    return product


def p1c_section(run: Run, setup: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    section = run.section(
        f"P1c {setup}",
        f"P1c — server CPU per send at {P2_RATE} sends/s ({LAYERS[setup]})",
        "≤ 1.25× the baseline's CPU per send",
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
            1.25,
            higher=False,
        )
    ]
    section["note"] = (
        "Measured over P2's bursts (open loop, one Console open): the server's process tree's "
        "CPU time (utime + stime of the process and its descendants, from /proc) from the "
        "burst's first send until its last row reached the Console, divided by the sends "
        "answered 2xx. The server is pinned to one CPU and the load generator to the other."
    )


def p3_section(run: Run, setup: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    section = run.section(
        f"P3 {setup}",
        f"P3 — fan-out of each row to {run.plan.p3_consoles} open Consoles ({LAYERS[setup]})",
        "p99 to the last Console ≤ 250 ms; 0 lost",
        rows=stream_rows(runs, "last_console"),
    )
    product = median_of([r["last_console"] for r in runs["product"]], "p99")
    section["verdicts"] = [
        report.verdict("product p99 to the last Console (ms)", product, 250, higher=False),
        report.verdict("rows lost by the product", float(section["rows"][0]["lost"]), 0, False),
    ]
    section["note"] = (
        f"{run.plan.p3_rate:.0f} rows/s; latency is from each send's scheduled time until the "
        "last of the Consoles has the row. Lost counts row × Console deliveries missing after "
        "a 3-second drain; the baseline's rows lost here are SPEC §11's silent layer drops."
    )
    run.raw[section["key"]] = runs


def p3s_section(run: Run, setup: str, runs: dict[str, list[dict[str, Any]]]) -> None:
    plan = run.plan
    section = run.section(
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
    run.raw[section["key"]] = runs


def pair_scenarios(
    run: Run,
    setup: str,
    pair: list[tuple[str, proc.Process, list[int]]],
    floor: Callable[[], float],
) -> dict[str, float]:
    """P1, P2 (with P1c) and P3 on one configuration; P1's and P2's product figures back."""
    plan = run.plan
    found: dict[str, float] = {}
    needs_p1 = run.wants("P1") or (setup == SERVICES and run.wants("P7"))
    needs_p2 = run.wants("P2", "P1c")
    if needs_p1:
        found["capacity"] = p1_section(run, setup, sends_per_second(run, pair, floor))
    if needs_p2:
        measured = streams(
            run,
            pair,
            consoles=1,
            rate=P2_RATE,
            seconds=plan.p2_seconds,
            label=f"P2 {setup}",
            cpu=True,
        )
        found["nominal_p99"] = p2_section(run, setup, measured)
        p1c_section(run, setup, measured)
        capacity = found.get("capacity", math.inf)
        if capacity < P2_RATE:
            warning = (
                f" This run's P1 had the product at {capacity:.0f} sends/s, under "
                f"{P2_RATE}: here the figures are those of a saturated server."
            )
            for section in run.sections[-2:]:
                section["note"] += warning
    if run.wants("P3"):
        p3_section(
            run,
            setup,
            streams(
                run,
                pair,
                consoles=plan.p3_consoles,
                rate=plan.p3_rate,
                seconds=plan.p3_rows / plan.p3_rate,
                label=f"P3 {setup}",
            ),
        )
        p3s_section(
            run,
            setup,
            streams(
                run,
                pair,
                consoles=plan.p3s_consoles,
                rate=plan.p3s_rate,
                seconds=plan.p3s_seconds,
                label=f"P3 sustained {setup}",
            ),
        )
    return found


# --- P7 -------------------------------------------------------------------------------------


class PostgresSampler:
    """Queries a PostgreSQL server from a thread of its own while its `with` block runs: `begin`
    once, then `look` every `every` seconds. On SQLite (a URL that is not PostgreSQL's) it
    samples nothing."""

    every = 0.25

    def __init__(self, url: str) -> None:
        self.url = url
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def __enter__(self) -> Self:
        if self.url.startswith("postgres"):
            self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)

    def sample(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as connection:
            self.begin(connection)
            while not self.stop.wait(self.every):
                self.look(connection)

    def begin(self, connection: Any) -> None:
        """Once, before the first look."""

    def look(self, connection: Any) -> None:
        raise NotImplementedError


class ConnectionWatch(PostgresSampler):
    """PostgreSQL's connections while P7 runs: the peak to `database` and in all."""

    def __init__(self, database: str) -> None:
        super().__init__(proc.PG_ADMIN)
        self.database = database
        self.peak_database = self.peak_total = 0
        self.max_connections = 0

    def begin(self, connection: Any) -> None:
        row = connection.execute("SHOW max_connections").fetchone()
        self.max_connections = int(row[0]) if row else 0

    def look(self, connection: Any) -> None:
        row = connection.execute(
            "SELECT count(*) FILTER (WHERE datname = %s), count(*) FROM pg_stat_activity",
            [self.database],
        ).fetchone()
        if row:
            self.peak_database = max(self.peak_database, int(row[0]))
            self.peak_total = max(self.peak_total, int(row[1]))


def p7_config(plan: Plan, capacity: float, seconds: float | None = None) -> dict[str, Any]:
    return {
        "scenario": "overload",
        "calm_seconds": P7_CALM_SECONDS,
        "high": 2 * capacity,
        "high_seconds": seconds or plan.p7_seconds,
        "low": capacity / 2,
        "low_seconds": seconds or plan.p7_seconds,
        "deadline": 5.0,
        "drain": 5.0,
    }


def p7(
    run: Run, server: proc.Process, threads: list[int], database: str, found: dict[str, float]
) -> None:
    """P7: twice the product's own capacity, then half of it, one Console open throughout."""
    plan = run.plan
    capacity = found["capacity"]
    config = p7_config(plan, capacity)
    with_console = []
    for _ in range(plan.repeats):
        measured = proc.load(
            {
                **p1_config(plan),
                "consoles": 1,
                "run": run.tag(),
                "target": run.target(server, threads),
            }
        )
        with_console.append(measured["throughput"])
    console_capacity = statistics.median(with_console)
    run.log(
        f"P7: capacity with a Console open {console_capacity:.0f} sends/s "
        f"({', '.join(f'{rate:.0f}' for rate in with_console)}); P1's {capacity:.0f}"
    )
    log_before = len(server.log.read_text(errors="replace"))
    run.log(f"P7: {config['high']:.0f} sends/s for {plan.p7_seconds:g} s, then {config['low']:.0f}")
    with ConnectionWatch(database.rsplit("/", 1)[1]) as watch:
        result = proc.load(
            {**config, "run": run.tag(), "target": run.target(server, threads)},
            timeout=4 * plan.p7_seconds + 120,
        )
    log = server.log.read_text(errors="replace")[log_before:]
    too_many = log.count("too many clients")
    records = [cast(overload.Record, tuple(r)) for r in result["records"]]
    calm_end, drop = result["calm_end"], result["drop_at"]
    nominal = overload.nominal_p99(records, calm_end)
    figures = overload.figures(records, drop, result["end"], nominal, deadline=config["deadline"])
    goodput = overload.goodput(records, calm_end, drop, console_capacity)
    refused_p50, refused_p99 = overload.refusal_latencies(records)
    run.log(
        f"P7: {figures['kinds']}, lost {figures['lost']}, recovery {figures['recovery']:.1f} s, "
        f"goodput {goodput:.2f} × capacity with the Console open "
        f"({goodput * console_capacity / capacity:.2f} × P1's), "
        f"503s answered in {1000 * refused_p50:.0f} ms "
        f"(p50), {1000 * refused_p99:.0f} ms (p99), "
        f"too many clients {too_many}, Console closed {result['console_closed']}"
    )
    section = run.section(
        "P7",
        f"P7 — overload: 2× the product's capacity for {plan.p7_seconds:g} s, then half of it "
        f"for {plan.p7_seconds:g} s ({LAYERS[SERVICES]})",
        "0 “too many clients”; 0 sockets closed; every send answered 2xx or 503 `unavailable` "
        "with `Retry-After` within 5 s; at 2× capacity ≥ 0.9× capacity answered 2xx, and every "
        "503 within 100 ms; every 2xx row delivered to the open Console; p99 back under 2× "
        "nominal within 5 s of the load dropping",
    )
    for name, low, high in (
        (f"½ capacity, before: {config['low']:.0f} sends/s", 0.0, calm_end),
        (f"2× capacity: {config['high']:.0f} sends/s", calm_end, drop),
        (f"½ capacity, after: {config['low']:.0f} sends/s", drop, result["end"]),
    ):
        phase = [r for r in records if low <= r[0] < high]
        answered = [1000 * (r[1] - r[0]) for r in phase if r[1] is not None]
        ok = sum(1 for r in phase if 200 <= r[2] < 300)
        section["rows"].append(
            {
                "setup": name,
                "latency": summary(answered),
                "lost": sum(1 for r in phase if 200 <= r[2] < 300 and r[5] is None),
                "errors": sum(1 for r in phase if not overload.acceptable(r, 5.0)),
                "figure": f"{len(phase)} sends, {ok} answered 2xx",
            }
        )
    closed = 0 if result["console_closed"] is None else 1
    section["verdicts"] = [
        report.verdict("“too many clients” in the server's log", float(too_many), 0, False),
        report.verdict("sockets closed (the open Console)", float(closed), 0, False),
        report.verdict(
            "sends not answered 2xx or 503 `unavailable` + `Retry-After` within 5 s",
            float(figures["unacceptable"]),
            0,
            False,
        ),
        report.verdict(
            "goodput at 2× capacity: 2xx sends/s ÷ capacity with the Console open",
            goodput,
            0.9,
            True,
        ),
        report.verdict("ms to answer a refused send 503, p99", 1000 * refused_p99, 100, False),
        report.verdict("2xx rows not delivered to the Console", float(figures["lost"]), 0, False),
        report.verdict(
            "seconds after the drop until the p99 of the sends after it is ≤ 2× nominal "
            f"({2000 * nominal:.0f} ms)",
            figures["recovery"],
            5,
            False,
        ),
    ]
    windows = ", ".join(
        "∞" if p99 is None else f"{1000 * p99:.0f}" for _, p99 in figures["windows"]
    )
    p2_nominal = (
        f"; P2's at {P2_RATE} sends/s was {found['nominal_p99']:.0f} ms"
        if "nominal_p99" in found
        else ""
    )
    section["note"] = (
        f"Capacity is P1's product sends/s on this configuration in this run ({capacity:.0f}): "
        "the rates above are its multiples. Goodput is judged against what the same server "
        "serves as P7 runs it, one trail Console open (each row read and pushed to it), at "
        f"P1's closed loop just before: {console_capacity:.0f} sends/s "
        f"({', '.join(f'{rate:.0f}' for rate in with_console)}); against P1's own, goodput is "
        f"{goodput * console_capacity / capacity:.2f}. "
        f"Nominal is the product's p99 send → Console frame at half capacity in the "
        f"{calm_end:g} s before the overload ({1000 * nominal:.0f} ms{p2_nominal}). Open loop; "
        "each send gets 5 s "
        "for its answer (latencies in the table are send → answer). Answers: "
        + ", ".join(f"{kind} {n}" for kind, n in sorted(figures["kinds"].items()))
        + f". PostgreSQL connections at peak: {watch.peak_database} to the product's database, "
        f"{watch.peak_total} in all, of max_connections {watch.max_connections}. After the "
        "drop, the p99 of send → Console frame per 1-s window of sends (a send without a "
        f"delivered row counts as infinite), in ms: {windows}."
    )
    run.raw["P7"] = {
        "config": config,
        "figures": figures,
        "goodput": goodput,
        "refused_ms": {"p50": 1000 * refused_p50, "p99": 1000 * refused_p99},
        "too_many_clients": too_many,
        "connections": vars(watch) | {"stop": None, "thread": None},
        "console_closed": result["console_closed"],
        "records": records,
    }


def seed(database: str, threads: int, messages: int, *options: str) -> dict[str, Any]:
    """`bench.seed` on `database`: what it seeded and the ids to read."""
    env = proc.base_environment(database, None)
    env["DJANGO_SETTINGS_MODULE"] = "mosaic.settings"
    done = subprocess.run(
        [sys.executable, "-m", "bench.seed", str(threads), str(messages), *options],
        cwd=proc.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.splitlines()[-1])["result"]


def p4(run: Run, template: Path) -> None:
    plan = run.plan
    database = run.sqlite_copy(template, "p4")
    seeded = seed(database, plan.p4_threads, plan.p4_messages)
    run.log(f"P4 seeded {seeded['threads']} threads, {seeded['messages']} messages")
    server = proc.product_server(run.workdir, database, label="product-p4")
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
    with run.running(server):
        for _ in range(plan.slow_repeats):
            runs.append(
                proc.load(
                    {
                        "scenario": "reads",
                        "run": run.tag(),
                        "target": run.target(server),
                        "paths": paths,
                        "rate": P4_RATE,
                        "duration": plan.p4_seconds,
                    }
                )
            )
    section = run.section(
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
    run.raw["P4"] = {"seeded": seeded, "runs": runs}


def p8(run: Run, database: str, setup: str) -> None:
    """P8: staff reads and the Console's reads at a million rows (`staff_reads`)."""
    plan = run.plan
    seeded = seed(database, plan.p8_threads, plan.p8_messages, "--trail")
    run.log(
        f"P8 {setup} seeded {seeded['messages']} messages and {seeded['trail']} trail rows "
        f"in {seeded['seconds']:.0f} s"
    )
    server = proc.product_server(run.workdir, database, label=f"product-p8-{setup.lower()}")
    with run.running(server):
        figures = staff_reads.measure(server, seeded, plan.p8_requests)
    section = run.section(
        f"P8 {setup}",
        f"P8 — staff reads with {seeded['threads']:,} threads, {seeded['messages']:,} messages "
        f"and {seeded['trail']:,} trail rows ({setup})",
        f"each page's p50 ≤ {staff_reads.PAGE_P50_MS:g} ms; the thread page ≤ 1 MB",
    )
    section["rows"], section["verdicts"] = staff_reads.rows_and_verdicts(figures, setup)
    section["note"] = (
        f"Each page read {plan.p8_requests} times one after the other, after a warm-up read, "
        "by the demo's staff user signed in over HTTP (admin, human listener) or as the "
        f"tester's Console (tester listener); the busiest thread holds "
        f'{plan.p8_messages // 10:,} messages, and the search asks "{seeded["search"]}". '
        "The figure is the largest answer's size."
    )
    run.raw[f"P8 {setup}"] = {"seeded": seeded, "figures": figures}


# P5 offline measures what the bus adds to a reply, so its verdict is taken with the offline
# backend answering at once; the paced row shows what `make run` looks like with drafts
# (MOSAIC_OFFLINE_PACE, SPEC §7.1), where the pauses are the backend's, not the bus's.
P5_PACES = (("bus only (pace 0)", "0"), ("as `make run` (default pace)", None))


def p5_offline(run: Run, template: Path) -> None:
    plan = run.plan
    by_pace: dict[str, list[dict[str, Any]]] = {}
    for setup, pace in P5_PACES:
        backend = {} if pace is None else {"MOSAIC_OFFLINE_PACE": pace}
        label = "product-p5" if pace is None else "product-p5-unpaced"
        server = proc.product_server(
            run.workdir,
            run.sqlite_copy(template, label),
            runner=True,
            backend=backend,
            label=label,
        )
        runs = by_pace[setup] = []
        with run.running(server):
            server.wait_for_line("assistant runner")
            for _ in range(plan.slow_repeats):
                threads = run.threads(server, plan.p5_sends)
                result = proc.load(
                    {
                        "scenario": "replies",
                        "run": run.tag(),
                        "target": run.target(server, threads),
                        "rate": 5,
                        "drain": 10.0,
                    }
                )
                runs.append(result)
                run.log(
                    f"P5 offline, {setup}: p50 {result['reply']['p50']} ms, lost {result['lost']}"
                )
    section = run.section(
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
    run.raw["P5 offline"] = by_pace


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
    business's stream lock (`broker.actions.do_lock_streams`), the only one the product takes
    — on average over a window, sampled every 20 ms. None on SQLite."""

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
    run: Run,
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
            "run": run.tag(),
            "target": run.target(server, threads),
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
        proc.runner_process(run.workdir, database, backend, *args, label=f"runner-{run.tag()}")
        for args in arguments
    ]
    with run.running(*runners):
        for runner in runners:
            runner.wait_for_line("runassistant: run-")
        time.sleep(P5_SETTLE)  # past the first claims, into the steady state
        with StreamLockWaits(database) as watch:
            before, began = count_results(database), time.monotonic()
            time.sleep(run.plan.p5_window)
            after, ended = count_results(database), time.monotonic()
    if watch.mean is not None:
        waits.append(watch.mean)
    return (after - before) / (ended - began)


# P5's model answers each request after this long; the runners' default concurrency (a
# runner's threads, `broker.runner.service.DEFAULT_CONCURRENCY`); how long the runners run
# before the window.
P5_MODEL_SECONDS = 0.2
P5_RUNNER_CONCURRENCY = 8
P5_SETTLE = 0.5
# Two turns at a time per runner: one runner is held to 10 replies/s by the model, with CPU to
# spare for a second (P5's runners ÷ one at a load the machine carries).
P5_UNLOADED_CONCURRENCY = 2
UNLOADED_ONE = f"one runner, {P5_UNLOADED_CONCURRENCY} turns at a time"
UNLOADED_TWO = f"two runners, {P5_UNLOADED_CONCURRENCY} turns at a time each"


def p5_turns_each(plan: Plan, threads: int, runners: int) -> int:
    """Turns to queue in each thread so that none has run dry when the window ends, even if
    the runners answered as fast as they could (every thread of each busy on the model).

    Three turns a thread ran dry within the window of two runners: at twice one runner's
    26 replies/s, 150 turns are gone before the window (0.5 s in, 3 s long) ends, and a window
    that outlasts the work understates the rate — two runners could not have shown more than
    about 1.6× one."""
    most = runners * P5_RUNNER_CONCURRENCY / P5_MODEL_SECONDS
    return math.ceil(most * (P5_SETTLE + plan.p5_window) / threads) + 1


def p5_concurrency(run: Run, database: str, engine: str, configs: dict[str, list[list[str]]]):
    """P5 with a model taking 200 ms per reply and 50 busy threads."""
    model = proc.fake_model(run.workdir, P5_MODEL_SECONDS)
    server = proc.product_server(run.workdir, database, label=f"product-p5-{engine}")
    figures: dict[str, list[float]] = {name: [] for name in configs}
    waits: dict[str, list[float]] = {name: [] for name in configs}
    with run.running(model, server):
        threads = run.threads(server, 50)
        for repeat in range(run.plan.slow_repeats):
            for name, arguments in run.order(repeat, list(configs.items())):
                turns_each = p5_turns_each(run.plan, len(threads), len(arguments))
                rate = replies_per_second(
                    run,
                    database,
                    server,
                    threads,
                    model.url,  # type: ignore[attr-defined]
                    arguments,
                    turns_each=turns_each,
                    waits=waits[name],
                )
                figures[name].append(rate)
                run.log(f"P5 {engine} {name}: {rate:.1f} replies/s")
    if any(waits.values()):
        run.raw[f"P5 stream lock waiters ({engine})"] = waits
    return figures


def p5_sqlite(run: Run, template: Path) -> dict[str, list[float]]:
    database = run.sqlite_copy(template, "p5c")
    return p5_concurrency(
        run,
        database,
        "sqlite",
        {"one turn at a time": [["--concurrency", "1"]], "default concurrency": [[]]},
    )


def p5_concurrency_section(
    run: Run, sqlite: dict[str, list[float]], pg: dict[str, list[float]] | None
) -> None:
    section = run.section(
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
    waiting = run.raw.get("P5 stream lock waiters (postgres)", {})
    if waiting.get("one runner") and waiting.get("two runners"):
        section["note"] += (
            " Connections waiting for the business's stream lock, on average over the window: "
            + ", ".join(
                f"{name} {statistics.median(means):.2f}" for name, means in waiting.items() if means
            )
            + "."
        )
    run.raw["P5 concurrency"] = {"sqlite": sqlite, "postgres": pg}


def p5_skipped(run: Run) -> None:
    section = run.section(
        "P5 concurrency",
        "P5 — replies/s with a backend taking 200 ms per reply, 50 busy threads",
        "one runner ≥ 6× a runner held to one turn at a time; two runners on PostgreSQL ≥ 1.8× one",
    )
    section["verdicts"] = [report.skipped("runner concurrency (full run only)")]


def idle_consoles(
    run: Run, server: proc.Process, quiet_thread: int | None, *, idle: bool = False
) -> tuple[dict[str, Any], proc.HeldLoad]:
    """P6: server RSS before and 2 s after opening the idle Consoles, which stay open."""
    before = server.rss_kib()
    held = proc.HeldLoad(
        {
            "scenario": "idle",
            "run": run.tag(),
            "target": run.target(server),
            "consoles": run.plan.p6_consoles,
            "quiet_thread": quiet_thread,
        },
        idle=idle,
    )
    ready = held.wait_ready()
    time.sleep(2.0)
    after = server.rss_kib()
    figures = {
        "before": before,
        "after": after,
        "per_console": (after - before) / run.plan.p6_consoles,
        "open_seconds": ready["seconds"],
    }
    run.log(f"P6 {server.name}: {figures['per_console']:.1f} KiB per idle Console")
    return figures, held


class Soak:
    """The product on a server of its own, beside the rest of the run: the idle Consoles of
    P6 stay open while a light load runs for the soak's length and RSS is sampled. The soak's
    processes run on the load generators' CPU at idle priority: they take only time that the
    measured scenarios' load generators leave, so their latencies are not the soak's."""

    def __init__(self, run: Run, template: Path) -> None:
        self.run = run
        # On the load generators' CPU: the servers measured meanwhile keep theirs to themselves.
        self.server = proc.product_server(
            run.workdir,
            run.sqlite_copy(template, "soak"),
            label="product-soak",
            cpus=proc.LOAD_CPUS,
            idle=True,
        )
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def start(self) -> None:
        run = self.run
        run.started.append(self.server)
        self.server.start()
        threads = run.threads(self.server, 6)
        self.idle, self.held = idle_consoles(run, self.server, quiet_thread=threads[0], idle=True)
        self.began = time.monotonic()
        self.sampler = threading.Thread(target=self.sample, daemon=True)
        self.sampler.start()
        config = {
            "scenario": "stream",
            "run": run.tag(),
            "target": run.target(self.server, threads[1:]),
            "consoles": 10,
            "rate": 5,
            "duration": run.plan.soak_seconds,
            # Generous: at idle priority the soak may be starved while a measured load runs.
            "drain": 10.0,
        }
        self.load = subprocess.Popen(
            proc.load_argv(config, idle=True),
            cwd=proc.ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        run.loads += [self.load, self.held.popen]

    def sample(self) -> None:
        while not self.stop.wait(2.0):
            self.samples.append((time.monotonic() - self.began, self.server.rss_kib()))

    def finish(self, baseline: dict[str, Any]) -> None:
        run = self.run
        out, err = self.load.communicate(timeout=run.plan.soak_seconds + 300)
        self.stop.set()
        self.sampler.join()
        ended = self.held.release()
        self.server.stop()
        lines = [line for line in out.splitlines() if line.startswith('{"result"')]
        if not lines:
            raise RuntimeError(f"soak load failed:\n{err[-3000:]}")
        (soak,) = json.loads(lines[-1])["result"]
        # Drift: the last fifth of the soak against its second fifth (the first is warm-up).
        fifth = max(1, len(self.samples) // 5)
        early = statistics.median(rss for _, rss in self.samples[fifth : 2 * fifth])
        late = statistics.median(rss for _, rss in self.samples[-fifth:])
        drift = (late - early) / early
        plan = run.plan
        section = run.section(
            "P6",
            f"P6 — memory (SQLite, in-memory layer): {plan.p6_consoles:,} idle Consoles, "
            f"{plan.soak_seconds:.0f}-second soak",
            "≤ 64 KiB of server RSS per idle Console at 1,000 Consoles; RSS drift < 5% over a "
            "5-minute soak",
        )
        for name, figures, alive in (
            ("product", self.idle, ended["alive_at_end"]),
            ("baseline", baseline, None),
        ):
            still = "" if alive is None else f"; {alive} still open after the soak"
            section["rows"].append(
                {
                    "setup": f"{name}: idle Consoles",
                    "figure": f"{figures['per_console']:.1f} KiB/Console (RSS "
                    f"{figures['before'] / 1024:.0f} → {figures['after'] / 1024:.0f} MiB; "
                    f"opened in {figures['open_seconds']:.1f} s{still})",
                }
            )
        section["rows"].append(
            {
                "setup": "product: soak",
                "latency": soak["delivery"],
                "lost": soak["lost"],
                "duplicates": soak["duplicates"],
                "out_of_order": soak["out_of_order"],
                "figure": f"RSS {early / 1024:.1f} → {late / 1024:.1f} MiB "
                f"({100 * drift:+.1f}%); {soak['rows']} rows × 10 Consoles",
            }
        )
        section["verdicts"] = [
            report.verdict(
                "product KiB per idle Console", self.idle["per_console"], 64, higher=False
            ),
            report.verdict("product RSS drift over the soak (%)", 100 * drift, 5, higher=False),
        ]
        section["note"] = (
            "RSS is the server process's (/proc VmRSS) before the Consoles open and 2 s after, "
            "on a freshly started server. The product's idle Consoles are thread streams of a "
            "thread with no traffic; the baseline's join its one group, with no sends. The "
            "soak runs on a product server of its own, beside the rest of the run, on the load "
            "generators' CPU (not the measured servers') at idle priority (not taking the load "
            "generators' time), so its own latencies mean little: the idle "
            "Consoles stay open, 10 trail Consoles follow 5 sends/s, and RSS is sampled every "
            "2 s; drift compares the median of the last fifth with the second fifth (the first "
            "fifth is warm-up)."
        )
        if plan.soak_seconds < 300:
            section["note"] += f" This run soaked {plan.soak_seconds:.0f} s, not 5 minutes."
        run.raw["P6"] = {
            "product": self.idle,
            "baseline": baseline,
            "samples": self.samples,
            "soak": soak,
        }


def profile(run: Run, database: str, key: str, config: dict[str, Any], **server: Any) -> None:
    """Serve once more under py-spy, replay one repeat of the scenario, summarise."""
    out = run.workdir / f"profile-{key.replace(' ', '-')}.txt"
    label = f"product-profile-{run.tag()}"
    target = proc.product_server(run.workdir, database, label=label, **server)
    target.argv = [
        str(Path(sys.executable).parent / "py-spy"),
        "record",
        "--format",
        "raw",
        "--rate",
        "200",
        "--output",
        str(out),
        "--",
        *target.argv,
    ]
    with run.running(target):
        threads = run.threads(target, 20)
        with contextlib.suppress(RuntimeError):  # an overload replay may end in failures
            proc.load(
                {**config, "run": run.tag(), "target": run.target(target, threads)}, timeout=300
            )
        # SIGINT makes py-spy write its output and exit; the server it started is then ended.
        servers = proc.children(target.pid)
        assert target.popen is not None
        target.popen.send_signal(signal.SIGINT)
        target.popen.wait(60)
        for child in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    if out.exists():
        summary = summarise(out, str(proc.ROOT))
        run.raw.setdefault("profiles", {})[key] = summary
        for section in run.sections:
            if section["key"] == key:
                section["profile"] = summary


def machine() -> dict[str, str]:
    import channels
    import daphne
    import django

    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "CPUs": f"{os.cpu_count()} × {cpu}",
        "memory": f"{round(int(Path('/proc/meminfo').read_text().split()[1]) / 1024 / 1024)} GiB",
        "OS": platform.platform(),
        "Python": platform.python_version(),
        "Django": django.get_version(),
        "Channels": channels.__version__,
        "daphne": daphne.__version__,
        "SQLite": sqlite3.sqlite_version,
    }


# --- the run --------------------------------------------------------------------------------


def sqlite_phase(run: Run) -> Soak | None:
    plan = run.plan
    if not run.wants("P1", "P1c", "P2", "P3", "P4", "P5", "P6", "P8", "P9"):
        return None
    product_template, baseline_template = templates(run)
    run.templates = (product_template, baseline_template)  # type: ignore[attr-defined]
    run.log("templates ready")
    soak = None
    if run.wants("P6"):
        soak = Soak(run, product_template)
        soak.start()
    if run.wants("P1", "P1c", "P2", "P3", "P6"):
        product = proc.product_server(run.workdir, run.sqlite_copy(product_template, "product"))
        baseline = proc.baseline_server(run.workdir, run.sqlite_copy(baseline_template, "baseline"))
        with run.running(product, baseline):
            if run.wants("P6"):
                baseline_idle, held = idle_consoles(run, baseline, None)
                held.release()
                run.baseline_idle = baseline_idle  # type: ignore[attr-defined]
            threads = run.threads(product, 20)
            pair = [("product", product, threads), ("baseline", baseline, [])]
            pair_scenarios(run, SQLITE, pair, lambda: sqlite_floor(run))
    run.profile_targets[SQLITE] = {
        "database": lambda: run.sqlite_copy(product_template, "profile"),
        "server": {},
    }
    if run.wants("P4"):
        p4(run, product_template)
    if run.wants("P8"):
        p8(run, run.sqlite_copy(product_template, "p8"), SQLITE)
    if run.wants("P5"):
        p5_offline(run, product_template)
        if plan.p5_concurrency:
            run.raw["P5 sqlite"] = p5_sqlite(run, product_template)
    if run.wants("P9"):
        tool_steps.p9(run, product_template)
    return soak


def services_phase(run: Run) -> dict[str, list[float]] | None:
    """PostgreSQL with the Redis layer: P1, P1c, P2, P3, P7, and P5 on PostgreSQL."""
    if not run.wants("P1", "P1c", "P2", "P3", "P5", "P7"):
        return None
    urls = {"product": run.pg("product"), "baseline": run.pg("baseline")}
    with ThreadPoolExecutor(2) as pool:
        jobs = [
            pool.submit(proc.prepare_product, urls["product"]),
            pool.submit(proc.prepare_baseline, urls["baseline"]),
        ]
        for job in jobs:
            job.result()
    floor_url = run.pg("floor")
    run.log("PostgreSQL databases ready")
    redis = proc.REDIS_BENCH_URL
    run.profile_targets[SERVICES] = {
        "database": lambda: urls["product"],
        "server": {"redis_url": redis},
    }
    if run.wants("P1", "P1c", "P2", "P3", "P7"):
        proc.flush_redis()
        product = proc.product_server(
            run.workdir, urls["product"], redis_url=redis, label="product-pg"
        )
        baseline = proc.baseline_server(
            run.workdir, urls["baseline"], redis_url=redis, label="baseline-pg"
        )
        try:
            with run.running(product, baseline):
                threads = run.threads(product, 20)
                pair = [("product", product, threads), ("baseline", baseline, [])]
                found = pair_scenarios(run, SERVICES, pair, lambda: pg_floor(run, floor_url))
                if run.wants("P7"):
                    p7(run, product, threads, urls["product"], found)
        finally:
            proc.flush_redis()
    if not (run.wants("P5") and run.plan.p5_concurrency):
        return None
    return p5_concurrency(
        run,
        urls["product"],
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


def profile_configs(run: Run) -> dict[str, dict[str, Any]]:
    """Section key → the scenario to replay under py-spy, in the order profiles are taken."""
    plan = run.plan
    p2 = {"scenario": "stream", "consoles": 1, "rate": P2_RATE, "duration": plan.p2_seconds}
    p3 = {
        "scenario": "stream",
        "consoles": plan.p3_consoles,
        "rate": plan.p3_rate,
        "duration": plan.p3_rows / plan.p3_rate,
    }
    p3s = {
        "scenario": "stream",
        "consoles": plan.p3s_consoles,
        "rate": plan.p3s_rate,
        "duration": plan.p3s_seconds,
    }
    configs: dict[str, dict[str, Any]] = {}
    for setup in (SQLITE, SERVICES):
        configs[f"P1 {setup}"] = p1_config(plan)
        configs[f"P1c {setup}"] = p2
        configs[f"P2 {setup}"] = p2
        if setup == SQLITE:
            configs[f"P3 {setup}"] = p3
            configs[f"P3 sustained {setup}"] = p3s
            capacity = run.raw.get("P7", {}).get("config", {}).get("high", 0) / 2
            if capacity:
                configs["P7"] = p7_config(plan, capacity, seconds=plan.p7_seconds / 2)
    configs[f"P3 {SERVICES}"] = p3
    configs[f"P3 sustained {SERVICES}"] = p3s
    return configs


def profiles(run: Run) -> None:
    """Profile the product on each missed target that a server-side profile can explain; one
    replay serves every missed target of the same scenario and configuration (P1c and P2).
    No replay starts after PROFILE_BUDGET_MINUTES of the run; a miss left without says so."""
    missed = {s["key"] for s in run.sections if any(v["met"] is False for v in s["verdicts"])}
    done: dict[str, str] = {}
    for key, config in profile_configs(run).items():
        if key not in missed:
            continue
        setup = SQLITE if key.endswith(SQLITE) else SERVICES
        where = run.profile_targets.get(setup)
        if where is None:
            continue
        replay = f"{setup} {json.dumps(config, sort_keys=True)}"
        if replay in done and done[replay] in run.raw.get("profiles", {}):
            for section in run.sections:
                if section["key"] == key:
                    section["profile"] = run.raw["profiles"][done[replay]]
            continue
        if (time.monotonic() - run.began) / 60 > PROFILE_BUDGET_MINUTES:
            run.log(f"no time left to profile {key}")
            for section in run.sections:
                if section["key"] == key:
                    section["note"] = section.get("note", "") + (
                        " No profile of this miss: the run had used its time for profiles."
                    )
            continue
        run.log(f"profiling {key}")
        if setup == SERVICES:
            proc.flush_redis()
        profile(run, where["database"](), key, config, **where["server"])
        done[replay] = key
    if SERVICES in run.profile_targets:
        proc.flush_redis()


def selection(text: str | None) -> set[str] | None:
    """`--only P1,P7` → {"P1", "P7"}; an unknown id is an error."""
    if not text:
        return None
    chosen = {part.strip().upper().replace("P1C", "P1c") for part in text.split(",") if part}
    unknown = chosen - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios {sorted(unknown)}; known: {', '.join(SCENARIOS)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="SQLite only, short windows")
    parser.add_argument(
        "--only", help=f"comma-separated scenarios to run ({', '.join(SCENARIOS)}); default all"
    )
    parser.add_argument(
        "--profile",
        action=argparse.BooleanOptionalAction,
        help="profile the misses (default: full run yes, quick run no)",
    )
    parser.add_argument("--output", type=Path, help="write the Markdown here")
    args = parser.parse_args()
    only = selection(args.only)
    plan = QUICK if args.quick else FULL
    if args.profile is not None:
        plan = replace(plan, profile=args.profile)
    default = None if args.quick or only else proc.ROOT / "docs" / "benchmarks.md"
    output = args.output or default
    workdir = Path(tempfile.mkdtemp(prefix="mosaic-bench-"))
    run = Run(plan, workdir, only)
    run.log(
        f"{plan.name} run{'' if only is None else ' of ' + ','.join(sorted(only))}; "
        f"scratch directory {workdir}"
    )
    services = False
    pg_figures = None
    try:
        soak = sqlite_phase(run)
        if plan.services and run.wants("P1", "P1c", "P2", "P3", "P5", "P7"):
            if proc.pg_available() and proc.redis_available():
                services = True
                pg_figures = services_phase(run)
            else:
                run.log("PostgreSQL or Redis not reachable: their figures are skipped")
        if plan.services and run.wants("P8") and proc.pg_available():
            url = run.pg("p8")
            proc.prepare_product(url)
            p8(run, url, "PostgreSQL")
        if run.wants("P5"):
            if plan.p5_concurrency:
                p5_concurrency_section(run, run.raw.pop("P5 sqlite"), pg_figures)
            else:
                p5_skipped(run)
        if soak is not None:
            run.log("waiting for the soak to end")
            soak.finish(run.baseline_idle)  # type: ignore[attr-defined]
        run.sections.sort(key=lambda s: s["key"])
        if plan.profile:
            try:
                profiles(run)
            except Exception as error:  # a failed profile must not lose the figures
                run.log(f"profiling failed: {error}")
    finally:
        run.cleanup()
        for leftover in [*workdir.glob("*.sqlite3*"), *workdir.glob("*.template*")]:
            leftover.unlink()
    redis_db = proc.REDIS_BENCH_URL.rsplit("/", 1)[1]
    configuration = {
        "run": f"{plan.name} ({plan.repeats} repeats; medians quoted)"
        + ("" if only is None else f"; only {', '.join(sorted(only))}"),
        "configurations": LAYERS[SQLITE] + ("; " + LAYERS[SERVICES] if services else ""),
        "databases": "SQLite: a fresh file per server"
        + ("; PostgreSQL 127.0.0.1:5432" if services else ""),
        "channel layers": "in-memory" + (f"; Redis db {redis_db}" if services else ""),
        "CPU pinning": "servers on CPU 0, load generators on CPU 1 (taskset)"
        if proc.PIN
        else "none",
        "plan": json.dumps(asdict(plan)),
        "minutes": f"{(time.monotonic() - run.began) / 60:.1f}",
    }
    text = report.render(machine(), configuration, run.sections)
    (workdir / "results.json").write_text(json.dumps(run.raw, indent=1, default=str))
    if output is not None:
        output.write_text(text)
        run.log(f"wrote {output}")
    print(text)
    run.log(f"logs and raw results in {workdir}")


if __name__ == "__main__":
    main()
