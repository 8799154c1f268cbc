"""A human's socket lives no longer than the sign-in it was opened with.

Channels checks the session once, on connect (its `get_user`); a socket lives on for hours
after. So a socket opened with a session checks again before it sends rows, and at every
resync: the session row must still exist and be unexpired, the user active, and the session's
auth hash the user's current one (`django.contrib.auth.get_user`'s rule: a changed password
signs the user out everywhere). One query per check; sockets of one session share a check in
flight, as sockets of one stream share a read (`chat.shared_reads`).

Sockets no session authenticates — the tester's, or a human the trusted proxy names on each
connection (L9) — have no sign-in to lose and are left alone.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db.models import Subquery
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from chat.gates import ProxyUser
from chat.shared_reads import tick


@dataclass(frozen=True)
class SignIn:
    """The session a socket was opened with, and the user it signed in."""

    session_key: str
    user_pk: Any


def sign_in_of(scope: dict[str, Any]) -> SignIn | None:
    """The session sign-in behind a socket's user, or None when no session authenticated it."""
    user = scope.get("user")
    if user is None or isinstance(user, ProxyUser) or not user.is_authenticated:
        return None
    key = getattr(scope.get("session"), "session_key", None)
    return SignIn(session_key=key, user_pk=user.pk) if key else None


def is_signed_in(sign_in: SignIn) -> bool:
    """Whether the session still signs its user in, as `django.contrib.auth.get_user` decides:
    the session row exists and has not expired, it names the same user and a configured
    backend, the user is active, and the session's auth hash matches the user's (or one made
    with a fallback secret). One query: the user's row with the session's data beside it."""
    live = Session.objects.filter(
        session_key=sign_in.session_key, expire_date__gt=timezone.now()
    ).values("session_data")[:1]
    user = (
        get_user_model()
        ._default_manager.filter(pk=sign_in.user_pk, is_active=True)
        .annotate(live_session=Subquery(live))
        .only("pk", "password")
        .first()
    )
    if user is None or user.live_session is None:
        return False
    data = SessionStore().decode(user.live_session)
    if data.get(SESSION_KEY) != user._meta.pk.value_to_string(user):
        return False
    if data.get(BACKEND_SESSION_KEY) not in settings.AUTHENTICATION_BACKENDS:
        return False
    stored = data.get(HASH_SESSION_KEY)
    if not isinstance(stored, str) or not stored:
        return False
    current = [user.get_session_auth_hash(), *user.get_session_auth_fallback_hash()]
    return any(constant_time_compare(stored, expected) for expected in current)


class SharedSignInChecks:
    """Checks in flight, by sign-in: sockets of one session share one query."""

    def __init__(self) -> None:
        self._in_flight: dict[SignIn, tuple[int, asyncio.Future[bool]]] = {}

    async def is_signed_in(self, sign_in: SignIn, *, not_before: int = 0) -> bool:
        """The outcome of a check that began at `not_before` or later: the one in flight for
        this sign-in when it qualifies, else a new one."""
        current = self._in_flight.get(sign_in)
        if current is None or current[0] < not_before:
            check = asyncio.ensure_future(database_sync_to_async(is_signed_in)(sign_in))
            current = (tick(), check)
            self._in_flight[sign_in] = current
            check.add_done_callback(lambda _: self._forget(sign_in, current))
        # Shielded: one socket closing mid-check must not cancel the check for the others.
        return await asyncio.shield(current[1])

    def _forget(self, sign_in: SignIn, entry: tuple[int, asyncio.Future[bool]]) -> None:
        if self._in_flight.get(sign_in) is entry:
            del self._in_flight[sign_in]
        if not entry[1].cancelled():
            # Every waiter has seen the outcome, or has gone; either way it is not news.
            entry[1].exception()
