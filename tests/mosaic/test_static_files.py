"""Static files on both listeners: a path that leaves the static directories is `not-found`."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.support.listeners import HUMAN, TESTER, raw_request

ESCAPES = [
    "/static/../x",
    "/static/../../../../etc/passwd",
    "/static/./../mosaic/settings.py",
    "/static/console/../../manage.py",
]


@pytest.mark.parametrize("listener", [HUMAN, TESTER])
@pytest.mark.parametrize("path", ESCAPES)
def test_get_static_path_outside_or_missing_is_not_found_json(
    db: None, listener: str, path: str
) -> None:
    """`GET /static/../x`, path as sent, once answered a 500 page (SuspiciousFileOperation)."""
    port = settings.MOSAIC_HUMAN_PORT if listener == HUMAN else settings.MOSAIC_TESTER_PORT
    answer = raw_request(listener, "GET", path, [(b"host", f"127.0.0.1:{port}".encode())])
    assert (answer.status, answer.json()["error"]) == (404, "not-found")


@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_get_static_file_is_served(db: None, listener: str) -> None:
    """The guard above leaves the Console's own files alone."""
    port = settings.MOSAIC_HUMAN_PORT if listener == HUMAN else settings.MOSAIC_TESTER_PORT
    answer = raw_request(
        listener, "GET", "/static/console/console.js", [(b"host", f"127.0.0.1:{port}".encode())]
    )
    assert answer.status == 200
