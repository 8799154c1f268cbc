"""Marks a test carries to run in the pass configured for what it proves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., Any])


def postgres_only(test: F) -> F:
    """For points only PostgreSQL can show (TRUNCATE, its locks); the SQLite pass skips them."""
    from django.db import connection

    skip = pytest.mark.skipif(
        connection.vendor != "postgresql", reason="runs in the PostgreSQL pass"
    )
    return pytest.mark.postgres(skip(test))
