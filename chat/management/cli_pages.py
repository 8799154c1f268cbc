"""Every row of a broker list, read page by page with the `after` cursor (SPEC §6)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db.models import Model

from broker.fields import MAX_LIMIT

M = TypeVar("M", bound=Model)


def every_row(fetch: Callable[[int, int], list[M]], *, after: int = 0) -> list[M]:
    """All rows with an id above `after`, oldest first; `fetch(after, limit)` reads one page."""
    found: list[M] = []
    while True:
        page = fetch(after, MAX_LIMIT)
        found += page
        if len(page) < MAX_LIMIT:
            return found
        after = page[-1].pk
