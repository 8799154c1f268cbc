"""Profiles of a missed target: py-spy's collapsed stacks, boiled down to where the time goes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

# Frames of these packages are the product's own code.
OURS = ("broker/", "chat/", "mosaic/", "tester/")
# Where a sample's time is charged when no finer frame of interest is on the stack.
AREAS = (
    ("database backend and driver", ("django/db/backends/", "psycopg/")),
    ("Django ORM (query building, model instances)", ("django/db/models",)),
    ("DRF views and serializers", ("rest_framework/",)),
    ("Django request handling and middleware", ("django/core/handlers", "django/middleware")),
    ("Channels layer and consumers", ("channels/", "channels_redis/")),
    ("asgiref thread hops (sync_to_async)", ("asgiref/",)),
    ("daphne / Twisted / autobahn", ("daphne/", "twisted/", "autobahn/")),
)


def frame_file(frame: str) -> str:
    inside = frame[frame.rfind("(") + 1 : frame.rfind(")")]
    return inside.rsplit(":", 1)[0]


def short(frame: str, root: str) -> str:
    """`function (path:line)` with the path relative to the repository."""
    path = frame_file(frame)
    if path.startswith(root):
        path = path[len(root) :].lstrip("/")
    return f"{frame.split(' (')[0]} ({path})"


def summarise(path: Path, root: str, top: int = 8) -> dict[str, object]:
    """Sample shares: by area (inclusive), the product's functions (inclusive), leaves (self)."""
    stacks: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks[stack] += int(count)
    # Startup (imports, django.setup) is not what a benchmark asks about.
    busy = {s: n for s, n in stacks.items() if "_find_and_load" not in s and "setup (" not in s}
    total = sum(busy.values()) or 1
    areas: Counter[str] = Counter()
    ours: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for stack, count in busy.items():
        frames = stack.split(";")
        leaves[short(frames[-1], root)] += count
        for name, needles in AREAS:
            if any(needle in stack for needle in needles):
                areas[name] += count
        seen = set()
        for frame in frames:
            label = short(frame, root)
            if label.split(" (", 1)[1].startswith(OURS) and frame not in seen:
                seen.add(frame)
                ours[label] += count

    def shares(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(100.0 * n / total, 1)) for name, n in counter.most_common(top)]

    return {
        "samples": total,
        "areas": shares(areas),
        "ours": shares(ours),
        "leaves": shares(leaves),
    }
