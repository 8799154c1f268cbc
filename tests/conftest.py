"""Persona fixtures shared by the whole suite: a business, its human, the tester, a run."""

from __future__ import annotations

import os

import pytest

from broker.actors import Actor
from broker.models import Business, Instance, RoleDefinition


def make_business(
    slug: str,
    *,
    human: str,
    tester_enabled: bool = True,
    receive_from: tuple[str, ...] = ("human",),
    send_to: tuple[str, ...] = ("human",),
    cross_role: tuple[str, ...] = (),
) -> Business:
    """A business with one `assistant` instance whose role has the shipped lists."""
    business = Business.objects.create(slug=slug, human=human, tester_enabled=tester_enabled)
    role = RoleDefinition.objects.create(
        business=business,
        name="assistant",
        receive_from=list(receive_from),
        send_to=list(send_to),
        cross_role=list(cross_role),
    )
    Instance.objects.create(business=business, name="assistant", role=role)
    return business


@pytest.fixture
def business(db: None) -> Business:
    return make_business("demo", human="ada")


@pytest.fixture
def human(business: Business) -> Actor:
    return Actor.human(business_id=business.pk, username="ada")


@pytest.fixture
def tester(business: Business) -> Actor:
    return Actor.tester(business_id=business.pk)


@pytest.fixture
def other_business(db: None) -> Business:
    return make_business("other", human="grace")


@pytest.fixture
def other_human(other_business: Business) -> Actor:
    return Actor.human(business_id=other_business.pk, username="grace")


@pytest.fixture
def assistant_run(business: Business) -> Actor:
    return Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-1")


# --- where the suite runs ----------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `postgres` prove what only PostgreSQL can show; they run in its pass."""
    from django.conf import settings

    if "postgresql" in settings.DATABASES["default"]["ENGINE"]:
        return
    skip = pytest.mark.skip(reason="runs in the PostgreSQL pass (DATABASE_URL=postgres://…)")
    for item in items:
        if item.get_closest_marker("postgres"):
            item.add_marker(skip)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With MOSAIC_NO_SKIPS=1 (the full-services pass of CI) a skipped test fails the run."""
    if os.environ.get("MOSAIC_NO_SKIPS") != "1":
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if skipped:
        print(f"\nMOSAIC_NO_SKIPS=1: {skipped} test(s) skipped; every part must be present.")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
