"""The suite's workers keep apart (tests/support/workers.py)."""

from __future__ import annotations

import os

from django.conf import settings

from tests.support.workers import redis_url_for_worker


def test_each_worker_takes_the_redis_database_after_the_configured_one_by_its_index() -> None:
    assert redis_url_for_worker("redis://127.0.0.1:6379/0", 0) == "redis://127.0.0.1:6379/0"
    assert redis_url_for_worker("redis://127.0.0.1:6379/3", 1) == "redis://127.0.0.1:6379/4"
    assert redis_url_for_worker("redis://:secret@cache:6380", 2) == "redis://:secret@cache:6380/2"


def test_the_settings_read_the_workers_redis_database_not_the_configured_one() -> None:
    """The database is moved before Django reads the settings, so the test and the servers it
    starts (which inherit the environment) use the same one."""
    assert os.environ.get("REDIS_URL", "") == settings.REDIS_URL
