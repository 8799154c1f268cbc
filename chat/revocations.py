"""An ended sign-in ends its sockets at once, in every process.

Sign-out, a deleted session (the admin, `clearsessions`, a flushed session), a changed password
and a deactivated or deleted user each announce, once committed, which sessions or which user
no longer sign anyone in. The announcement goes to one group, `REVOKED_GROUP`, which every
listener process follows once (`chat.fan_out`) on the same channel as its streams' nudges, and
it is sent through the same outbox as those nudges (`broker.events`). So a nudge committed after
the revocation reaches each process after it: the socket holds its sends back before it hears
of any row, draft or state written after the sign-in ended, until a check says whether the
sign-in still holds (`chat.consumers.StreamConsumer.recheck`).

Writes that send no signal — a queryset `update(is_active=False)`, SQL by hand — are not
announced; the sockets' own check finds them at their next read or resync
(`chat.session_checks`).

Session keys never travel: the announcement names each session by a digest of its key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.contrib.sessions.models import Session
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from broker import events
from chat.session_checks import SignIn

REVOKED_GROUP = "sign-ins.revoked"
REVOKED = "sign_ins.revoked"


def session_digest(session_key: str) -> str:
    """How an announcement names a session: never by its key, which signs its holder in."""
    return hashlib.sha256(session_key.encode()).hexdigest()


@dataclass(frozen=True)
class Revocation:
    """The sessions, or every session of one user, that no longer sign anyone in."""

    session_digests: frozenset[str]
    user_pk: str | None

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> Revocation:
        user = message.get("user")
        return cls(
            session_digests=frozenset(str(d) for d in message.get("sessions") or ()),
            user_pk=None if user is None else str(user),
        )

    def ends(self, sign_in: SignIn) -> bool:
        return (
            str(sign_in.user_pk) == self.user_pk
            or session_digest(sign_in.session_key) in self.session_digests
        )


def revoke_after_commit(*, session_keys: Iterable[str] = (), user_pk: Any = None) -> None:
    """Announce, once the current transaction commits, that these sessions (or every session
    of this user) sign nobody in any more."""
    message: dict[str, object] = {
        "type": REVOKED,
        "sessions": [session_digest(key) for key in session_keys if key],
        "user": None if user_pk is None else str(user_pk),
    }
    if message["sessions"] or message["user"] is not None:
        events.send_after_commit(REVOKED_GROUP, message)


@receiver(user_logged_out)
def revoke_signed_out_session(sender: Any, request: Any, **kwargs: Any) -> None:
    key = getattr(getattr(request, "session", None), "session_key", None)
    revoke_after_commit(session_keys=[key] if key else [])


@receiver(post_delete, sender=Session)
def revoke_deleted_session(sender: Any, instance: Session, **kwargs: Any) -> None:
    # A queryset delete (`clearsessions`, the admin's bulk action) sends this for each row too:
    # with a receiver connected, Django deletes row by row instead of in one fast statement.
    revoke_after_commit(session_keys=[instance.session_key])


# What sign-in depends on of a user (`django.contrib.auth.get_user`): the password's hash, which
# the session's auth hash is made from, and being active.
SIGN_IN_FIELDS = ("password", "is_active")


@receiver(pre_save, sender=settings.AUTH_USER_MODEL)
def remember_sign_in_fields(sender: Any, instance: Any, raw: bool, **kwargs: Any) -> None:
    update_fields = kwargs.get("update_fields")
    instance._sign_in_fields_before = None
    if raw or instance.pk is None:
        return
    if update_fields is not None and not set(SIGN_IN_FIELDS) & set(update_fields):
        return  # a last_login stamp at each sign-in, a renamed user: not worth a read
    instance._sign_in_fields_before = (
        get_user_model()
        ._default_manager.filter(pk=instance.pk)
        .values_list(*SIGN_IN_FIELDS)
        .first()
    )


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def revoke_user_whose_sign_in_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    before = getattr(instance, "_sign_in_fields_before", None)
    instance._sign_in_fields_before = None
    if before is None:
        return
    password, was_active = before
    if instance.password != password or (was_active and not instance.is_active):
        revoke_after_commit(user_pk=instance.pk)


@receiver(post_delete, sender=settings.AUTH_USER_MODEL)
def revoke_deleted_user(sender: Any, instance: Any, **kwargs: Any) -> None:
    revoke_after_commit(user_pk=instance.pk)
