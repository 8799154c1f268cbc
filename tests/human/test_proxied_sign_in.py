"""Over real sockets, against `manage.py serve`: behind a trusted proxy the
per-address sign-in limit counts the client the proxy forwards in `X-Forwarded-For`, so one
client's failures never lock out another; an untrusted peer's `X-Forwarded-For` is ignored.

Every connection comes from 127.0.0.1, which plays the proxy when it is trusted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving
from tests.support.listeners import write_headers

MALLORY = "203.0.113.66"
ADA_HOME = "198.51.100.7"


def sign_in(server: LiveServer, username: str, password: str, forwarded_for: str) -> int:
    with httpx.Client(base_url=server.human_url, timeout=30) as client:
        answer = client.post(
            "/api/auth/login",
            json={"username": username, "password": password},
            headers={**write_headers(server.human_url), "X-Forwarded-For": forwarded_for},
        )
    return answer.status_code


# The throttle's windows are fixed, aligned to the epoch: a test's failures must not straddle
# two of them (a 900-s window ends every quarter hour). This one ends in 2033.
WINDOW_SECONDS = 10**9
ONE_WINDOW = {"MOSAIC_SIGN_IN_WINDOW_SECONDS": str(WINDOW_SECONDS)}


@pytest.fixture(autouse=True)
def no_counters_of_this_window() -> Iterator[None]:
    """On Redis the servers' counters outlive them, and this window outlives every run: each
    test starts and ends with none of its counters (keys of this window's index, which no
    server with a shorter window shares)."""
    url = os.environ.get("REDIS_URL")
    if not url:
        yield
        return
    client = redis.Redis.from_url(url)
    pattern = f"*mosaic.sign-in.*.{int(time.time() // WINDOW_SECONDS)}"

    def forget() -> None:
        for key in client.scan_iter(match=pattern):
            client.delete(key)

    forget()
    yield
    forget()
    client.close()


@pytest.fixture
def behind_trusted_proxy(tmp_path: Path) -> Iterator[LiveServer]:
    settings = {"MOSAIC_TRUSTED_PROXIES": "127.0.0.1", **ONE_WINDOW}
    with serving(tmp_path, "proxied_sign_in", settings=settings) as server:
        yield server


@pytest.fixture
def behind_untrusted_peer(tmp_path: Path) -> Iterator[LiveServer]:
    settings = {
        "MOSAIC_TRUSTED_PROXIES": "10.9.9.9",
        "MOSAIC_SIGN_IN_ADDRESS_LIMIT": "3",
        **ONE_WINDOW,
    }
    with serving(tmp_path, "untrusted_sign_in", settings=settings) as server:
        yield server


def test_sign_in_fifty_failures_of_one_client_lock_out_no_other(
    behind_trusted_proxy: LiveServer,
) -> None:
    """One client's 50 failures (50 usernames, so only the address limit counts) lock that
    client out, and the other client's right password still signs in."""
    server = behind_trusted_proxy
    failures = [sign_in(server, f"nobody{n}", "wrong", MALLORY) for n in range(50)]
    assert set(failures) == {401}

    assert sign_in(server, HUMAN_USERNAME, PASSWORD, MALLORY) == 429
    assert sign_in(server, HUMAN_USERNAME, PASSWORD, f"{MALLORY}, {ADA_HOME}") == 200


def test_sign_in_untrusted_peer_forwarded_for_is_ignored(
    behind_untrusted_peer: LiveServer,
) -> None:
    """From a peer outside MOSAIC_TRUSTED_PROXIES the header is the client's own words: every
    connection counts as the peer's, whatever address it claims."""
    server = behind_untrusted_peer
    failures = [sign_in(server, f"nobody{n}", "wrong", MALLORY) for n in range(3)]
    assert set(failures) == {401}

    assert sign_in(server, HUMAN_USERNAME, PASSWORD, ADA_HOME) == 429
