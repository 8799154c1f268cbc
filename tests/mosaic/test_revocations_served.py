"""An ended sign-in closes a streaming socket of `manage.py serve` at once.

One server process, its assistant answered by the suite's fake model, which holds the reply's
stream until the sign-in has ended (`tests.support.revocation_scenario`). Sign-out reaches the
server through its own request; the ways that run in another process (`manage.py shell`,
`clearsessions`) reach it through the shared channel layer, so they run in the Redis pass: an
embedded server with the in-memory layer hears other processes' revocations only at its
sockets' next check (docs/decisions/sessions-and-sign-in.md).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Iterator

import pytest

from chat.errors import close_code
from tests.cluster.clients import Api
from tests.console.assistant import MODEL_NAME, assistant_settings
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving
from tests.support.model_servers import FakeModel, serve_fake_model
from tests.support.revocation_scenario import HOLD_AFTER, PIECES, revoked_while_streaming

NOT_AUTHENTICATED = close_code("not-authenticated")

USER = (
    "from django.contrib.auth.models import User; "
    f"user = User.objects.get(username='{HUMAN_USERNAME}')"
)
SESSIONS = "from django.contrib.sessions.models import Session"
# What each revocation runs in a process of its own; `{key}` is the session's key.
SHELL_REVOCATIONS = {
    "session-deleted": [f"{SESSIONS}; Session.objects.filter(session_key='{{key}}').delete()"],
    "clearsessions": [
        # Expired by an update, which sends no signal: `clearsessions` is what ends it.
        f"{SESSIONS}; from django.utils import timezone; from datetime import timedelta; "
        "Session.objects.filter(session_key='{key}')"
        ".update(expire_date=timezone.now() - timedelta(seconds=1))",
        "clearsessions",
    ],
    "password-changed": [f"{USER}; user.set_password('another ' + user.username); user.save()"],
    "user-deactivated": [f"{USER}; user.is_active = False; user.save()"],
}
# Each test leaves the human able to sign in again, as at the start.
RESTORE = f"{USER}; user.set_password('{PASSWORD}'); user.is_active = True; user.save()"


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModel]:
    with serve_fake_model(
        FakeModel(models=[MODEL_NAME], pieces=PIECES, hold_after=HOLD_AFTER)
    ) as served:
        yield served


@pytest.fixture(scope="module")
def server(model: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serving(
        tmp_path_factory.mktemp("revocations"),
        f"mosaic_revocations_{os.getpid()}",
        settings={
            **assistant_settings(model.url),
            "MOSAIC_DRAFT_INTERVAL": "0",
            # No periodic check: whatever closes the socket is the revocation itself.
            "MOSAIC_RESYNC_SECONDS": "3600",
        },
    ) as live:
        yield live


def manage(server: LiveServer, step: str, key: str) -> None:
    if step == "clearsessions":
        server.manage("clearsessions")
    else:
        server.manage("shell", "-c", step.replace("{key}", key))


def check_revocation(
    server: LiveServer, model: FakeModel, name: str, revoke: Callable[[Api], Awaitable[None]]
) -> None:
    outcome = revoked_while_streaming(
        sign_in_url=server.human_url,
        socket_base=server.human_url,
        username=HUMAN_USERNAME,
        password=PASSWORD,
        name=name,
        holding=model.holding,
        release=model.release,
        revoke=revoke,
        restore=lambda: server.manage("shell", "-c", RESTORE),
    )
    outcome.assert_closed_at_once(NOT_AUTHENTICATED, server.log_tail())
    print(f"{name}: closed {outcome.seconds_to_close * 1000:.0f} ms after the revocation returned")


def test_sign_out_closes_a_streaming_socket_at_once(server: LiveServer, model: FakeModel) -> None:
    """Signed out mid-reply, the socket closes 4401 within 1 s; nothing written after
    the sign-out (the marker) reaches it."""

    async def sign_out(api: Api) -> None:
        answer = await api.post("/api/auth/logout", {})
        assert answer.status_code == 200, answer.text

    check_revocation(server, model, "signed-out", sign_out)


@pytest.mark.redis
@pytest.mark.parametrize("revocation", list(SHELL_REVOCATIONS))
def test_revocation_from_another_process_closes_a_streaming_socket_at_once(
    server: LiveServer, model: FakeModel, revocation: str
) -> None:
    """A session deleted (by hand or `clearsessions`), a password changed or a user
    deactivated by another process mid-reply: the socket closes 4401 within 1 s of the
    command's return, and nothing written after it (the marker) reaches it."""

    async def revoke(api: Api) -> None:
        key = api.client.cookies["sessionid"]
        for step in SHELL_REVOCATIONS[revocation]:
            await asyncio.to_thread(manage, server, step, key)

    check_revocation(server, model, revocation, revoke)
