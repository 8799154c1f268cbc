"""Support for `make mutation` (mutmut), loaded with `-p tests.support.mutation_support`; not a
test module.

The listeners are built once per process (`tests.support.listeners.application` is cached).
Under mutation testing each test builds them afresh, so the ASGI guards they are made of carry
the mutant under test, and the tool sees every test that goes through them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import listeners


@pytest.fixture(autouse=True)
def listeners_built_per_test() -> Iterator[None]:
    listeners.application.cache_clear()
    yield
    listeners.application.cache_clear()
