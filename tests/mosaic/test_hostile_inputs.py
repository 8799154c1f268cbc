"""No input, however malformed, gives a 500; every refusal is `{"error", "detail"}` (SPEC §6).

Every route of both listeners, read from their urlconfs (`tests.support.listener_routes`), with
every method, signed in and not, receives hostile inputs: JSON nested too deep, ids and cursors
in digits that are not ASCII, numbers past any integer column, NUL, lone surrogates escaped in
JSON, bytes that are not UTF-8. So do both listeners' WebSockets, routes read from
`mosaic.edge.sockets.websocket_routes`. Nothing may be stored by any of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from broker.actors import Actor
from broker.models import Message, Project, Thread, ThreadOpen
from mosaic.edge.sockets import websocket_routes
from tests.broker import factories
from tests.chat.test_consumers import frames, socket
from tests.support.businesses import make_business
from tests.support.listener_routes import Route, routes
from tests.support.listeners import HUMAN, TESTER, ListenerClient, application
from tests.support.listeners import test_database_kept_open as database_kept_open
from tests.support.openai_api import KEY, bearer, is_openai_path, openai_error

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
READS = ("GET", "HEAD", "OPTIONS")

# Ids that are no id: superscript two, Arabic-Indic three, 30 digits, NUL, bytes that are not
# UTF-8, a negative number.
HOSTILE_IDS = ["%C2%B2", "%D9%A3", "9" * 30, "%00", "%ED%A0%80", "-1"]
HOSTILE_QUERIES = [
    "after=%C2%B2&before=%D9%A3&limit=99999999999999999999&project=%EF%BC%91&q=%00",
    "after=1&after=2&before=1e400&project=9223372036854775808&q=%ED%A0%80%FF",
]
SURROGATE = "\\ud800"  # a JSON escape the decoder turns into a lone surrogate
HOSTILE_BODIES: list[bytes] = [
    b"[" * 2000,
    b'{"a":' * 2000,
    b'{"name": "\xff\xfe"}',
    b"\xff\xfe\xfd",
    *(f'{{"{field}": "{SURROGATE}"}}'.encode() for field in ("name", "body", "instance")),
    f'{{"username": "{SURROGATE}", "password": "x"}}'.encode(),
    f'"{SURROGATE}"'.encode(),
    b'{"body": "a\\u0000b"}',
    b'{"project": 123456789012345678901234567890, "name": "x"}',
    b'{"project": 1e400, "name": "x"}',
    b'{"project": NaN, "name": "x"}',
]


# Routes whose answer (not refusal) is a page or the YAML schema.
NOT_JSON = {"console", "signin", "schema", "api-docs"}


def stored() -> tuple[int, int, int, int]:
    return (
        Project.objects.count(),
        Thread.objects.count(),
        Message.objects.count(),
        ThreadOpen.objects.count(),
    )


def requests(route: Route, thread_id: int, *, every: bool) -> Iterator[tuple[str, str, bytes]]:
    """(method, path, body) for one route: hostile queries on GET, hostile bodies on its write,
    hostile ids in the path; with `every` false, one hostile input per method. Pages and the
    schema read no input: one of each method is enough there."""
    every = every and route.name not in NOT_JSON
    path = route.path(str(thread_id))
    for method in METHODS:
        if method == "GET":
            queries = HOSTILE_QUERIES if every else HOSTILE_QUERIES[:1]
            yield from ((method, f"{path}?{query}", b"") for query in queries)
        elif method in READS:
            yield method, f"{path}?{HOSTILE_QUERIES[0]}", b""
        else:
            bodies = HOSTILE_BODIES if every and method == route.write_method else [b"[" * 2000]
            yield from ((method, path, body) for body in bodies)
        if route.has_id and method in ("GET", "POST"):
            for ident in HOSTILE_IDS:
                yield method, route.path(ident), b"" if method in READS else HOSTILE_BODIES[0]


async def problems(client: ListenerClient, asked: list[tuple[Route, str, str, bytes]]) -> list[str]:
    """What went wrong: a 5xx, or a refusal (or an API answer) that is not `{"error", "detail"}`
    JSON — OpenAI's error shape under `/v1/`, asked with the tester's key (SPEC §6.1). One HTTP
    client for the whole walk; Django's views still run on the test's thread."""
    found = []
    transport = httpx.ASGITransport(app=application(client.listener), client=("127.0.0.1", 50000))
    async with httpx.AsyncClient(
        transport=transport, base_url=client.origin, cookies=client.cookies
    ) as http:
        for route, method, path, body in asked:
            headers = {} if method in READS else client.write_headers()
            if is_openai_path(path):
                headers.update(bearer())
            response = await http.request(method, path, content=body, headers=headers)
            where = f"{client.listener} {method} {path} {body[:24]!r}"
            json_expected = response.status_code >= 400 or route.name not in NOT_JSON
            if response.status_code >= 500:
                found.append(f"{where}: {response.status_code}")
            elif json_expected and not response.headers.get("content-type", "").startswith(
                "application/json"
            ):
                found.append(
                    f"{where}: {response.status_code} {response.headers.get('content-type')}"
                )
            elif method == "HEAD" or response.status_code < 400:
                continue
            elif is_openai_path(path):
                try:
                    openai_error(response)
                except AssertionError:
                    found.append(f"{where}: {response.status_code} {response.text}")
            elif set(response.json()) != {"error", "detail"}:
                found.append(f"{where}: {response.status_code} {response.text}")
    return found


@pytest.mark.parametrize(
    ("listener", "signed_in"),
    [(HUMAN, True), (HUMAN, False), (TESTER, False)],
    ids=["human-signed-in", "human-anonymous", "tester"],
)
def test_every_route_and_method_with_hostile_input_answers_json_below_500(
    listener: str,
    signed_in: bool,
    human_client: ListenerClient,
    human_thread_id: int,
    tester_thread_id: int,
    settings,
) -> None:
    """Each route × method, each hostile input: below 500, refusals JSON, nothing stored."""
    settings.MOSAIC_TESTER_API_KEY = KEY
    client = human_client if signed_in else ListenerClient(listener)
    thread_id = tester_thread_id if listener == TESTER else human_thread_id
    # Someone not signed in is refused before any input is read, except by sign-in itself.
    asked = [
        (route, *request)
        for route in routes(listener)
        for request in requests(
            route, thread_id, every=signed_in or listener == TESTER or route.name == "auth-login"
        )
    ]
    before = stored()
    with database_kept_open():
        found = async_to_sync(problems)(client, asked)
    assert found == []
    assert stored() == before


# --- WebSockets --------------------------------------------------------------------------

HOSTILE_FRAMES: list[dict[str, Any]] = [
    {"text_data": "[" * 1100},
    {"text_data": '{"type":' * 1000},
    {"text_data": '{"type": "\\ud800"}'},
    {"text_data": '{"type": "ping", "n": ' + "[" * 40 + "]" * 40 + "}"},
    {"text_data": "\x00"},
    {"bytes_data": b"\xff\xfe"},
    {"bytes_data": b'{"type": "ping"}'},
]


def socket_paths(listener: str, thread_id: int) -> Iterator[tuple[str, bool]]:
    """(path, opens) for each WebSocket route: its own path, then hostile cursors and ids."""
    for route in websocket_routes(listener).routes:
        template = str(route.pattern)
        if not template:
            continue  # the catch-all that refuses unknown paths
        path = "/" + template.replace("<id:thread_id>", str(thread_id))
        yield path, True
        for ident in HOSTILE_IDS:
            yield f"{path}?after={ident}", False
            if "<id:" in template:
                yield "/" + template.replace("<id:thread_id>", ident), False


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_every_socket_with_hostile_cursor_id_or_frame_refuses_and_lives_on(
    listener: str,
) -> None:
    """A hostile cursor or id is a refused handshake (4400, 4404), never a server error; a
    hostile frame is an error frame and the socket answers a ping after it."""
    business = make_business("demo", human="ada")
    actor = (
        Actor.tester(business_id=business.pk)
        if listener == TESTER
        else Actor.human(business_id=business.pk, username="ada")
    )
    thread = factories.thread(actor, factories.project(actor), "t")
    cookies = None
    if listener == HUMAN:
        User.objects.create_user("ada", password="pw")
        client = ListenerClient(HUMAN)
        client.sign_in("ada", "pw")
        cookies = {name: client.cookies[name] for name in ("sessionid", "csrftoken")}

    async def scenario() -> list[str]:
        found = []
        for path, opens in socket_paths(listener, thread.pk):
            communicator = socket(listener, path, cookies=cookies)
            connected, code = await communicator.connect()
            if not opens:
                if connected or code not in (4400, 4404):
                    found.append(f"{path}: {connected} {code}")
                continue
            for frame in HOSTILE_FRAMES:
                await communicator.send_to(**frame)
                (answer,) = await frames(communicator, 1)
                if answer.get("type") != "error" or set(answer) != {"type", "error", "detail"}:
                    found.append(f"{path} {frame!r:.40}: {answer}")
            await communicator.send_to(text_data='{"type": "ping"}')
            (pong,) = await frames(communicator, 1)
            if pong.get("type") != "pong":
                found.append(f"{path}: no pong after hostile frames: {pong}")
            await communicator.disconnect()
        return found

    assert async_to_sync(scenario)() == []
