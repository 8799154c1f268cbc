"""The client's address: the connection's peer, or the one a trusted proxy forwards.

Behind the production HTTPS proxy every connection comes from the proxy, so the peer alone would
make every client one client (one client's failed sign-ins would lock out all of them). When the
peer is in MOSAIC_TRUSTED_PROXIES, the client is the rightmost `X-Forwarded-For` address that is
not itself a trusted proxy: each trusted proxy appends the address it was connected from, and
everything left of the first untrusted hop is the client's to write, so it is never believed.
From any other peer `X-Forwarded-For` is ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

from django.conf import settings

FORWARDED_FOR = b"x-forwarded-for"


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def forwarded_client(*, peer: str, forwarded_for: Iterable[str]) -> str:
    """The client behind `peer`: the rightmost forwarded address outside the trusted set when
    `peer` is trusted; else `peer`. A hop that is not an address ends the walk at the last
    trusted hop, whose own report it is not."""
    trusted = set(settings.MOSAIC_TRUSTED_PROXIES)
    if peer not in trusted:
        return peer
    hops = [hop.strip() for value in forwarded_for for hop in value.split(",")]
    client = peer
    for hop in reversed(hops):
        if not _is_address(hop):
            return client
        client = hop
        if hop not in trusted:
            return hop
    return client


def client_of_scope(scope: MutableMapping[str, Any] | Mapping[str, Any]) -> str:
    """The client of an ASGI connection (HTTP or WebSocket)."""
    peer = (scope.get("client") or ("", 0))[0] or ""
    forwarded = [
        value.decode("latin-1")
        for name, value in scope.get("headers", [])
        if name.lower() == FORWARDED_FOR
    ]
    return forwarded_client(peer=str(peer), forwarded_for=forwarded)


def client_of_request(request: Any) -> str:
    """The client of a Django request (its META; repeated headers are already joined)."""
    meta = getattr(request, "META", {})
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    return forwarded_client(
        peer=str(meta.get("REMOTE_ADDR") or ""),
        forwarded_for=[forwarded] if forwarded else [],
    )
