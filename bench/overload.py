"""P7's figures, from one record per send of the overload run.

A record is `(due, done, status, retry_after, error, arrived)`: seconds on the load
generator's clock when the send was due, when its answer came (None: no answer in time), the
HTTP status (-1 for a failed connection, -2 for no answer within the deadline), whether the
answer carried `Retry-After`, the body's `error` code, and when its row reached the open
Console (None: never).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.stats import percentile

Record = tuple[float, float | None, int, bool, str | None, float | None]


def acceptable(record: Record, deadline: float) -> bool:
    """Answered within `deadline`: 2xx, or 503 `unavailable` with `Retry-After`."""
    due, done, status, retry_after, error, _ = record
    if done is None or done - due > deadline:
        return False
    if 200 <= status < 300:
        return True
    return status == 503 and retry_after and error == "unavailable"


def delivery(record: Record) -> float:
    """Seconds from due to the row at the Console; infinite for a send that made no row."""
    due, _, status, _, _, arrived = record
    if 200 <= status < 300 and arrived is not None:
        return arrived - due
    return math.inf


def window_p99s(
    records: Sequence[Record], start: float, end: float, width: float
) -> list[tuple[float, float]]:
    """(window start relative to `start`, p99 of delivery) for each `width`-second window of
    sends due in [start, end); windows with no send are left out."""
    count = max(1, math.ceil((end - start) / width - 1e-9))
    buckets: list[list[float]] = [[] for _ in range(count)]
    for record in records:
        if start <= record[0] < end:
            buckets[min(count - 1, int((record[0] - start) / width))].append(delivery(record))
    return [(i * width, percentile(b, 0.99)) for i, b in enumerate(buckets) if b]


def nominal_p99(records: Sequence[Record], calm_end: float) -> float:
    """The p99 of delivery of the sends due before `calm_end`: the server at the low rate
    before the overload, what "back to nominal" after it means."""
    ((_, p99),) = window_p99s(records, 0.0, calm_end, calm_end)
    return p99


def recovery_seconds(
    records: Sequence[Record], drop_at: float, end: float, limit: float, width: float = 1.0
) -> float:
    """Seconds after the drop until the p99 stays at or under `limit`: the first whole
    `width` step t from which the sends due in [drop + t, end) have a delivery p99 within it
    (`end - drop_at` when none has).

    A p99 of what follows, not of each window: at the low rate a one-second window holds about
    a hundred sends, so its p99 is nearly its slowest, and asking every later window to stay
    under twice a p99 of a thousand fails a server that never changed, by chance alone."""
    steps = max(1, math.ceil((end - drop_at) / width - 1e-9))
    for step in range(steps):
        after = drop_at + step * width
        rest = [delivery(r) for r in records if after <= r[0] < end]
        if rest and percentile(rest, 0.99) <= limit:
            return step * width
    return end - drop_at


def figures(
    records: Sequence[Record],
    drop_at: float,
    end: float,
    nominal_p99: float,
    *,
    deadline: float = 5.0,
    width: float = 1.0,
) -> dict[str, Any]:
    """Everything P7 judges, from the records; `drop_at` and `end` on the records' clock,
    `nominal_p99` in seconds."""
    ok = [r for r in records if 200 <= r[2] < 300]
    kinds: Counter[str] = Counter()
    for record in records:
        if acceptable(record, deadline):
            kinds["2xx" if 200 <= record[2] < 300 else "503 unavailable"] += 1
        elif record[1] is None or record[2] == -2:
            kinds["no answer in time"] += 1
        elif record[1] - record[0] > deadline:
            kinds["answered late"] += 1
        else:
            kinds[f"{record[2]} {record[4] or ''}".strip()] += 1
    windows = window_p99s(records, drop_at, end, width)
    limit = 2 * nominal_p99
    answered = [r[1] - r[0] for r in records if r[1] is not None]
    return {
        "sends": len(records),
        "ok": len(ok),
        "kinds": dict(kinds),
        "unacceptable": sum(1 for r in records if not acceptable(r, deadline)),
        "lost": sum(1 for r in ok if r[5] is None),
        "answer_p99": percentile(answered, 0.99),
        "answer_max": max(answered) if answered else math.nan,
        "windows": [(offset, p99 if math.isfinite(p99) else None) for offset, p99 in windows],
        "limit": limit,
        "recovery": recovery_seconds(records, drop_at, end, limit, width),
    }


def goodput(records: Sequence[Record], start: float, end: float, capacity: float) -> float:
    """Sends due in [start, end) answered 2xx, per second, ÷ `capacity` (sends/s): the share
    of what the server can serve that it did serve."""
    served = sum(1 for r in records if start <= r[0] < end and 200 <= r[2] < 300)
    return served / (end - start) / capacity


def refusal_latencies(records: Sequence[Record]) -> tuple[float, float]:
    """(p50, p99) in seconds from due to answer of the sends refused 503."""
    refused = [r[1] - r[0] for r in records if r[2] == 503 and r[1] is not None]
    return percentile(refused, 0.5), percentile(refused, 0.99)
