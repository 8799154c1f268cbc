"""`GET /api/chat/instances` on both listeners: the business's instances by name, each with its
role, whether it is the business's default (what a turn can be asked again on, R24), and its
model's prices when the business file gives them (what conversation tests price replies at)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from broker.models import Business, Instance, RoleDefinition
from tests.support.listeners import ListenerClient


@pytest.fixture
def reviewer(business: Business) -> Instance:
    role = RoleDefinition.objects.create(business=business, name="reviewing")
    return Instance.objects.create(business=business, name="reviewer", role=role)


@pytest.mark.parametrize("listener", ["human_client", "tester_client"])
def test_instances_lists_each_by_name_with_its_role_and_the_default(
    request: pytest.FixtureRequest, listener: str, reviewer: Instance
) -> None:
    client: ListenerClient = request.getfixturevalue(listener)
    answer = client.get("/api/chat/instances")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "instances": [
            {"name": "assistant", "role": "assistant", "default": True, "pricing": None},
            {"name": "reviewer", "role": "reviewing", "default": False, "pricing": None},
        ]
    }


def test_instances_name_the_default_the_business_file_sets(
    human_client: ListenerClient, business: Business, reviewer: Instance
) -> None:
    Business.objects.filter(pk=business.pk).update(default_instance="reviewer")
    answer = human_client.get("/api/chat/instances")
    defaults = [row["name"] for row in answer.json()["instances"] if row["default"]]
    assert defaults == ["reviewer"]


def test_instances_are_read_in_a_fixed_number_of_queries(
    human_client: ListenerClient, business: Business, reviewer: Instance
) -> None:
    with CaptureQueriesContext(connection) as one:
        human_client.get("/api/chat/instances")
    role = RoleDefinition.objects.create(business=business, name="third")
    Instance.objects.create(business=business, name="third", role=role)
    with CaptureQueriesContext(connection) as more:
        assert len(human_client.get("/api/chat/instances").json()["instances"]) == 3
    assert len(more) == len(one)


@pytest.mark.parametrize("listener", ["human_client", "tester_client"])
def test_instances_give_their_models_prices_and_nothing_else_of_their_reply_settings(
    request: pytest.FixtureRequest, listener: str, reviewer: Instance
) -> None:
    reviewer.reply = {
        "backend": "openai",
        "model": "gpt-x",
        "api_key_env": "REVIEWER_KEY",
        "system_prompt": "You review.",
        "pricing": {"input": 2.5, "output": 10.0},
    }
    reviewer.save(update_fields=["reply"])
    client: ListenerClient = request.getfixturevalue(listener)
    answer = client.get("/api/chat/instances")
    [assistant, priced] = answer.json()["instances"]
    assert (assistant["pricing"], priced) == (
        None,
        {
            "name": "reviewer",
            "role": "reviewing",
            "default": False,
            "pricing": {"input": 2.5, "output": 10.0},
        },
    )
    assert "REVIEWER_KEY" not in answer.text and "You review." not in answer.text
