"""The suite on several workers (pytest-xdist; `make suite` runs two): what keeps them apart.

Loaded with `-p tests.support.workers` (pyproject's addopts), so it is imported before
pytest-django reads the settings, in the controller and in every worker.

- **A Redis database each.** pytest-django gives each worker a test database of its own
  (`test_<name>_gw0`, …), numbered from 1 in both, so two workers' `thread-1` groups would meet in
  one Redis database and each would hear the other's rows. A worker moves REDIS_URL to the
  database after the configured one by its index (gw0 keeps it, gw1 takes the next), before Django
  reads it; the servers a test starts inherit it.
- **Work by file, the cluster whole.** A file's tests run on one worker, so its module fixtures
  (servers, browsers) start once. `tests/cluster/` shares one session fixture, a cluster of five
  processes, across its files: it is one unit, so only one worker starts it.
- **The longest first.** Units go out in the order of `LONGEST_FIRST` (the cluster, the browser
  tests, the conversation-test client), then in file order, so no worker is left at the end with
  a long unit while the other waits.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

ONE_UNIT = ("tests/cluster/",)
LONGEST_FIRST = ("tests/cluster/", "tests/console/", "tests/tester/")


def worker_index() -> int | None:
    """0 for gw0, 1 for gw1, …; None outside a worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else None


def redis_url_for_worker(url: str, index: int) -> str:
    """`url` with its database number moved up by `index` (no number is database 0)."""
    parts = urlsplit(url)
    database = int(parts.path.strip("/") or 0) + index
    return urlunsplit(parts._replace(path=f"/{database}"))


_index = worker_index()
if _index and os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = redis_url_for_worker(os.environ["REDIS_URL"], _index)


def rank(nodeid: str) -> int:
    """The test's place in `LONGEST_FIRST`; after all of them when it is in none."""
    return next(
        (place for place, prefix in enumerate(LONGEST_FIRST) if nodeid.startswith(prefix)),
        len(LONGEST_FIRST),
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """On a worker, the collection in the order its units are to go out (a stable sort: each
    file keeps its order). Every worker sorts alike, as xdist requires."""
    if worker_index() is not None:
        items.sort(key=lambda item: rank(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadFileScheduling

    # Units go out in collection order (above), not xdist's largest-count-first.
    config.option.loadscopereorder = False

    class ByFileClusterWhole(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            unit = next((prefix for prefix in ONE_UNIT if nodeid.startswith(prefix)), None)
            return unit or super()._split_scope(nodeid)

    return ByFileClusterWhole(config, log)
