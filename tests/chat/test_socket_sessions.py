"""A human's socket lives no longer than its sign-in: a deleted session, a deactivated user or
a changed password closes it 4401 before it sends another row, and at the next resync when no
row comes (item 7). Sockets no session authenticates are left alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.test import override_settings

from broker import actions
from broker.actors import Actor
from broker.models import Business
from chat.errors import close_code
from tests.broker import factories
from tests.chat.test_consumers import PASSWORD, frames, sign_in, socket
from tests.support.listeners import HUMAN

pytestmark = pytest.mark.django_db(transaction=True)

CLOSED = {"type": "websocket.close", "code": close_code("not-authenticated")}


def delete_session(cookies: dict[str, str]) -> None:
    Session.objects.filter(session_key=cookies["sessionid"]).delete()


def deactivate(cookies: dict[str, str]) -> None:
    User.objects.filter(username="ada").update(is_active=False)


def change_password(cookies: dict[str, str]) -> None:
    user = User.objects.get(username="ada")
    user.set_password(PASSWORD + " changed")
    user.save()


ENDINGS: dict[str, Callable[[dict[str, str]], None]] = {
    "session-deleted": delete_session,
    "user-deactivated": deactivate,
    "password-changed": change_password,
}


@pytest.fixture
def human_thread(business: Business) -> tuple[Actor, int]:
    human = Actor.human(business_id=business.pk, username="ada")
    return human, factories.thread(human, factories.project(human), "h").pk


def path_of(stream: str, thread_id: int) -> str:
    return "/ws/trail/" if stream == "trail" else f"/ws/chat/threads/{thread_id}/"


@pytest.mark.parametrize("stream", ["trail", "thread"])
@pytest.mark.parametrize("ending", list(ENDINGS))
def test_socket_after_sign_in_ends_closes_before_the_next_row(
    human_thread, stream: str, ending: str
) -> None:
    """Item 7: the next row after the sign-in ended is not sent; the socket closes 4401."""
    human, thread_id = human_thread
    cookies = sign_in()

    async def scenario() -> dict[str, Any]:
        communicator = socket(HUMAN, path_of(stream, thread_id), cookies=cookies)
        assert (await communicator.connect())[0]
        assert await communicator.receive_nothing(timeout=0.2)
        await sync_to_async(ENDINGS[ending])(cookies)
        await sync_to_async(actions.send_to_thread)(human, thread_id=thread_id, body="private")
        return await communicator.receive_output(timeout=5)

    assert async_to_sync(scenario)() == CLOSED


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_idle_socket_after_sign_in_ends_closes_at_the_next_resync(
    human_thread, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """Item 7: with no row to send, the periodic resync finds the ended sign-in."""
    monkeypatch.setattr("chat.consumers.RESYNC_SECONDS", 0.2)
    cookies = sign_in()

    async def scenario() -> dict[str, Any]:
        communicator = socket(HUMAN, "/ws/trail/", cookies=cookies)
        assert (await communicator.connect())[0]
        await sync_to_async(ENDINGS[ending])(cookies)
        return await communicator.receive_output(timeout=5)

    assert async_to_sync(scenario)() == CLOSED


def test_socket_of_a_live_session_streams_through_resyncs(
    human_thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check closes nothing that is still signed in."""
    monkeypatch.setattr("chat.consumers.RESYNC_SECONDS", 0.1)
    human, thread_id = human_thread
    cookies = sign_in()

    async def scenario() -> list[dict[str, Any]]:
        communicator = socket(HUMAN, "/ws/trail/", cookies=cookies)
        assert (await communicator.connect())[0]
        assert await communicator.receive_nothing(timeout=0.5)
        await sync_to_async(actions.send_to_thread)(human, thread_id=thread_id, body="still")
        got = await frames(communicator, 1)
        await communicator.disconnect()
        return got

    assert [f["row"]["text"] for f in async_to_sync(scenario)()] == ["human to assistant: still"]


@override_settings(
    MOSAIC_PROXY_USER_HEADER="X-Auth-User",
    MOSAIC_TRUSTED_PROXIES=["127.0.0.1"],
    MOSAIC_PROXY_SECRET="proxy-secret",
)
def test_proxied_socket_without_session_is_left_alone(
    human_thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A human the proxy names on each connection has no session to lose (L9)."""
    monkeypatch.setattr("chat.consumers.RESYNC_SECONDS", 0.1)
    human, thread_id = human_thread
    User.objects.create_user("ada", password=PASSWORD)
    proxy = [(b"x-auth-user", b"ada"), (b"x-mosaic-proxy-secret", b"proxy-secret")]

    async def scenario() -> list[dict[str, Any]]:
        communicator = socket(HUMAN, "/ws/trail/", extra=proxy)
        assert (await communicator.connect())[0]
        assert await communicator.receive_nothing(timeout=0.5)
        await sync_to_async(actions.send_to_thread)(human, thread_id=thread_id, body="proxied")
        got = await frames(communicator, 1)
        await communicator.disconnect()
        return got

    assert [f["row"]["text"] for f in async_to_sync(scenario)()] == ["human to assistant: proxied"]


def test_sign_in_check_is_one_query(business: Business, django_assert_num_queries) -> None:
    """The check stays cheap: the user's row with the session's data beside it, one query."""
    from chat.session_checks import SignIn, is_signed_in

    cookies = sign_in()
    ada = User.objects.get(username="ada")
    with django_assert_num_queries(1):
        assert is_signed_in(SignIn(session_key=cookies["sessionid"], user_pk=ada.pk))
    change_password(cookies)
    with django_assert_num_queries(1):
        assert not is_signed_in(SignIn(session_key=cookies["sessionid"], user_pk=ada.pk))
