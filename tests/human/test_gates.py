"""The human listener's gates as units (L2, L9), on requests that no ASGI server handed over,
and the default of a view bound to no listener."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from chat.api.chat import ProjectsView
from chat.gates import JsonBody
from human.gates import HumanSessionAuthentication, ProxyUserAuthentication


def drf_request(**headers: str) -> Request:
    """A request without an ASGI scope and without a session user (no middleware ran)."""
    return Request(APIRequestFactory().get("/api/chat/projects", **headers))


def test_view_bound_to_no_listener_refuses_not_found(business) -> None:
    """A chat view served without a listener's gates refuses everything (deny by default)."""
    response = ProjectsView.as_view()(APIRequestFactory().get("/api/chat/projects"))
    assert response.status_code == 404
    assert response.data["error"] == "not-found"


@override_settings(
    MOSAIC_PROXY_USER_HEADER="X-Forwarded-User",
    MOSAIC_TRUSTED_PROXIES=["127.0.0.1"],
    MOSAIC_PROXY_SECRET="proxy-secret",
)
def test_proxy_header_without_asgi_scope_authenticates_nobody(ada: User) -> None:
    """L9: the proxy header is read from the server's scope only; without one, nobody."""
    request = drf_request(HTTP_X_FORWARDED_USER="ada", REMOTE_ADDR="127.0.0.1")
    assert ProxyUserAuthentication().authenticate(request) is None


def test_session_authentication_without_session_user_authenticates_nobody(business) -> None:
    """L2: no session user (no middleware ran): not signed in, and no error."""
    request = drf_request()
    assert not hasattr(request._request, "user")
    assert HumanSessionAuthentication().authenticate(request) is None


@pytest.mark.parametrize("user", [None, "inactive"], ids=["none", "inactive"])
def test_session_authentication_of_inactive_or_missing_user_authenticates_nobody(
    ada: User, user: str | None
) -> None:
    """L2: a deactivated human is not signed in, even with a live session."""
    request = drf_request()
    if user == "inactive":
        ada.is_active = False
        request._request.user = ada
    else:
        request._request.user = None
    assert HumanSessionAuthentication().authenticate(request) is None


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json; charset=utf-8",
        "application/json; charset=utf-8; profile=mosaic",
        "Application/JSON ; charset=utf-8",
    ],
    ids=["charset", "two-parameters", "case-and-space"],
)
def test_json_body_with_media_type_parameters_is_accepted(content_type: str) -> None:
    """L2, L3: the media type is what stands before the first `;`, whatever parameters follow."""
    request = Request(
        APIRequestFactory().post("/api/chat/projects", b"{}", content_type=content_type)
    )
    assert JsonBody().has_permission(request, view=None)


def test_json_body_of_another_media_type_with_a_json_parameter_is_refused() -> None:
    """L2, L3: a parameter that looks like JSON does not make the body JSON."""
    request = Request(
        APIRequestFactory().post(
            "/api/chat/projects", b"{}", content_type="text/plain; x=application/json"
        )
    )
    assert not JsonBody().has_permission(request, view=None)


@override_settings(
    MOSAIC_PROXY_USER_HEADER="X-Forwarded-User",
    MOSAIC_TRUSTED_PROXIES=["127.0.0.1"],
    MOSAIC_PROXY_SECRET="proxy-secret",
)
def test_proxy_header_from_trusted_proxy_authenticates_the_named_human(ada: User) -> None:
    """L9: the user DRF sees is the one the proxy named, and the actor is that business's human."""
    request = drf_request()
    request._request.scope = {  # type: ignore[attr-defined]
        "type": "http",
        "client": ("127.0.0.1", 50000),
        "headers": [(b"x-forwarded-user", b"ada"), (b"x-mosaic-proxy-secret", b"proxy-secret")],
    }
    user, actor = ProxyUserAuthentication().authenticate(request)
    assert (user.get_username(), user.is_authenticated) == ("ada", True)
    assert (actor.is_human, actor.username) == (True, "ada")
