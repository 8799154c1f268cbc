"""The package's own set-up: it runs on a database of its own, never on Django's test database."""

from __future__ import annotations

import pytest


def test_cluster_package_requests_no_test_database(request: pytest.FixtureRequest) -> None:
    """`make faults` on a fresh machine: no fixture of this package reaches the configured
    database (its default, `mosaic_cluster`, need not exist)."""
    assert "django_db_setup" not in request.fixturenames
