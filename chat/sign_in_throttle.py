"""Sign-in throttle: failed passwords are counted per username and per address, on Django's cache.

Past MOSAIC_SIGN_IN_USERNAME_LIMIT failures for one username, or MOSAIC_SIGN_IN_ADDRESS_LIMIT
from one client address (behind a trusted proxy, the one it forwards: `address_of`), in one
window of MOSAIC_SIGN_IN_WINDOW_SECONDS, every sign-in of that
username or from that address is refused `too-many-requests` (429, `Retry-After`) until the window
ends — the right password too, and before it is checked, so a throttled attempt learns nothing.
Both the Console's sign-in and admin's pass `check_sign_in_allowed` first; every failed
`authenticate` is counted (the `user_login_failed` signal), and a success forgets its username's
failures. Refusals and failures go to the `mosaic.security` logger with the code, the username
and the address — never the password.

Counters are fixed windows (`cache.add` then `cache.incr`, atomic on Redis), so several listener
processes share them when the cache is Redis (settings: CACHES follows REDIS_URL).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import time
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.dispatch import receiver
from rest_framework.exceptions import Throttled

from broker import refusals
from chat.client_address import client_of_request

security_log = logging.getLogger("mosaic.security")


def address_of(request: Any) -> str:
    """The address a sign-in came from: the connection's peer, or behind a trusted proxy the
    client it forwards (`chat.client_address`), so one client's failures lock out no other."""
    return client_of_request(request)


def _window() -> tuple[int, float]:
    """The current window's index and the seconds left in it."""
    length: int = settings.MOSAIC_SIGN_IN_WINDOW_SECONDS
    now = time.time()
    index = int(now // length)
    return index, (index + 1) * length - now


def _key(kind: str, value: str, index: int) -> str:
    # Hashed: cache keys must be short and plain, and a username is neither necessarily.
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"mosaic.sign-in.{kind}.{digest}.{index}"


def _counters(*, username: str, address: str, index: int) -> list[tuple[str, int]]:
    """Each counter the sign-in is held to, with its limit."""
    counters = [(_key("username", username, index), settings.MOSAIC_SIGN_IN_USERNAME_LIMIT)]
    if address:
        counters.append((_key("address", address, index), settings.MOSAIC_SIGN_IN_ADDRESS_LIMIT))
    return counters


def check_sign_in_allowed(*, username: str, address: str) -> None:
    """Raise DRF's `Throttled` (`too-many-requests`, with the seconds to wait) when the username
    or the address has used up its failures in this window; else return."""
    index, left = _window()
    counters = _counters(username=username, address=address, index=index)
    counts = cache.get_many([key for key, _ in counters])
    if all(counts.get(key, 0) < limit for key, limit in counters):
        return
    wait = max(1, math.ceil(left))
    security_log.warning(
        "sign-in refused code=%s username=%r address=%s retry_after=%d",
        refusals.TOO_MANY_REQUESTS,
        username,
        address,
        wait,
    )
    # DRF adds the wait to the sentence ("Expected available in N seconds.").
    raise Throttled(wait=wait, detail="Too many failed sign-ins.")


def record_sign_in_failure(*, username: str, address: str) -> None:
    """Count one failed sign-in against the username and the address."""
    index, left = _window()
    for key, _ in _counters(username=username, address=address, index=index):
        # The window's key outlives the window a little, never less: incr needs it present.
        cache.add(key, 0, timeout=math.ceil(left) + 1)
        # Expired between add and incr (ValueError): the window just ended, and its count too.
        with contextlib.suppress(ValueError):
            cache.incr(key)
    security_log.info(
        "sign-in failed code=%s username=%r address=%s",
        refusals.NOT_AUTHENTICATED,
        username,
        address,
    )


def forget_sign_in_failures(*, username: str) -> None:
    """A successful sign-in clears its username's failures (never the address's)."""
    index, _ = _window()
    cache.delete(_key("username", username, index))


@receiver(user_login_failed)
def count_failed_sign_in(
    sender: Any, credentials: dict[str, Any], request: Any = None, **kwargs: Any
) -> None:
    username = credentials.get("username")
    record_sign_in_failure(
        username=username if isinstance(username, str) else "",
        address=address_of(request) if request is not None else "",
    )


@receiver(user_logged_in)
def forget_on_sign_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    forget_sign_in_failures(username=user.get_username())
