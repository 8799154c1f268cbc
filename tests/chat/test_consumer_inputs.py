"""Hostile inputs on the Console's WebSockets: cursors and frames (SPEC §6, decisions)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from broker.actors import Actor
from broker.models import Business
from chat.errors import close_code
from tests.broker import factories
from tests.chat.test_consumers import frames, socket
from tests.support.listeners import TESTER

pytestmark = pytest.mark.django_db(transaction=True)

# Digits `str.isdigit()` accepts and ids never are: superscript two, Arabic-Indic three,
# fullwidth one; and what `int()` alone would take.
NOT_IDS = ["%C2%B2", "%D9%A3", "%EF%BC%91", "1_0", "+1", "%201", "1%0A", "9" * 19]


@pytest.fixture
def paths(business: Business) -> dict[str, str]:
    """Both streams of the tester: its trail and one of its threads."""
    tester = Actor.tester(business_id=business.pk)
    thread = factories.thread(tester, factories.project(tester), "t")
    return {"trail": "/ws/trail/", "thread": f"/ws/chat/threads/{thread.pk}/"}


@pytest.mark.parametrize("stream", ["trail", "thread"])
def test_connect_cursor_not_ascii_digits_is_refused_invalid(
    paths: dict[str, str], stream: str
) -> None:
    """`?after=²` once failed the handshake with a 500; every non-id is `invalid`."""

    async def scenario() -> dict[str, tuple[bool, int | None]]:
        return {
            value: await socket(TESTER, f"{paths[stream]}?after={value}").connect()
            for value in NOT_IDS
        }

    refused = (False, close_code("invalid"))
    assert async_to_sync(scenario)() == dict.fromkeys(NOT_IDS, refused)


@pytest.mark.parametrize("stream", ["trail", "thread"])
def test_send_deeply_nested_frame_gets_error_frame_and_socket_lives_on(
    paths: dict[str, str], stream: str
) -> None:
    """`"[" * 1100` once closed the socket 1011; it is a bad frame like any other."""
    path = paths[stream]

    async def scenario() -> list[dict[str, Any]]:
        communicator = socket(TESTER, path)
        assert (await communicator.connect())[0]
        await communicator.send_to(text_data="[" * 1100)
        error = await frames(communicator, 1)
        await communicator.send_to(text_data='{"type": "ping"}')
        pong = await frames(communicator, 1)
        await communicator.disconnect()
        return error + pong

    error, pong = async_to_sync(scenario)()
    assert (error["type"], error["error"]) == ("error", "invalid")
    assert pong["type"] == "pong"
