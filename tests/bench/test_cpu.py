"""The server CPU reading of P1c: /proc stat lines, summed over a process tree."""

from __future__ import annotations

import os

from bench import cpu


def stat(pid: int, parent: int, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    # A command name with a space and a ')' inside, as /proc allows.
    fields = ["S", str(parent), *["0"] * 9, str(utime), str(stime), str(cutime), str(cstime)]
    return f"{pid} (py (x) y) " + " ".join([*fields, *["0"] * 30])


def test_cpu_ticks_sum_user_system_and_reaped_children() -> None:
    assert cpu.cpu_ticks(stat(7, 1, 10, 5, 3, 2)) == 20


def test_tree_ticks_counts_descendants_not_siblings() -> None:
    stats = {
        10: stat(10, 1, 100, 50),
        11: stat(11, 10, 7, 3),  # child
        12: stat(12, 11, 1, 1),  # grandchild
        20: stat(20, 1, 999, 999),  # unrelated
    }
    assert cpu.tree_ticks(stats, 10) == 162


def test_tree_ticks_unknown_root_counts_zero() -> None:
    assert cpu.tree_ticks({1: stat(1, 0, 5, 5)}, 42) == 0


def test_tree_cpu_seconds_reads_this_process() -> None:
    seconds = cpu.tree_cpu_seconds(os.getpid())
    assert seconds > 0
