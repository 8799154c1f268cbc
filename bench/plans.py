"""What a benchmark run covers: the configurations it measures, and its plans — the quick
run's and the full run's repeats, windows and sizes."""

from __future__ import annotations

from dataclasses import dataclass

SQLITE = "SQLite"
SERVICES = "PostgreSQL + Redis"
LAYERS = {SQLITE: "SQLite, in-memory layer", SERVICES: "PostgreSQL, Redis layer"}


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
