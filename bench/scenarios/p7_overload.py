"""P7: overload — twice the product's own capacity (P1's sends/s on PostgreSQL + Redis), then
half of it, one Console open throughout; its figures are `bench.overload`'s."""

from __future__ import annotations

import statistics
from typing import Any, cast

from bench import overload, report
from bench import processes as proc
from bench.harness import Harness
from bench.plans import LAYERS, SERVICES, Plan
from bench.postgres_sampler import PostgresSampler
from bench.scenarios.p1_sends import p1_config
from bench.scenarios.p2_trail_latency import P2_RATE
from bench.stats import summary

# P7's nominal is the product at half capacity before the overload, measured for this long.
P7_CALM_SECONDS = 10.0


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
    harness: Harness,
    server: proc.Process,
    threads: list[int],
    database: str,
    found: dict[str, float],
) -> None:
    """P7: twice the product's own capacity, then half of it, one Console open throughout."""
    plan = harness.plan
    capacity = found["capacity"]
    config = p7_config(plan, capacity)
    with_console = []
    for _ in range(plan.repeats):
        measured = proc.load(
            {
                **p1_config(plan),
                "consoles": 1,
                "run": harness.tag(),
                "target": harness.target(server, threads),
            }
        )
        with_console.append(measured["throughput"])
    console_capacity = statistics.median(with_console)
    harness.log(
        f"P7: capacity with a Console open {console_capacity:.0f} sends/s "
        f"({', '.join(f'{rate:.0f}' for rate in with_console)}); P1's {capacity:.0f}"
    )
    log_before = len(server.log.read_text(errors="replace"))
    harness.log(
        f"P7: {config['high']:.0f} sends/s for {plan.p7_seconds:g} s, then {config['low']:.0f}"
    )
    with ConnectionWatch(database.rsplit("/", 1)[1]) as watch:
        result = proc.load(
            {**config, "run": harness.tag(), "target": harness.target(server, threads)},
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
    harness.log(
        f"P7: {figures['kinds']}, lost {figures['lost']}, recovery {figures['recovery']:.1f} s, "
        f"goodput {goodput:.2f} × capacity with the Console open "
        f"({goodput * console_capacity / capacity:.2f} × P1's), "
        f"503s answered in {1000 * refused_p50:.0f} ms "
        f"(p50), {1000 * refused_p99:.0f} ms (p99), "
        f"too many clients {too_many}, Console closed {result['console_closed']}"
    )
    section = harness.section(
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
    harness.raw["P7"] = {
        "config": config,
        "figures": figures,
        "goodput": goodput,
        "refused_ms": {"p50": 1000 * refused_p50, "p99": 1000 * refused_p99},
        "too_many_clients": too_many,
        "connections": vars(watch) | {"stop": None, "thread": None},
        "console_closed": result["console_closed"],
        "records": records,
    }
