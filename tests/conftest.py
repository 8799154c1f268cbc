"""Persona fixtures shared by the whole suite: a business, its human, the tester, a run."""

from __future__ import annotations

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
