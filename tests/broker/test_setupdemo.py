"""`manage.py setupdemo`: the embedded run's demo business, its human and a staff user (SPEC §9)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command

from broker.models import Business, Instance

PASSWORD = "correct-horse-battery"


def setupdemo() -> str:
    out = StringIO()
    call_command("setupdemo", stdout=out)
    return out.getvalue()


def signs_in(username: str, password: str) -> bool:
    return authenticate(username=username, password=password) is not None


@pytest.mark.django_db
def test_setupdemo_fresh_database_creates_business_and_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPEC §9: demo business (human `ada`, instance `assistant`, tester on), `ada` and `staff`."""
    monkeypatch.setenv("MOSAIC_DEMO_PASSWORD", PASSWORD)

    output = setupdemo()

    business = Business.objects.get(slug="demo")
    assert (business.human, business.tester_enabled) == ("ada", True)
    assert list(Instance.objects.filter(business=business).values_list("name", flat=True)) == [
        "assistant"
    ]
    users = get_user_model().objects
    ada, staff = users.get(username="ada"), users.get(username="staff")
    assert (ada.is_staff, ada.is_superuser) == (False, False)
    assert (staff.is_staff, staff.is_superuser) == (True, True)
    assert signs_in("ada", PASSWORD)
    assert signs_in("staff", PASSWORD)
    assert "user 'ada'" in output
    assert "user 'staff'" in output
    assert PASSWORD not in output


@pytest.mark.django_db
def test_setupdemo_without_password_variable_prints_generated_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPEC §9: with no MOSAIC_DEMO_PASSWORD a password is generated and printed once."""
    monkeypatch.delenv("MOSAIC_DEMO_PASSWORD", raising=False)

    output = setupdemo()

    match = re.search(r"^password of the new user\(s\): (\S+)$", output, re.MULTILINE)
    assert match is not None
    assert signs_in("ada", match.group(1))
    assert signs_in("staff", match.group(1))


@pytest.mark.django_db
def test_setupdemo_run_twice_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running it again is harmless: same business, same users, passwords unchanged."""
    monkeypatch.setenv("MOSAIC_DEMO_PASSWORD", PASSWORD)
    setupdemo()
    monkeypatch.delenv("MOSAIC_DEMO_PASSWORD")
    business = Business.objects.get(slug="demo")
    users = list(get_user_model().objects.order_by("pk").values_list())

    output = setupdemo()

    assert list(Business.objects.values_list("pk", flat=True)) == [business.pk]
    assert list(get_user_model().objects.order_by("pk").values_list()) == users
    assert "already stored" in output
    assert "password unchanged" in output
    assert "password of the new user" not in output
    assert signs_in("ada", PASSWORD)


@pytest.mark.django_db
def test_setupdemo_existing_business_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """An existing demo business is not reloaded over the operator's changes."""
    monkeypatch.setenv("MOSAIC_DEMO_PASSWORD", PASSWORD)
    setupdemo()
    Business.objects.filter(slug="demo").update(tester_enabled=False)

    setupdemo()

    assert Business.objects.get(slug="demo").tester_enabled is False


@pytest.mark.django_db
def test_setupdemo_password_variable_resets_existing_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With MOSAIC_DEMO_PASSWORD set, existing demo users get that password."""
    monkeypatch.delenv("MOSAIC_DEMO_PASSWORD", raising=False)
    setupdemo()
    monkeypatch.setenv("MOSAIC_DEMO_PASSWORD", PASSWORD)

    output = setupdemo()

    assert signs_in("ada", PASSWORD)
    assert signs_in("staff", PASSWORD)
    assert "password set" in output


@pytest.mark.django_db
def test_setupdemo_weak_password_variable_refuses_and_creates_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The password validators apply to the chosen password too."""
    monkeypatch.setenv("MOSAIC_DEMO_PASSWORD", "short")

    with pytest.raises(CommandError, match="MOSAIC_DEMO_PASSWORD"):
        setupdemo()

    assert not Business.objects.exists()
    assert not get_user_model().objects.exists()


@pytest.mark.django_db
def test_setupdemo_same_password_variable_again_keeps_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Restarting with the same MOSAIC_DEMO_PASSWORD signs nobody out (session auth hash kept)."""
    monkeypatch.setenv("MOSAIC_DEMO_PASSWORD", PASSWORD)
    setupdemo()
    users = get_user_model().objects
    hashes = {name: users.get(username=name).get_session_auth_hash() for name in ("ada", "staff")}
    stored = list(users.order_by("pk").values_list("username", "password"))

    output = setupdemo()

    assert list(users.order_by("pk").values_list("username", "password")) == stored
    assert {
        name: users.get(username=name).get_session_auth_hash() for name in ("ada", "staff")
    } == hashes
    assert "password set" not in output
    assert signs_in("ada", PASSWORD)
