"""P6: memory — server RSS per idle Console, and the drift of RSS over a soak that runs beside
the rest of the run on a product server of its own (`Soak`)."""

from __future__ import annotations

import json
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench import processes as proc
from bench import report
from bench.harness import Harness


def idle_consoles(
    harness: Harness, server: proc.Process, quiet_thread: int | None, *, idle: bool = False
) -> tuple[dict[str, Any], proc.HeldLoad]:
    """P6: server RSS before and 2 s after opening the idle Consoles, which stay open."""
    before = server.rss_kib()
    held = proc.HeldLoad(
        {
            "scenario": "idle",
            "run": harness.tag(),
            "target": harness.target(server),
            "consoles": harness.plan.p6_consoles,
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
        "per_console": (after - before) / harness.plan.p6_consoles,
        "open_seconds": ready["seconds"],
    }
    harness.log(f"P6 {server.name}: {figures['per_console']:.1f} KiB per idle Console")
    return figures, held


class Soak:
    """The product on a server of its own, beside the rest of the run: the idle Consoles of
    P6 stay open while a light load runs for the soak's length and RSS is sampled. The soak's
    processes run on the load generators' CPU at idle priority: they take only time that the
    measured scenarios' load generators leave, so their latencies are not the soak's."""

    def __init__(self, harness: Harness, template: Path) -> None:
        self.harness = harness
        # On the load generators' CPU: the servers measured meanwhile keep theirs to themselves.
        self.server = proc.product_server(
            harness.workdir,
            harness.sqlite_copy(template, "soak"),
            label="product-soak",
            cpus=proc.LOAD_CPUS,
            idle=True,
        )
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def start(self) -> None:
        harness = self.harness
        harness.started.append(self.server)
        self.server.start()
        threads = harness.threads(self.server, 6)
        self.idle, self.held = idle_consoles(
            harness, self.server, quiet_thread=threads[0], idle=True
        )
        self.began = time.monotonic()
        self.sampler = threading.Thread(target=self.sample, daemon=True)
        self.sampler.start()
        config = {
            "scenario": "stream",
            "run": harness.tag(),
            "target": harness.target(self.server, threads[1:]),
            "consoles": 10,
            "rate": 5,
            "duration": harness.plan.soak_seconds,
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
        harness.loads += [self.load, self.held.popen]

    def sample(self) -> None:
        while not self.stop.wait(2.0):
            self.samples.append((time.monotonic() - self.began, self.server.rss_kib()))

    def finish(self, baseline: dict[str, Any]) -> None:
        harness = self.harness
        out, err = self.load.communicate(timeout=harness.plan.soak_seconds + 300)
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
        plan = harness.plan
        section = harness.section(
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
        harness.raw["P6"] = {
            "product": self.idle,
            "baseline": baseline,
            "samples": self.samples,
            "soak": soak,
        }
