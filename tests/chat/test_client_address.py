"""The client's address behind a trusted proxy (`chat.client_address`)."""

from __future__ import annotations

import pytest

from chat.client_address import client_of_scope, forwarded_client


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "client"),
    [
        # No proxy configured for this peer: its header is the client's to write, ignored.
        ("10.0.0.7", ["203.0.113.5"], "10.0.0.7"),
        # The trusted proxy's own report is the rightmost hop.
        ("127.0.0.1", ["203.0.113.5"], "203.0.113.5"),
        # Whatever the client wrote left of it is never believed.
        ("127.0.0.1", ["198.51.100.1, 203.0.113.5"], "203.0.113.5"),
        # A chain of trusted proxies: the rightmost hop outside the trusted set.
        ("127.0.0.1", ["203.0.113.5, 127.0.0.2"], "203.0.113.5"),
        # Repeated headers read as one list, in order.
        ("127.0.0.1", ["198.51.100.1", "203.0.113.5"], "203.0.113.5"),
        # Nothing forwarded, or garbage at the right end: the last trusted hop.
        ("127.0.0.1", [], "127.0.0.1"),
        ("127.0.0.1", ["203.0.113.5, not-an-address"], "127.0.0.1"),
        ("127.0.0.1", ["127.0.0.2"], "127.0.0.2"),
        ("127.0.0.1", ["2001:db8::1"], "2001:db8::1"),
    ],
)
def test_forwarded_client_is_rightmost_untrusted_hop(
    settings, peer: str, forwarded_for: list[str], client: str
) -> None:
    settings.MOSAIC_TRUSTED_PROXIES = ["127.0.0.1", "127.0.0.2"]
    assert forwarded_client(peer=peer, forwarded_for=forwarded_for) == client


def test_client_of_scope_reads_every_forwarded_header(settings) -> None:
    settings.MOSAIC_TRUSTED_PROXIES = ["127.0.0.1"]
    scope = {
        "client": ("127.0.0.1", 5000),
        "headers": [(b"x-forwarded-for", b"198.51.100.1"), (b"X-Forwarded-For", b"203.0.113.5")],
    }
    assert client_of_scope(scope) == "203.0.113.5"
    assert client_of_scope({**scope, "client": ("10.0.0.1", 5000)}) == "10.0.0.1"
