"""`docs/benchmarks.md`: machine and configuration on top, then one table per target."""

from __future__ import annotations

import math
import time
from typing import Any

HEADER = (
    "| setup | n | p50 ms | p95 ms | p99 ms | max ms | lost | dup | out of order | errors "
    "| figure |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


# For a section with a missed target: what would close it, as the profiles and the code show it
# (by the section key's longest matching start). Kept here, beside the rendering, so that every
# run writes it under the miss; rewrite a sentence when the work it names is done.
WHAT_WOULD_CLOSE = {
    "P1 PostgreSQL": (
        "Two things, measured apart. The server's CPU per send (P1c) bounds the throughput of "
        "its one CPU: a tester's send is four round trips (the listener's business read, BEGIN, "
        "the thread read that takes the stream lock, and the one statement that stores the "
        "message, its trail row and the thread's activity with the COMMIT behind it), and what "
        "is left of its CPU is mostly the web stack (Django's handler and middleware, DRF's "
        "request, daphne), not the broker. And the business's stream lock is held from the "
        "thread read until the store's round trip returns with its WAL flush; the other HTTP "
        "workers (four on PostgreSQL) do their Python meanwhile, but take the lock in turn. "
        "Keeping rows in id order (SPEC §6's cursors) without holding a lock through the "
        "commit would close the second."
    ),
    "P1c PostgreSQL": (
        "Per send the product does what the plain app does not: the listener's read of the "
        "tester's business (L5's gate on every request, one round trip), the thread read under "
        "the stream lock and the store with its COMMIT (two more, and BEGIN), and for each nudge "
        "the Console's socket reads the rows after its last id from the database, where the "
        "plain app pushes the message itself. Those reads, Django's request handling and "
        "daphne are what is left once the writes became one statement and a turn's nudges one "
        "round trip for their groups' members. A nudge that carried the row to the sockets "
        "allowed to see it (SPEC §11) would spare the socket's read; server-side binding with "
        "prepared statements would spare PostgreSQL's parse and plan of the three hot "
        "statements."
    ),
    "P2": (
        "A row reaches the Console after the send's own transaction (P1) and then a read by the "
        "socket after its nudge; on PostgreSQL the tail is P1's: sends that wait for the stream "
        "lock behind a slow commit. A nudge that carried the row and the id before it in the "
        "reader's view (SPEC §11) would spare the read, not the wait."
    ),
    "P3": (
        "Each process follows a stream once and shares one read among its sockets; what is left "
        "per socket is its sender task's wake and its WebSocket write, about a quarter of a "
        "millisecond each on this CPU."
    ),
    "P4": (
        "The fixed cost of a request is most of it. Measured on a server with 1,000 threads "
        "(SQLite, one read at a time): the 10-thread list costs 9.0 ms of server CPU and the "
        "100-thread list 13.2 ms, of which the list's read is 3.3 and 6.8 ms — 2.2 ms of it "
        "the ORM building and compiling the query with its three subqueries; a 10-message page "
        "costs 6.8 ms, its read 1.3 ms. About 5.5 ms a request is daphne, Django, DRF and the "
        "listener's sign-in, the same for every read; compiling the list's query once per "
        "shape would take about 2 ms off each list, short of a 20-ms p99 on its own."
    ),
    "P8": (
        "The database's share is small once each read is bounded: measured in one process on "
        "PostgreSQL, the thread page of the busiest thread makes 11 queries in about 40 ms and "
        "the one-thread message list 6 in about 28 ms; the rest is Django rendering admin's "
        "pages. The thread page's rows are placed by one loop of their own since this run's "
        "profile found admin's per-field template most of its time (in process, 50 messages: "
        "113 ms of CPU a page before, 48 ms after); searches read the trigram index, and what "
        "remains there is the changelist's own rendering and the index's recheck of matches."
    ),
    "P5 concurrency": (
        "The business's stream lock, held by each reply from its first statement to its commit "
        "so that a stream's rows commit in id order: every second a holding thread waits for "
        "its process's CPU, every writer of the business waits with it (all of P5's threads are "
        "one business's). Row locks are FOR NO KEY UPDATE (the runners once deadlocked on them),"
        " the answered message is read before the lock, and a model request no longer walks "
        "its body through the client's types (a quarter of a busy runner's CPU). What remains "
        "is runner CPU per turn — most of it the ORM's, and a model client per request rather "
        "than per backend — or a stream order that needs no lock held until commit."
    ),
    "P5 offline": (
        "The bus's share is a send, a claim and a reply's two inserts; the runner waits for a "
        "nudge, so what remains is those transactions on the loaded server."
    ),
    "P7": (
        "The overload itself holds: every send answered within 5 s, no connection exhaustion, "
        "nothing lost, and the queue drains within a second of the drop. Goodput is judged "
        "against the server's capacity with P7's Console open, which costs each send its row's "
        "read and push: a refusal, decided at arrival, costs no worker, and measured it costs "
        "the loop little enough that the server serves nearly its whole capacity at 2× P1's "
        "rate. Refusing before daphne builds a request was tried and served no more. After the "
        "drop, what remains are P2's stalls at half capacity: a send waiting for the stream "
        "lock behind a slow commit."
    ),
}


def what_would_close(key: str) -> str | None:
    starts = [start for start in WHAT_WOULD_CLOSE if key.startswith(start)]
    return WHAT_WOULD_CLOSE[max(starts, key=len)] if starts else None


def verdict(what: str, value: float, limit: float, higher: bool) -> dict[str, Any]:
    """A figure against its target: `higher` means at least `limit`, else at most."""
    if math.isnan(value):
        return {"text": f"{what}: no figure", "met": None}
    met = value >= limit if higher else value <= limit
    sign = "≥" if higher else "≤"
    return {"text": f"{what} = {value:.3g} (target {sign} {limit:g})", "met": met}


def check(what: str, met: bool) -> dict[str, Any]:
    return {"text": what, "met": met}


def skipped(what: str) -> dict[str, Any]:
    return {"text": f"{what}: not measured in this run", "met": None}


def recorded(what: str) -> dict[str, Any]:
    """A figure with no target, measured to be watched (P9)."""
    return {"text": what, "met": None, "recorded": True}


def number(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def row(line: dict[str, Any]) -> str:
    latency = line.get("latency") or {}
    cells = [
        line["setup"],
        number(latency.get("n")) if latency else "–",
        *(number(latency.get(k)) for k in ("p50", "p95", "p99", "max")),
        *(number(line.get(k)) for k in ("lost", "duplicates", "out_of_order", "errors")),
        line.get("figure", ""),
    ]
    return "| " + " | ".join(cells) + " |"


def mark(item: dict[str, Any]) -> str:
    if item.get("recorded"):
        return "recorded"
    return {True: "**met**", False: "**missed**", None: "not measured"}[item["met"]]


def render(
    machine: dict[str, str], configuration: dict[str, str], sections: list[dict[str, Any]]
) -> str:
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m bench.run`); every full run rewrites this file. "
        "`make bench-quick` prints the same tables for SQLite and the in-memory layer only, "
        "with shorter windows and a 20-second soak, and writes nothing; `python -m bench.run "
        "--only P7` (or `make bench BENCH_ARGS='--only P7'`) runs some scenarios alone. How "
        "the figures are made is in `bench/` (see its docstrings); P1–P4 and P7 have the "
        "performance issue's targets, P5 and P6 issue 7's, P8 issue 26's; P9 is recorded, "
        "with no target.",
        "",
        f"Run at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| machine | |",
        "|---|---|",
        *(f"| {key} | {value} |" for key, value in machine.items()),
        "",
        "| configuration | |",
        "|---|---|",
        *(f"| {key} | {value} |" for key, value in configuration.items() if key != "plan"),
        "",
        "The machine is shared and noisy: figures vary about ±15% between runs. Product and "
        "baseline are measured in the same run on the same configuration (alternately for P1; "
        "one after the other for P2 and P3, each with its Consoles open throughout), and each "
        "figure is the median of its repeats (for latencies, the median of each repeat's "
        "percentile); n is the samples of one repeat. Servers run on one CPU and the load "
        "generator, a process of its own, on the other. P1 is closed-loop; every other load "
        "is open-loop: each send is due at a fixed time and its latency counts from then. The "
        "product runs as `make run` runs it (`manage.py serve`: daphne, both listeners), with "
        "`--no-runner` except for P5 so that, like the baseline, it does only the sending; "
        "load goes to the tester listener, which needs no sign-in, and Consoles read the "
        "tester's trail.",
        "",
        "## Summary",
        "",
        "| target | verdict | figure |",
        "|---|---|---|",
    ]
    for section in sections:
        for item in section["verdicts"]:
            lines.append(f"| {section['key']} | {mark(item)} | {item['text']} |")
    for section in sections:
        lines += ["", f"## {section['title']}", "", f"Target: {section['target']}.", ""]
        if section["rows"]:
            lines += [HEADER, *(row(line) for line in section["rows"]), ""]
        for item in section["verdicts"]:
            lines.append(f"- {mark(item)}: {item['text']}")
        if section.get("note"):
            lines += ["", section["note"]]
        closing = what_would_close(section["key"])
        if closing and any(item["met"] is False for item in section["verdicts"]):
            lines += ["", f"What would close it: {closing}"]
        profile = section.get("profile")
        if profile:
            lines += [
                "",
                f"Profile of the product on this scenario (py-spy, {profile['samples']} samples "
                "of the server's threads while busy; % of samples with the frame on the stack):",
                "",
                "| where | % |",
                "|---|---:|",
                *(f"| {name} | {share} |" for name, share in profile["areas"]),
                *(f"| `{name}` | {share} |" for name, share in profile["ours"]),
                "",
                "Hottest leaf frames: "
                + "; ".join(f"`{name}` {share}%" for name, share in profile["leaves"][:5])
                + ".",
            ]
    lines.append("")
    return "\n".join(lines)
