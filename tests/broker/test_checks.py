"""System checks and fail-closed boot for stored businesses (R4: mosaic.E001, R5: mosaic.E002)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import IntegrityError, connection, transaction

from broker.boot import refuse_invalid_businesses
from broker.models import Business, RoleDefinition
from tests.support.businesses import make_business


@contextmanager
def business_constraint_bypassed() -> Iterator[None]:
    """Let a business with human `tester` be stored, as a damaged or hand-edited database might.

    The CheckConstraint `business_human_not_tester` refuses it, so the test lifts it honestly for
    its own transaction only.
    """
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA ignore_check_constraints = ON")
            try:
                yield
            finally:
                cursor.execute("PRAGMA ignore_check_constraints = OFF")
        elif connection.vendor == "postgresql":
            # Rolled back with the test's transaction.
            cursor.execute("ALTER TABLE broker_business DROP CONSTRAINT business_human_not_tester")
            yield
        else:
            pytest.skip(f"no constraint bypass for {connection.vendor}")


def store_business_with_tester_human() -> Business:
    with business_constraint_bypassed():
        return make_business("broken", human="tester")


def store_role_listing_tester(list_name: str) -> RoleDefinition:
    business = make_business("acme", human="grace")
    role = RoleDefinition.objects.get(business=business)
    setattr(role, list_name, [*getattr(role, list_name), "tester"])
    role.save()
    return role


def error_ids() -> list[str]:
    """The ids `manage.py check` fails with, in order."""
    return [message.id or "" for message in run_checks() if message.is_serious()]


@pytest.mark.django_db
def test_store_business_human_tester_without_bypass_is_refused_by_database() -> None:
    """R4: the database refuses it on its own; the tests above lift that on purpose."""
    with pytest.raises(IntegrityError), transaction.atomic():
        Business.objects.create(slug="broken", human="tester")


@pytest.mark.django_db
def test_check_clean_database_reports_no_errors(business: Business) -> None:
    """R4, R5: a database of valid businesses passes `manage.py check`."""
    assert error_ids() == []
    call_command("check")


@pytest.mark.django_db
def test_check_business_human_tester_fails_e001() -> None:
    """T6 (R4): `manage.py check` fails on a stored business whose human is `tester`."""
    store_business_with_tester_human()

    assert error_ids() == ["mosaic.E001"]
    [error] = [message for message in run_checks() if message.id == "mosaic.E001"]
    assert error.msg.startswith("business 'broken': human 'tester' ")
    assert "'broken'" in (error.hint or "")
    with pytest.raises(SystemCheckError, match=re.escape("mosaic.E001")):
        call_command("check")


@pytest.mark.django_db
@pytest.mark.parametrize("list_name", ["receive_from", "send_to", "cross_role"])
def test_check_role_listing_tester_fails_e002(list_name: str) -> None:
    """R5: `manage.py check` fails on a stored role list naming `tester`."""
    store_role_listing_tester(list_name)

    assert error_ids() == ["mosaic.E002"]
    [error] = [message for message in run_checks() if message.id == "mosaic.E002"]
    assert error.msg == "business 'acme', role 'assistant' lists tester, which is never a role"
    with pytest.raises(SystemCheckError, match=re.escape("mosaic.E002")):
        call_command("check")


@pytest.mark.django_db
def test_check_role_list_stored_as_bare_string_fails_e002() -> None:
    """R5: a list stored as the bare string `tester` cannot hide the name from the check."""
    role = RoleDefinition.objects.get(business=make_business("acme", human="grace"))
    role.cross_role = "tester"
    role.save()

    assert error_ids() == ["mosaic.E002"]


@pytest.mark.django_db
def test_check_broker_app_label_runs_mosaic_checks() -> None:
    """`manage.py check broker` still runs the broker's checks."""
    store_role_listing_tester("send_to")

    with pytest.raises(SystemCheckError, match=re.escape("mosaic.E002")):
        call_command("check", "broker")


@pytest.mark.django_db
def test_check_other_app_label_skips_mosaic_checks() -> None:
    """Checks scoped to another app leave the broker's out, as Django's own do."""
    store_role_listing_tester("send_to")

    call_command("check", "auth")


@pytest.mark.django_db
def test_check_tables_absent_reports_no_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the first `migrate` nothing is stored, so nothing may block `migrate` itself."""
    monkeypatch.setattr(connection.introspection, "table_names", lambda *a, **k: [])

    assert error_ids() == []


@pytest.mark.django_db
def test_refuse_invalid_businesses_clean_database_passes(business: Business) -> None:
    """R4, R5: boot proceeds when every stored business is valid."""
    refuse_invalid_businesses()


@pytest.mark.django_db
def test_refuse_invalid_businesses_human_tester_raises() -> None:
    """T6 (R4): no listener starts while a business with human `tester` is stored."""
    store_business_with_tester_human()

    with pytest.raises(ImproperlyConfigured, match=re.escape("mosaic.E001: business 'broken'")):
        refuse_invalid_businesses()


@pytest.mark.django_db
def test_refuse_invalid_businesses_role_listing_tester_raises() -> None:
    """R5: no listener starts while a role listing `tester` is stored."""
    store_role_listing_tester("receive_from")

    with pytest.raises(ImproperlyConfigured, match=re.escape("mosaic.E002: business 'acme', role")):
        refuse_invalid_businesses()


@pytest.mark.django_db
def test_refuse_invalid_businesses_both_problems_lists_both() -> None:
    """R4, R5: the boot refusal lists every problem, not only the first."""
    store_business_with_tester_human()
    store_role_listing_tester("send_to")

    with pytest.raises(ImproperlyConfigured) as caught:
        refuse_invalid_businesses()

    assert "mosaic.E001" in str(caught.value)
    assert "mosaic.E002" in str(caught.value)
