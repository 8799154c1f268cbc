"""An ended sign-in ends its sockets at once: sign-out, a deleted session (its row
deleted as the admin does, or `clearsessions`), a changed password, a deactivated or deleted
user. A reply streams while it happens; the draft written after the revocation returned is
never sent, and the socket closes 4401 at once — not at the next resync, which is switched off
here."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.utils import timezone

from broker import actions
from broker.actors import Actor
from broker.models import Business
from chat import revocations
from chat.errors import close_code
from tests.broker import factories
from tests.chat.test_consumers import PASSWORD, frames, sign_in, socket
from tests.support.listeners import HUMAN, ListenerClient

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED = {"type": "websocket.close", "code": close_code("not-authenticated")}
MARKER = "written after the sign-in ended"


def sign_out(client: ListenerClient) -> None:
    assert client.post("/api/auth/logout", {}).status_code == 200


def delete_session_row(client: ListenerClient) -> None:
    Session.objects.get(session_key=client.cookies["sessionid"]).delete()


def clear_expired_sessions(client: ListenerClient) -> None:
    # The update sends no signal: the sign-in ends only when `clearsessions` deletes the row.
    Session.objects.filter(session_key=client.cookies["sessionid"]).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    call_command("clearsessions")


def change_password(client: ListenerClient) -> None:
    user = User.objects.get(username="ada")
    user.set_password(PASSWORD + " changed")
    user.save()


def deactivate(client: ListenerClient) -> None:
    user = User.objects.get(username="ada")
    user.is_active = False
    user.save()


def delete_user(client: ListenerClient) -> None:
    User.objects.get(username="ada").delete()


REVOCATIONS: dict[str, Callable[[ListenerClient], None]] = {
    "signed-out": sign_out,
    "session-row-deleted": delete_session_row,
    "clearsessions": clear_expired_sessions,
    "password-changed": change_password,
    "user-deactivated": deactivate,
    "user-deleted": delete_user,
}


def signed_in_client() -> ListenerClient:
    client = ListenerClient(HUMAN)
    client.sign_in("ada", PASSWORD)
    return client


@pytest.fixture
def streaming(business: Business, settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Ada's thread with a turn a run is answering, and Ada signed in."""
    settings.MOSAIC_DRAFT_INTERVAL = 0.0
    # No periodic check: whatever closes the socket here is the revocation itself.
    monkeypatch.setattr("chat.consumers.RESYNC_SECONDS", 3600.0)
    User.objects.create_user("ada", password=PASSWORD)
    client = signed_in_client()
    cookies = {name: client.cookies[name] for name in ("sessionid", "csrftoken")}
    human = Actor.human(business_id=business.pk, username="ada")
    run = Actor.assistant_run(business_id=business.pk, instance="assistant", run="run-1")
    thread = factories.thread(human, factories.project(human), "h")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="hello").message
    claim = factories.claim(run, thread)
    actions.start_turn(run, claim_id=claim.pk, turn_id=turn.pk)
    return {
        "client": client,
        "cookies": cookies,
        "run": run,
        "thread": thread,
        "turn": turn,
        "claim": claim,
    }


def draft(world: dict[str, Any], text: str) -> None:
    actions.draft_turn(
        world["run"], claim_id=world["claim"].pk, turn_id=world["turn"].pk, text=text
    )


@pytest.mark.parametrize("revocation", list(REVOCATIONS))
def test_revoked_sign_in_closes_a_streaming_socket_before_the_next_draft(
    streaming, revocation: str
) -> None:
    """The socket closes 4401 with no frame after the revocation committed: the
    draft written after it is not sent."""
    world = streaming

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        chat = socket(HUMAN, f"/ws/chat/threads/{world['thread'].pk}/", cookies=world["cookies"])
        assert (await chat.connect())[0]
        before = await frames(chat, 2)  # the turn, its working state
        await sync_to_async(draft)(world, "Half a")
        before += await frames(chat, 1)
        await sync_to_async(REVOCATIONS[revocation])(world["client"])
        await sync_to_async(draft)(world, "Half a " + MARKER)
        after = []
        while (output := await chat.receive_output(timeout=1))["type"] != "websocket.close":
            after.append(json.loads(output["text"]))
        return before, [*after, output]

    before, after = async_to_sync(scenario)()
    assert [frame["type"] for frame in before] == ["message", "reply.state", "reply.draft"]
    assert after == [CLOSED]


def test_revoking_one_session_leaves_the_others_streaming(streaming) -> None:
    """A session deleted ends its own sockets, not those of the user's other sessions."""
    world = streaming
    other = signed_in_client()
    other_cookies = {name: other.cookies[name] for name in ("sessionid", "csrftoken")}

    async def scenario() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        path = f"/ws/chat/threads/{world['thread'].pk}/"
        ended = socket(HUMAN, path, cookies=world["cookies"])
        kept = socket(HUMAN, path, cookies=other_cookies)
        assert (await ended.connect())[0] and (await kept.connect())[0]
        await frames(ended, 2)
        await frames(kept, 2)
        await sync_to_async(delete_session_row)(world["client"])
        closed = await ended.receive_output(timeout=1)
        await sync_to_async(draft)(world, "still streaming")
        got = await frames(kept, 1)
        await kept.disconnect()
        return closed, got

    closed, got = async_to_sync(scenario)()
    assert closed == CLOSED
    assert got == [
        {"type": "reply.draft", "in_reply_to": world["turn"].pk, "text": "still streaming"}
    ]


def test_saving_a_user_without_sign_in_changes_revokes_nothing(
    business: Business, captured_revocations: list[dict[str, Any]]
) -> None:
    """A sign-in's last_login stamp or a new e-mail address ends no session."""
    sign_in()
    user = User.objects.get(username="ada")
    user.email = "ada@example.org"
    user.save()
    user.is_active = True
    user.save(update_fields=["is_active"])
    assert captured_revocations == []


def test_revocation_names_sessions_by_digest_only(
    business: Business, captured_revocations: list[dict[str, Any]]
) -> None:
    """A session key signs its holder in: it never travels through the channel layer."""
    cookies = sign_in()
    Session.objects.get(session_key=cookies["sessionid"]).delete()
    assert captured_revocations == [
        {
            "type": revocations.REVOKED,
            "sessions": [revocations.session_digest(cookies["sessionid"])],
            "user": None,
        }
    ]
    assert cookies["sessionid"] not in json.dumps(captured_revocations)


@pytest.fixture
def captured_revocations(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    def capture(group: str, message: dict[str, Any]) -> None:
        if group == revocations.REVOKED_GROUP:
            sent.append(message)

    monkeypatch.setattr("broker.events.send_after_commit", capture)
    return sent


def test_late_revocation_of_an_earlier_sign_in_leaves_a_live_socket_streaming(streaming) -> None:
    """A user's revocation heard after the user signed in again (a password changed, then
    set back) names a sign-in that still holds: the check after it keeps the socket, and the
    socket loses nothing it held back meanwhile."""
    world = streaming
    ada = User.objects.get(username="ada")

    async def scenario() -> list[dict[str, Any]]:
        from channels.layers import get_channel_layer

        chat = socket(HUMAN, f"/ws/chat/threads/{world['thread'].pk}/", cookies=world["cookies"])
        assert (await chat.connect())[0]
        await frames(chat, 2)
        late = {"type": revocations.REVOKED, "sessions": [], "user": str(ada.pk)}
        layer = get_channel_layer()
        await layer.group_send(
            revocations.REVOKED_GROUP, {**late, "group": revocations.REVOKED_GROUP}
        )
        await sync_to_async(draft)(world, "still mine")
        got = await frames(chat, 1)
        await chat.disconnect()
        return got

    assert async_to_sync(scenario)() == [
        {"type": "reply.draft", "in_reply_to": world["turn"].pk, "text": "still mine"}
    ]
