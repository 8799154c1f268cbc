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
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench import processes as proc
from bench import report
from bench.harness import Harness
from bench.plans import FULL, LAYERS, QUICK, SERVICES, SQLITE
from bench.profiles import summarise
from bench.scenarios.p1_sends import p1_config, p1_section, pg_floor, sends_per_second, sqlite_floor
from bench.scenarios.p1c_cpu_per_send import p1c_section
from bench.scenarios.p2_trail_latency import P2_RATE, p2_section
from bench.scenarios.p3_fan_out import p3_section, p3s_section
from bench.scenarios.p4_reads_at_scale import p4
from bench.scenarios.p5_replies import (
    p5_concurrency_section,
    p5_offline,
    p5_postgres,
    p5_skipped,
    p5_sqlite,
)
from bench.scenarios.p6_memory import Soak, idle_consoles
from bench.scenarios.p7_overload import p7, p7_config
from bench.scenarios.p8_staff_reads import p8
from bench.scenarios.p9_tool_steps import p9
from bench.streams import streams

SCENARIOS = ("P1", "P1c", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9")
# The full run stays under about 15 minutes: profiles of misses start only before this.
PROFILE_BUDGET_MINUTES = 13.0


# --- phases ---------------------------------------------------------------------------------


def templates(harness: Harness) -> tuple[Path, Path]:
    """Migrated SQLite files, copied fresh for each server (a migration costs seconds)."""
    product, baseline = harness.workdir / "product.template", harness.workdir / "baseline.template"
    with ThreadPoolExecutor(2) as pool:
        jobs = [
            pool.submit(proc.prepare_product, f"sqlite:///{product}"),
            pool.submit(proc.prepare_baseline, f"sqlite:///{baseline}"),
        ]
        for job in jobs:
            job.result()
    return product, baseline


def pair_scenarios(
    harness: Harness,
    setup: str,
    pair: list[tuple[str, proc.Process, list[int]]],
    floor: Callable[[], float],
) -> dict[str, float]:
    """P1, P2 (with P1c) and P3 on one configuration; P1's and P2's product figures back."""
    plan = harness.plan
    found: dict[str, float] = {}
    needs_p1 = harness.wants("P1") or (setup == SERVICES and harness.wants("P7"))
    needs_p2 = harness.wants("P2", "P1c")
    if needs_p1:
        found["capacity"] = p1_section(harness, setup, sends_per_second(harness, pair, floor))
    if needs_p2:
        measured = streams(
            harness,
            pair,
            consoles=1,
            rate=P2_RATE,
            seconds=plan.p2_seconds,
            label=f"P2 {setup}",
            cpu=True,
        )
        found["nominal_p99"] = p2_section(harness, setup, measured)
        p1c_section(harness, setup, measured)
        capacity = found.get("capacity", math.inf)
        if capacity < P2_RATE:
            warning = (
                f" This run's P1 had the product at {capacity:.0f} sends/s, under "
                f"{P2_RATE}: here the figures are those of a saturated server."
            )
            for section in harness.sections[-2:]:
                section["note"] += warning
    if harness.wants("P3"):
        p3_section(
            harness,
            setup,
            streams(
                harness,
                pair,
                consoles=plan.p3_consoles,
                rate=plan.p3_rate,
                seconds=plan.p3_rows / plan.p3_rate,
                label=f"P3 {setup}",
            ),
        )
        p3s_section(
            harness,
            setup,
            streams(
                harness,
                pair,
                consoles=plan.p3s_consoles,
                rate=plan.p3s_rate,
                seconds=plan.p3s_seconds,
                label=f"P3 sustained {setup}",
            ),
        )
    return found


def profile(
    harness: Harness, database: str, key: str, config: dict[str, Any], **server: Any
) -> None:
    """Serve once more under py-spy, replay one repeat of the scenario, summarise."""
    out = harness.workdir / f"profile-{key.replace(' ', '-')}.txt"
    label = f"product-profile-{harness.tag()}"
    target = proc.product_server(harness.workdir, database, label=label, **server)
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
    with harness.running(target):
        threads = harness.threads(target, 20)
        with contextlib.suppress(RuntimeError):  # an overload replay may end in failures
            proc.load(
                {**config, "run": harness.tag(), "target": harness.target(target, threads)},
                timeout=300,
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
        harness.raw.setdefault("profiles", {})[key] = summary
        for section in harness.sections:
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


def sqlite_phase(harness: Harness) -> Soak | None:
    plan = harness.plan
    if not harness.wants("P1", "P1c", "P2", "P3", "P4", "P5", "P6", "P8", "P9"):
        return None
    product_template, baseline_template = templates(harness)
    harness.templates = (product_template, baseline_template)  # type: ignore[attr-defined]
    harness.log("templates ready")
    soak = None
    if harness.wants("P6"):
        soak = Soak(harness, product_template)
        soak.start()
    if harness.wants("P1", "P1c", "P2", "P3", "P6"):
        product = proc.product_server(
            harness.workdir, harness.sqlite_copy(product_template, "product")
        )
        baseline = proc.baseline_server(
            harness.workdir, harness.sqlite_copy(baseline_template, "baseline")
        )
        with harness.running(product, baseline):
            if harness.wants("P6"):
                baseline_idle, held = idle_consoles(harness, baseline, None)
                held.release()
                harness.baseline_idle = baseline_idle  # type: ignore[attr-defined]
            threads = harness.threads(product, 20)
            pair = [("product", product, threads), ("baseline", baseline, [])]
            pair_scenarios(harness, SQLITE, pair, lambda: sqlite_floor(harness))
    harness.profile_targets[SQLITE] = {
        "database": lambda: harness.sqlite_copy(product_template, "profile"),
        "server": {},
    }
    if harness.wants("P4"):
        p4(harness, product_template)
    if harness.wants("P8"):
        p8(harness, harness.sqlite_copy(product_template, "p8"), SQLITE)
    if harness.wants("P5"):
        p5_offline(harness, product_template)
        if plan.p5_concurrency:
            harness.raw["P5 sqlite"] = p5_sqlite(harness, product_template)
    if harness.wants("P9"):
        p9(harness, product_template)
    return soak


def services_phase(harness: Harness) -> dict[str, list[float]] | None:
    """PostgreSQL with the Redis layer: P1, P1c, P2, P3, P7, and P5 on PostgreSQL."""
    if not harness.wants("P1", "P1c", "P2", "P3", "P5", "P7"):
        return None
    urls = {"product": harness.pg("product"), "baseline": harness.pg("baseline")}
    with ThreadPoolExecutor(2) as pool:
        jobs = [
            pool.submit(proc.prepare_product, urls["product"]),
            pool.submit(proc.prepare_baseline, urls["baseline"]),
        ]
        for job in jobs:
            job.result()
    floor_url = harness.pg("floor")
    harness.log("PostgreSQL databases ready")
    redis = proc.REDIS_BENCH_URL
    harness.profile_targets[SERVICES] = {
        "database": lambda: urls["product"],
        "server": {"redis_url": redis},
    }
    if harness.wants("P1", "P1c", "P2", "P3", "P7"):
        proc.flush_redis()
        product = proc.product_server(
            harness.workdir, urls["product"], redis_url=redis, label="product-pg"
        )
        baseline = proc.baseline_server(
            harness.workdir, urls["baseline"], redis_url=redis, label="baseline-pg"
        )
        try:
            with harness.running(product, baseline):
                threads = harness.threads(product, 20)
                pair = [("product", product, threads), ("baseline", baseline, [])]
                found = pair_scenarios(
                    harness, SERVICES, pair, lambda: pg_floor(harness, floor_url)
                )
                if harness.wants("P7"):
                    p7(harness, product, threads, urls["product"], found)
        finally:
            proc.flush_redis()
    if not (harness.wants("P5") and harness.plan.p5_concurrency):
        return None
    return p5_postgres(harness, urls["product"])


def profile_configs(harness: Harness) -> dict[str, dict[str, Any]]:
    """Section key → the scenario to replay under py-spy, in the order profiles are taken."""
    plan = harness.plan
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
            capacity = harness.raw.get("P7", {}).get("config", {}).get("high", 0) / 2
            if capacity:
                configs["P7"] = p7_config(plan, capacity, seconds=plan.p7_seconds / 2)
    configs[f"P3 {SERVICES}"] = p3
    configs[f"P3 sustained {SERVICES}"] = p3s
    return configs


def profiles(harness: Harness) -> None:
    """Profile the product on each missed target that a server-side profile can explain; one
    replay serves every missed target of the same scenario and configuration (P1c and P2).
    No replay starts after PROFILE_BUDGET_MINUTES of the run; a miss left without says so."""
    missed = {s["key"] for s in harness.sections if any(v["met"] is False for v in s["verdicts"])}
    done: dict[str, str] = {}
    for key, config in profile_configs(harness).items():
        if key not in missed:
            continue
        setup = SQLITE if key.endswith(SQLITE) else SERVICES
        where = harness.profile_targets.get(setup)
        if where is None:
            continue
        replay = f"{setup} {json.dumps(config, sort_keys=True)}"
        if replay in done and done[replay] in harness.raw.get("profiles", {}):
            for section in harness.sections:
                if section["key"] == key:
                    section["profile"] = harness.raw["profiles"][done[replay]]
            continue
        if (time.monotonic() - harness.began) / 60 > PROFILE_BUDGET_MINUTES:
            harness.log(f"no time left to profile {key}")
            for section in harness.sections:
                if section["key"] == key:
                    section["note"] = section.get("note", "") + (
                        " No profile of this miss: the run had used its time for profiles."
                    )
            continue
        harness.log(f"profiling {key}")
        if setup == SERVICES:
            proc.flush_redis()
        profile(harness, where["database"](), key, config, **where["server"])
        done[replay] = key
    if SERVICES in harness.profile_targets:
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
    harness = Harness(plan, workdir, only)
    harness.log(
        f"{plan.name} run{'' if only is None else ' of ' + ','.join(sorted(only))}; "
        f"scratch directory {workdir}"
    )
    services = False
    pg_figures = None
    try:
        soak = sqlite_phase(harness)
        if plan.services and harness.wants("P1", "P1c", "P2", "P3", "P5", "P7"):
            if proc.pg_available() and proc.redis_available():
                services = True
                pg_figures = services_phase(harness)
            else:
                harness.log("PostgreSQL or Redis not reachable: their figures are skipped")
        if plan.services and harness.wants("P8") and proc.pg_available():
            url = harness.pg("p8")
            proc.prepare_product(url)
            p8(harness, url, "PostgreSQL")
        if harness.wants("P5"):
            if plan.p5_concurrency:
                p5_concurrency_section(harness, harness.raw.pop("P5 sqlite"), pg_figures)
            else:
                p5_skipped(harness)
        if soak is not None:
            harness.log("waiting for the soak to end")
            soak.finish(harness.baseline_idle)  # type: ignore[attr-defined]
        harness.sections.sort(key=lambda s: s["key"])
        if plan.profile:
            try:
                profiles(harness)
            except Exception as error:  # a failed profile must not lose the figures
                harness.log(f"profiling failed: {error}")
    finally:
        harness.cleanup()
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
        "minutes": f"{(time.monotonic() - harness.began) / 60:.1f}",
    }
    text = report.render(machine(), configuration, harness.sections)
    (workdir / "results.json").write_text(json.dumps(harness.raw, indent=1, default=str))
    if output is not None:
        output.write_text(text)
        harness.log(f"wrote {output}")
    print(text)
    harness.log(f"logs and raw results in {workdir}")


if __name__ == "__main__":
    main()
