"""With MOSAIC_TESTER_RETENTION_DAYS set, the runner purges old tester data daily.

Days pass on an injected clock, never by waiting."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from broker.actors import Actor
from broker.models import Thread
from runner.retention import PURGE_EVERY, DailyTesterPurge
from runner.service import Runner
from tests.broker import factories
from tests.support.waits import wait_for


class Clock:
    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def aged_thread(human: Actor, tester: Actor) -> Callable[..., Thread]:
    """Make a tester thread created `age` ago."""
    product = factories.project(human)

    def make(name: str, *, age: timedelta) -> Thread:
        thread = factories.thread(tester, product, name)
        Thread.objects.filter(pk=thread.pk).update(created_at=timezone.now() - age)
        return thread

    return make


def names() -> set[str]:
    return set(Thread.objects.values_list("name", flat=True))


def test_retention_purges_at_once_then_once_a_day(aged_thread: Callable[..., Thread]) -> None:
    clock = Clock()
    retention = DailyTesterPurge(7, clock=clock)
    aged_thread("first", age=timedelta(days=8))
    aged_thread("recent", age=timedelta(days=6, hours=12))

    assert retention.due() is not None
    assert names() == {"recent"}

    # A day later, less a minute: not due; "recent" is now older than the retention.
    clock.now += PURGE_EVERY - timedelta(minutes=1)
    assert retention.due() is None
    assert names() == {"recent"}

    clock.now += timedelta(minutes=1)
    purged = retention.due()
    assert purged is not None and purged["demo"].threads == 1
    assert names() == set()


def test_retention_refuses_a_negative_number_of_days() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        DailyTesterPurge(-1)


@pytest.mark.django_db(transaction=True)
def test_runner_purges_when_the_retention_is_set(
    settings, aged_thread: Callable[..., Thread], start_runner: Callable[..., Runner]
) -> None:
    aged_thread("first", age=timedelta(days=3))
    settings.MOSAIC_TESTER_RETENTION_DAYS = 1
    start_runner()
    wait_for(lambda: not Thread.objects.exists())


@pytest.mark.django_db(transaction=True)
def test_runner_without_the_retention_purges_nothing(
    aged_thread: Callable[..., Thread], start_runner: Callable[..., Runner]
) -> None:
    runner = start_runner()
    aged_thread("first", age=timedelta(days=300))
    assert runner.tester_retention() is None
    assert names() == {"first"}


def test_runner_refuses_to_start_with_a_negative_retention(settings, db: None) -> None:
    settings.MOSAIC_TESTER_RETENTION_DAYS = -1
    with pytest.raises(ImproperlyConfigured, match="MOSAIC_TESTER_RETENTION_DAYS"):
        Runner().start()
