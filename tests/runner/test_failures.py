"""What a model server's failure says of when to try again (`runner.backends.failures`)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from runner.backends.failures import retry_after_seconds


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": " 2.5 "}, 2.5),
        ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),
        ({"retry-after-ms": "soon", "Retry-After": "9"}, 9.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:30 GMT"}, 30.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        ({"Retry-After": "-4"}, None),
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "later"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds_reads_seconds_milliseconds_and_dates(
    headers: dict[str, str], seconds: float | None
) -> None:
    now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC).timestamp()
    assert retry_after_seconds(headers, now=now) == seconds
