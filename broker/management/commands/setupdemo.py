"""`manage.py setupdemo`: the embedded run's demo business, its human and a staff user."""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from broker.business_file import DEMO_FILE, load_business, parse_business_file
from broker.models import Business
from broker.refusals import Refusal

DEMO_SLUG = "demo"
STAFF_USERNAME = "staff"
PASSWORD_VARIABLE = "MOSAIC_DEMO_PASSWORD"


class Command(BaseCommand):
    help = (
        "Load the demo business if absent, and create its human and a staff superuser. "
        f"Passwords come from {PASSWORD_VARIABLE}, or one is generated and printed."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        # An empty variable counts as unset: it would otherwise become an empty password.
        chosen = os.environ.get(PASSWORD_VARIABLE, "")
        if chosen:
            try:
                validate_password(chosen)
            except ValidationError as exc:
                raise CommandError(f"{PASSWORD_VARIABLE}: {' '.join(exc.messages)}") from exc
        generated = secrets.token_urlsafe(12)
        password = chosen or generated

        with transaction.atomic():
            business = Business.objects.filter(slug=DEMO_SLUG).first()
            if business is None:
                try:
                    business = load_business(parse_business_file(DEMO_FILE))
                except Refusal as refusal:
                    raise CommandError(f"{refusal.code}: {refusal.detail}") from refusal
                self.stdout.write(f"business '{DEMO_SLUG}': loaded from {DEMO_FILE.name}")
            else:
                self.stdout.write(f"business '{DEMO_SLUG}': already stored, left as it is")
            created = [
                self._ensure_user(business.human, password=password, chosen=bool(chosen)),
                self._ensure_user(
                    STAFF_USERNAME, password=password, chosen=bool(chosen), staff=True
                ),
            ]

        if chosen:
            self.stdout.write(f"password: the value of {PASSWORD_VARIABLE}")
        elif any(created):
            # Printed once, because nothing else ever shows it; the operator signs in with it.
            self.stdout.write(f"password of the new user(s): {generated}")

    def _ensure_user(
        self, username: str, *, password: str, chosen: bool, staff: bool = False
    ) -> bool:
        """Create `username` if absent; set an existing user's password only when chosen and new."""
        user_model = get_user_model()
        kind = "staff superuser" if staff else "business human"
        user = user_model.objects.filter(username=username).first()
        if user is None:
            if staff:
                user_model.objects.create_superuser(username=username, password=password)
            else:
                user_model.objects.create_user(username=username, password=password)
            self.stdout.write(f"user '{username}' ({kind}): created")
            return True
        if chosen and not user.check_password(password):
            user.set_password(password)
            user.save(update_fields=["password"])
            self.stdout.write(f"user '{username}' ({kind}): exists, password set")
        elif chosen:
            # Saving the same password again would rotate the session auth hash and sign the
            # user out everywhere at each restart of the embedded run.
            self.stdout.write(f"user '{username}' ({kind}): exists, password already that")
        else:
            self.stdout.write(f"user '{username}' ({kind}): exists, password unchanged")
        return False
