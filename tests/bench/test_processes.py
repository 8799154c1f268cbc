"""The benchmark's process helpers (bench/processes.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from bench import processes

REPORT_POLICIES = (
    "import os, threading\n"
    "policies = [os.sched_getscheduler(0)]\n"
    "worker = threading.Thread(target=lambda: policies.append(os.sched_getscheduler(0)))\n"
    "worker.start(); worker.join()\n"
    "print(*policies)\n"
)


def test_a_program_at_idle_priority_runs_every_thread_it_starts_at_idle_priority() -> None:
    """The soak beside the measured scenarios (P6) must take no CPU their load generators want."""
    argv = processes.idle_priority([sys.executable, "-c", REPORT_POLICIES])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.split() == [str(os.SCHED_IDLE)] * 2
