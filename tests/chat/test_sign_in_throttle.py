"""Sign-in throttle (item 11): failed passwords per username and per address, 429
`too-many-requests` with `Retry-After`, logged without the password; admin's sign-in too."""

from __future__ import annotations

import logging

import httpx
import pytest
from django.contrib.auth.models import User

from tests.support.listeners import HUMAN, ListenerClient

PASSWORD = "correct horse battery"


@pytest.fixture
def limits(settings) -> None:
    settings.MOSAIC_SIGN_IN_USERNAME_LIMIT = 10
    settings.MOSAIC_SIGN_IN_ADDRESS_LIMIT = 50
    settings.MOSAIC_SIGN_IN_WINDOW_SECONDS = 900


def sign_in(username: str, password: str, *, host: str = "127.0.0.1") -> httpx.Response:
    client = ListenerClient(HUMAN, client_host=host)
    return client.post("/api/auth/login", {"username": username, "password": password})


def assert_throttled(response: httpx.Response, window: int = 900) -> None:
    assert (response.status_code, response.json()["error"]) == (429, "too-many-requests")
    assert 1 <= int(response.headers["Retry-After"]) <= window


def test_sign_in_after_forty_wrong_passwords_is_throttled(ada: User, limits) -> None:
    """40 wrong passwords, then the right one: refused 429 with Retry-After, not signed in."""
    answers = [sign_in("ada", f"guess {n}").status_code for n in range(40)]

    assert answers[:10] == [401] * 10
    assert set(answers[10:]) == {429}
    assert_throttled(sign_in("ada", PASSWORD))


def test_sign_in_throttle_per_username_spans_addresses(ada: User, settings, limits) -> None:
    """Failures for one username count whatever address they come from."""
    settings.MOSAIC_SIGN_IN_USERNAME_LIMIT = 3
    for n in range(3):
        assert sign_in("ada", "wrong password", host=f"10.0.0.{n + 1}").status_code == 401

    assert_throttled(sign_in("ada", PASSWORD, host="10.0.0.9"))


def test_sign_in_throttle_per_address_spans_usernames(ada: User, settings, limits) -> None:
    """Failures from one address count whatever usernames they try; other addresses still
    sign in."""
    settings.MOSAIC_SIGN_IN_ADDRESS_LIMIT = 5
    for n in range(5):
        assert sign_in(f"user{n}", "wrong password", host="10.0.0.1").status_code == 401

    assert_throttled(sign_in("ada", PASSWORD, host="10.0.0.1"))
    assert sign_in("ada", PASSWORD, host="10.0.0.2").status_code == 200


def test_sign_in_success_forgets_the_usernames_failures(ada: User, limits) -> None:
    """A human who mistypes now and then is never locked out by her own successes."""
    for _ in range(2):
        for n in range(9):
            assert sign_in("ada", f"typo {n}", host=f"10.0.1.{n}").status_code == 401
        assert sign_in("ada", PASSWORD, host="10.0.2.1").status_code == 200


def test_sign_in_throttle_is_logged_without_password(
    ada: User, settings, limits, caplog: pytest.LogCaptureFixture
) -> None:
    """`mosaic.security` records each failure and the refusal: code, username, address."""
    settings.MOSAIC_SIGN_IN_USERNAME_LIMIT = 2
    caplog.set_level(logging.INFO, logger="mosaic.security")
    sign_in("ada", "first-wrong-password", host="10.0.0.7")
    sign_in("ada", "second-wrong-password", host="10.0.0.7")
    sign_in("ada", PASSWORD, host="10.0.0.7")

    lines = [r.getMessage() for r in caplog.records if r.name == "mosaic.security"]
    refused = [line for line in lines if "code=too-many-requests" in line]
    assert len(refused) == 1
    assert "username='ada'" in refused[0] and "address=10.0.0.7" in refused[0]
    assert len([line for line in lines if "code=not-authenticated" in line]) == 2
    for secret in ("first-wrong-password", "second-wrong-password", PASSWORD):
        assert not any(secret in line for line in lines)


def admin_sign_in(client: ListenerClient, password: str) -> httpx.Response:
    token = client.cookies["csrftoken"]
    form = f"username=staff&password={password.replace(' ', '+')}&csrfmiddlewaretoken={token}"
    return client.request(
        "POST",
        "/admin/login/?next=/admin/",
        content=form.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def test_admin_sign_in_after_wrong_passwords_is_throttled(business, settings, limits) -> None:
    """Admin's sign-in counts toward, and is held to, the same throttle."""
    settings.MOSAIC_SIGN_IN_USERNAME_LIMIT = 3
    User.objects.create_superuser("staff", password=PASSWORD)
    client = ListenerClient(HUMAN)
    assert client.get("/admin/login/").status_code == 200
    for n in range(3):
        failed = admin_sign_in(client, f"wrong {n}")
        assert failed.status_code == 200  # the form again, with its error
        assert "_auth_user_id" not in client.cookies

    throttled = admin_sign_in(client, PASSWORD)

    assert_throttled(throttled)
    assert client.get("/admin/").status_code == 302  # still signed out


def test_admin_sign_in_with_right_password_signs_in(business, limits) -> None:
    """The throttle in front of admin's sign-in leaves a good sign-in alone."""
    User.objects.create_superuser("staff", password=PASSWORD)
    client = ListenerClient(HUMAN)
    assert client.get("/admin/login/").status_code == 200

    assert admin_sign_in(client, PASSWORD).status_code == 302
    assert client.get("/admin/").status_code == 200
