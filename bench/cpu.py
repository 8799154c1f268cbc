"""Server CPU time, read from /proc: the process and every live descendant (threads included),
plus what its reaped children spent (P1c: CPU seconds per send)."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def stat_fields(text: str) -> list[str]:
    """The fields of `/proc/PID/stat` after the command name (which may hold spaces and ')')."""
    return text.rsplit(")", 1)[1].split()


def parent_of(text: str) -> int:
    return int(stat_fields(text)[1])


def cpu_ticks(text: str) -> int:
    """utime + stime + cutime + cstime of one `/proc/PID/stat` line, in clock ticks."""
    fields = stat_fields(text)
    # After the name: state(0) ppid(1) … utime(11) stime(12) cutime(13) cstime(14).
    return sum(int(fields[i]) for i in (11, 12, 13, 14))


def tree_ticks(stats: dict[int, str], root: int) -> int:
    """CPU ticks of `root` and its descendants among `stats` (pid → stat text)."""
    children: dict[int, list[int]] = {}
    for pid, text in stats.items():
        children.setdefault(parent_of(text), []).append(pid)
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        if pid in stats:
            total += cpu_ticks(stats[pid])
        pending += children.get(pid, [])
    return total


def read_stats() -> dict[int, str]:
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stats[int(entry.name)] = (entry / "stat").read_text()
            except OSError:
                continue
    return stats


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by `pid`'s process tree."""
    return tree_ticks(read_stats(), pid) / TICKS
