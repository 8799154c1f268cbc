"""The human listener's pages and schema: a method they do not serve is a JSON refusal."""

from __future__ import annotations

import re

from tests.support.listener_routes import routes
from tests.support.listeners import HUMAN, ListenerClient

NOT_SERVED = ("POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def test_page_or_schema_with_method_not_served_is_method_not_allowed_json(
    human_client: ListenerClient,
) -> None:
    """`POST /api/schema` once answered YAML, `POST /api/docs` HTML, `POST /` the page itself."""
    described = [route for route in routes(HUMAN) if route.name in ("schema", "api-docs")]
    pages = [route for route in routes(HUMAN) if route.is_page]
    answers = {
        (method, route.name): human_client.request(method, route.path(), json={})
        for route in [*described, *pages]
        for method in NOT_SERVED
    }
    assert {asked: (r.status_code, r.json()["error"]) for asked, r in answers.items()} == (
        dict.fromkeys(answers, (405, "method-not-allowed"))
    )
    assert answers["POST", "console"].headers["Allow"] == "GET, HEAD"


def test_page_and_schema_get_still_answer(human_client: ListenerClient) -> None:
    """The refusals above leave reading alone."""
    assert human_client.get("/").headers["content-type"].startswith("text/html")
    assert human_client.get("/signin").status_code == 200
    assert human_client.get("/api/schema").status_code == 200


def test_console_page_fields_take_their_limits_from_settings(
    human_client: ListenerClient, settings
) -> None:
    """STYLE 15: a field's `maxlength` is the broker's limit, never a number in a template."""
    settings.MOSAIC_NAME_MAX = 37
    settings.MOSAIC_BODY_MAX = 4321
    page = human_client.get("/").content.decode()
    limits = re.findall(r'id="([\w-]+)"[^>]*maxlength="(\d+)"', page)
    assert dict(limits) == {
        "project-name": "37",
        "thread-search": "37",
        "thread-name": "37",
        "rename-name": "37",
        "composer-body": "4321",
    }
