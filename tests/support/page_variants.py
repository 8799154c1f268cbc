"""The page's own variants of a browser test, and the pass that runs each of them once.

A browser test runs its Console at several page sizes and colour schemes (its `viewport`, `size`
and `dark` parameters). They are the page's own: the server never learns them, and a case that
differs from another only in them makes the same requests of it. What they can show is how the
page draws, and that depends on the browser, not on the database or the channel layer behind
the server.

So the pass on PostgreSQL and Redis, the one that exists to run the suite against the
production configuration, runs each of those groups once (`MOSAIC_PAGE_VARIANTS=one`): of the
cases of one test function that differ only in the page's parameters it keeps one, the desktop
and light one when there is one. Every other parameter (the listener above all) keeps every
value, and every test function keeps at least one case: `tests/test_page_variants.py` proves
both on the real collection. The SQLite pass runs every variant.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence

import pytest

from tests.support.console_pages import DESKTOP

SWITCH = "MOSAIC_PAGE_VARIANTS"
ONE = "one"
# The parameters a browser test's page is drawn by, and nothing on the server reads.
PAGE_PARAMETERS = frozenset({"viewport", "size", "dark"})


def one_variant_each() -> bool:
    """Whether this pass runs each group of page variants once."""
    return os.environ.get(SWITCH) == ONE


def function_of(item: pytest.Item) -> str:
    """The test function a case belongs to: its node id without the parameters."""
    return item.nodeid.split("[", 1)[0]


def params_of(item: pytest.Item) -> dict[str, object]:
    """The case's parameters by name; none for a test that is not parametrized."""
    callspec = getattr(item, "callspec", None)
    return dict(callspec.params) if callspec is not None else {}


def server_side(item: pytest.Item) -> tuple[str, str]:
    """The case's function and every parameter but the page's: what the server can tell apart."""
    params = params_of(item)
    rest = sorted(
        (name, repr(value)) for name, value in params.items() if name not in PAGE_PARAMETERS
    )
    return function_of(item), repr(rest)


def preference(item: pytest.Item) -> tuple[bool, bool]:
    """Lower is kept first: a desktop page, then a light one."""
    params = params_of(item)
    size = params.get("viewport", params.get("size", DESKTOP))
    desktop = size == DESKTOP or size == "desktop"
    return (not desktop, bool(params.get("dark", False)))


def one_of_each(items: Sequence[pytest.Item]) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """The cases kept and those left out when each group of page variants runs once; the kept
    ones in their collection order."""
    groups: dict[tuple[str, str], list[pytest.Item]] = defaultdict(list)
    for item in items:
        groups[server_side(item)].append(item)
    chosen = {id(min(group, key=preference)) for group in groups.values()}
    kept = [item for item in items if id(item) in chosen]
    left = [item for item in items if id(item) not in chosen]
    return kept, left


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With MOSAIC_PAGE_VARIANTS=one, each group of page variants is run once."""
    if not one_variant_each():
        return
    kept, left = one_of_each(items)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
