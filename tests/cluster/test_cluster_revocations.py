"""An ended sign-in closes a streaming socket of the cluster at once, in whichever process the
socket lives: the socket is on human listener B; the sign-out is made on listener A,
the other revocations by `manage.py shell` processes of their own, each reaching B through
Redis. The reply streams from the cluster's fake model, held until the revocation has returned
(`tests.support.revocation_scenario`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import environ
import pytest

from chat.errors import close_code
from tests.cluster.clients import Api
from tests.cluster.services import HOLD
from tests.console.server import ROOT
from tests.support.cluster import PASSWORD, SERVICES, Cluster
from tests.support.revocation_scenario import revoked_while_streaming

pytestmark = SERVICES

USER = "from django.contrib.auth.models import User; user = User.objects.get(username='ada')"
SHELL_REVOCATIONS = {
    "session-deleted": "from django.contrib.sessions.models import Session; "
    "Session.objects.filter(session_key='{key}').delete()",
    "password-changed": f"{USER}; user.set_password('another password'); user.save()",
    "user-deactivated": f"{USER}; user.is_active = False; user.save()",
}
RESTORE = f"{USER}; user.set_password('{PASSWORD}'); user.is_active = True; user.save()"


def shell(cluster: Cluster, code: str) -> None:
    """`manage.py shell -c code` against the cluster's database and Redis."""
    config = environ.Env.db_url_config(os.environ["DATABASE_URL"])
    password = f":{config['PASSWORD']}" if config.get("PASSWORD") else ""
    database = (
        f"postgres://{config['USER']}{password}@127.0.0.1:{cluster.database.port}"
        f"/mosaic_cluster_{os.getpid()}"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database, "REDIS_URL": cluster.redis.url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("revocation", ["signed-out", *SHELL_REVOCATIONS])
def test_revocation_closes_a_streaming_socket_of_another_process_at_once(
    cluster: Cluster, revocation: str
) -> None:
    """The socket on listener B closes 4401 within 1 s of the revocation's return,
    and nothing written after it (the marker) reaches it."""

    async def revoke(api: Api) -> None:
        if revocation == "signed-out":
            answer = await api.post("/api/auth/logout", {})
            assert answer.status_code == 200, answer.text
            return
        code = SHELL_REVOCATIONS[revocation].replace("{key}", api.client.cookies["sessionid"])
        await asyncio.to_thread(shell, cluster, code)

    outcome = revoked_while_streaming(
        sign_in_url=cluster.human_urls[0],
        socket_base=cluster.human_urls[1],
        username="ada",
        password=PASSWORD,
        name=f"revoked {revocation}",
        holding=cluster.model.holding,
        release=cluster.model.release,
        revoke=revoke,
        restore=lambda: shell(cluster, RESTORE),
        body=f"{HOLD} tell me something",
    )
    outcome.assert_closed_at_once(close_code("not-authenticated"))
    print(f"{revocation}: closed {outcome.seconds_to_close * 1000:.0f} ms after it returned")
