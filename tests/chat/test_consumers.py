"""The Console's WebSockets through the real listener applications (L1, L5, L7, R1, R20)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import channels.consumer
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User

from broker import actions, events, selectors
from broker.actors import Actor
from broker.models import Business
from chat.errors import close_code
from tests.broker import factories
from tests.support.listeners import HUMAN, TESTER, application
from tests.support.waits import wait_for_async

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"


def socket(
    listener: str,
    path: str,
    *,
    origin: str | None = "own",
    cookies: dict[str, str] | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> WebsocketCommunicator:
    port = settings.MOSAIC_HUMAN_PORT if listener == HUMAN else settings.MOSAIC_TESTER_PORT
    headers = [(b"host", f"127.0.0.1:{port}".encode())]
    if origin == "own":
        origin = f"http://127.0.0.1:{port}"
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if cookies:
        jar = "; ".join(f"{name}={value}" for name, value in cookies.items())
        headers.append((b"cookie", jar.encode()))
    app = application(listener)

    async def from_loopback(scope, receive, send):
        await app(
            {**scope, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", port)}, receive, send
        )

    return WebsocketCommunicator(from_loopback, path, headers=[*headers, *(extra or [])])


def sign_in() -> dict[str, str]:
    """A real session of the business's human, as the browser would hold it."""
    from tests.support.listeners import ListenerClient

    User.objects.create_user("ada", password=PASSWORD)
    client = ListenerClient(HUMAN)
    client.sign_in("ada", PASSWORD)
    return {name: client.cookies[name] for name in ("sessionid", "csrftoken")}


async def frames(communicator: WebsocketCommunicator, count: int) -> list[dict[str, Any]]:
    return [json.loads(await communicator.receive_from(timeout=5)) for _ in range(count)]


async def trail_of_the_tester_after(turns: list[tuple[Actor, Any, str]]) -> list[str]:
    """The rows the tester's trail socket shows while `turns` (actor, thread, body) are sent,
    one after another; only the tester's own turn may show, so one row, and nothing more."""
    communicator = socket(TESTER, "/ws/trail/")
    assert (await communicator.connect())[0]
    for actor, thread, body in turns:
        await sync_to_async(actions.send_to_thread)(actor, thread_id=thread.pk, body=body)
    got = await frames(communicator, 1)
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()
    return [frame["row"]["text"] for frame in got]


@pytest.fixture
def world(business: Business) -> dict[str, Any]:
    human = Actor.human(business_id=business.pk, username="ada")
    tester = Actor.tester(business_id=business.pk)
    project = factories.project(human)
    return {
        "human": human,
        "tester": tester,
        "human_thread": factories.thread(human, project, "h"),
        "tester_thread": factories.thread(tester, project, "t"),
    }


def test_trail_replays_then_streams_live_rows_in_order(world) -> None:
    """SPEC §6: first every row after the cursor from the database, then each new row."""
    cookies = sign_in()
    human, tester = world["human"], world["tester"]
    actions.send_to_thread(human, thread_id=world["human_thread"].pk, body="one")
    actions.send_to_thread(tester, thread_id=world["tester_thread"].pk, body="two")

    async def scenario() -> list[str]:
        communicator = socket(HUMAN, "/ws/trail/", cookies=cookies)
        assert (await communicator.connect())[0]
        replayed = await frames(communicator, 2)
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="three"
        )
        live = await frames(communicator, 1)
        await communicator.disconnect()
        return [f["row"]["text"] for f in replayed + live]

    assert async_to_sync(scenario)() == [
        "human to assistant: one",
        "tester to assistant: two",
        "tester to assistant: three",
    ]


def test_trail_of_tester_streams_only_its_rows(world) -> None:
    """R20 on the socket: the tester's trail never carries a row of the human's."""
    human, tester = world["human"], world["tester"]
    actions.send_to_thread(human, thread_id=world["human_thread"].pk, body="secret")

    turns = [
        (human, world["human_thread"], "secret two"),
        (tester, world["tester_thread"], "probe"),
    ]
    assert async_to_sync(trail_of_the_tester_after)(turns) == ["tester to assistant: probe"]


def test_trail_after_cursor_skips_older_rows(world) -> None:
    tester = world["tester"]
    first = actions.send_to_thread(tester, thread_id=world["tester_thread"].pk, body="old")
    actions.send_to_thread(tester, thread_id=world["tester_thread"].pk, body="new")
    from broker.models import TrailRow

    cursor_id = TrailRow.objects.get(message=first.message).pk

    async def scenario() -> list[str]:
        communicator = socket(TESTER, f"/ws/trail/?after={cursor_id}")
        assert (await communicator.connect())[0]
        got = await frames(communicator, 1)
        assert await communicator.receive_nothing(timeout=0.2)
        await communicator.disconnect()
        return [f["row"]["text"] for f in got]

    assert async_to_sync(scenario)() == ["tester to assistant: new"]


@pytest.mark.parametrize(
    ("listener", "thread_key", "expected"),
    [
        (HUMAN, "human_thread", None),
        (HUMAN, "tester_thread", "thread-not-owned"),
        (TESTER, "tester_thread", None),
        (TESTER, "human_thread", "thread-not-owned"),
    ],
)
def test_thread_socket_owner_check_on_connect(world, listener, thread_key, expected) -> None:
    """R1 on connect, through the broker's own access function."""
    cookies = sign_in() if listener == HUMAN else None
    thread_id = world[thread_key].pk

    async def scenario() -> tuple[bool, int | None]:
        communicator = socket(listener, f"/ws/chat/threads/{thread_id}/", cookies=cookies)
        connected, code = await communicator.connect()
        await communicator.disconnect()
        return connected, code

    connected, code = async_to_sync(scenario)()
    if expected is None:
        assert connected
    else:
        assert (connected, code) == (False, close_code(expected))


def test_thread_socket_streams_messages_of_the_thread(world) -> None:
    tester = world["tester"]
    thread_id = world["tester_thread"].pk
    actions.send_to_thread(tester, thread_id=thread_id, body="before")

    async def scenario() -> list[str]:
        communicator = socket(TESTER, f"/ws/chat/threads/{thread_id}/")
        assert (await communicator.connect())[0]
        got = await frames(communicator, 1)
        await sync_to_async(actions.send_to_thread)(tester, thread_id=thread_id, body="after")
        got += await frames(communicator, 1)
        await communicator.disconnect()
        assert all(f["type"] == "message" for f in got)
        return [f["message"]["body"] for f in got]

    assert async_to_sync(scenario)() == ["before", "after"]


@pytest.mark.parametrize(
    "origin",
    [
        None,
        "http://evil.example",
        "https://127.0.0.1:{port}",
        "http://127.0.0.1:{other}",
        "http://localhost:{port}:",
        "null",
    ],
    ids=["missing", "foreign", "https", "other-listener", "garbled", "null"],
)
@pytest.mark.parametrize("listener", [HUMAN, TESTER])
def test_socket_from_foreign_origin_is_refused(world, listener: str, origin) -> None:
    """L7: full `scheme://host:port` origins on both listeners (cross-site WebSocket hijacking)."""
    cookies = sign_in() if listener == HUMAN else None
    port = settings.MOSAIC_HUMAN_PORT if listener == HUMAN else settings.MOSAIC_TESTER_PORT
    other = settings.MOSAIC_TESTER_PORT if listener == HUMAN else settings.MOSAIC_HUMAN_PORT
    value = origin.format(port=port, other=other) if origin else None

    async def scenario() -> tuple[bool, int | None]:
        communicator = socket(listener, "/ws/trail/", origin=value, cookies=cookies)
        return await communicator.connect()

    assert async_to_sync(scenario)() == (False, close_code("origin-refused"))


def test_human_socket_without_session_is_not_authenticated(world) -> None:
    async def scenario() -> tuple[bool, int | None]:
        return await socket(HUMAN, "/ws/trail/").connect()

    assert async_to_sync(scenario)() == (False, close_code("not-authenticated"))


def test_tester_socket_ignores_human_session(world) -> None:
    """L5: with the human's cookie on the tester port, the socket is still the tester's."""
    cookies = sign_in()
    actions.send_to_thread(world["human"], thread_id=world["human_thread"].pk, body="secret")

    async def scenario() -> bool:
        communicator = socket(TESTER, "/ws/trail/", cookies=cookies)
        assert (await communicator.connect())[0]
        quiet = await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()
        return quiet

    assert async_to_sync(scenario)()


@pytest.mark.parametrize("name", [b"x-mosaic-tester", b"x_mosaic_tester"])
def test_human_socket_with_tester_header_is_closed(world, name: bytes) -> None:
    """L1 on WebSockets."""
    cookies = sign_in()

    async def scenario() -> tuple[bool, int | None]:
        communicator = socket(HUMAN, "/ws/trail/", cookies=cookies, extra=[(name, b"")])
        return await communicator.connect()

    assert async_to_sync(scenario)() == (False, close_code("tester-listener-required"))


@pytest.mark.parametrize(
    "query", ["after=-1", "after=x", "after=1&after=2", "batch=2", "batch=yes", "batch=1&batch=1"]
)
def test_socket_bad_cursor_is_refused(world, query: str) -> None:
    async def scenario() -> tuple[bool, int | None]:
        return await socket(TESTER, f"/ws/trail/?{query}").connect()

    assert async_to_sync(scenario)() == (False, close_code("invalid"))


def test_unknown_socket_path_is_not_found(world) -> None:
    async def scenario() -> tuple[bool, int | None]:
        return await socket(TESTER, "/ws/elsewhere/").connect()

    assert async_to_sync(scenario)() == (False, close_code("not-found"))


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "invalid"),
        ('["ping"]', "invalid"),
        ('{"type": "subscribe"}', "invalid"),
        ('{"type": "ping", "pad": "' + "x" * 5000 + '"}', "too-large"),
    ],
)
def test_bad_frame_gets_error_frame_and_socket_lives_on(world, frame: str, code: str) -> None:
    async def scenario() -> list[dict[str, Any]]:
        communicator = socket(TESTER, "/ws/trail/")
        assert (await communicator.connect())[0]
        await communicator.send_to(text_data=frame)
        error = await frames(communicator, 1)
        await communicator.send_to(text_data='{"type": "ping"}')
        pong = await frames(communicator, 1)
        await communicator.disconnect()
        return error + pong

    error, pong = async_to_sync(scenario)()
    assert (error["type"], error["error"]) == ("error", code)
    assert pong["type"] == "pong"


def test_sign_out_closes_the_sessions_sockets(world) -> None:
    """A consumer never outlives its user's sign-out."""
    from tests.support.listeners import ListenerClient

    User.objects.create_user("ada", password=PASSWORD)
    client = ListenerClient(HUMAN)
    client.sign_in("ada", PASSWORD)
    cookies = {name: client.cookies[name] for name in ("sessionid", "csrftoken")}

    async def scenario() -> dict[str, Any]:
        communicator = socket(HUMAN, "/ws/trail/", cookies=cookies)
        assert (await communicator.connect())[0]
        await sync_to_async(client.post)("/api/auth/logout", {})
        closed = await communicator.receive_output(timeout=5)
        return closed

    closed = async_to_sync(scenario)()
    assert closed == {"type": "websocket.close", "code": close_code("not-authenticated")}


def test_tester_switched_off_closes_tester_socket_on_next_row(world, business) -> None:
    tester = world["tester"]

    async def scenario() -> dict[str, Any]:
        communicator = socket(TESTER, "/ws/trail/")
        assert (await communicator.connect())[0]
        await sync_to_async(Business.objects.filter(pk=business.pk).update)(tester_enabled=False)
        await sync_to_async(actions.send_to_thread)(
            world["human"], thread_id=world["human_thread"].pk, body="nudge"
        )
        return await communicator.receive_output(timeout=5)

    assert async_to_sync(scenario)() == {
        "type": "websocket.close",
        "code": close_code("tester-off"),
    }
    assert tester.is_tester


def test_replay_seam_under_concurrent_sends_has_no_gap_and_no_duplicate(world) -> None:
    """Rows written while the socket connects arrive once each, in id order."""
    tester = world["tester"]
    thread_id = world["tester_thread"].pk
    for n in range(20):
        actions.send_to_thread(tester, thread_id=thread_id, body=f"before {n}")

    async def scenario() -> list[int]:
        communicator = socket(TESTER, "/ws/trail/")

        async def writer() -> None:
            for n in range(40):
                await sync_to_async(actions.send_to_thread, thread_sensitive=False)(
                    tester, thread_id=thread_id, body=f"during {n}"
                )

        connecting = asyncio.ensure_future(communicator.connect())
        await asyncio.gather(writer(), connecting)
        got = await frames(communicator, 60)
        assert await communicator.receive_nothing(timeout=0.3)
        await communicator.disconnect()
        return [f["row"]["id"] for f in got]

    ids = async_to_sync(scenario)()
    assert ids == sorted(set(ids))
    assert len(ids) == 60


@pytest.mark.redis
def test_idle_socket_on_redis_still_receives_after_ten_seconds(world) -> None:
    """SPEC §11: redis-py 8's 5 s socket timeout must not tear down an idle consumer."""
    tester = world["tester"]

    async def scenario() -> list[str]:
        communicator = socket(TESTER, "/ws/trail/")
        assert (await communicator.connect())[0]
        assert await communicator.receive_nothing(timeout=11)
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="still there?"
        )
        got = await frames(communicator, 1)
        await communicator.disconnect()
        return [f["row"]["text"] for f in got]

    assert async_to_sync(scenario)() == ["tester to assistant: still there?"]


def test_row_committed_by_a_plain_thread_reaches_the_socket_promptly(world) -> None:
    """A runner's worker thread has no tie to the server's loop; its push still wakes the
    consumer at once (the in-memory layer's queues belong to that loop)."""
    import threading

    tester = world["tester"]

    def worker() -> None:
        from django.db import connection

        try:
            actions.send_to_thread(
                tester, thread_id=world["tester_thread"].pk, body="from a thread"
            )
        finally:
            connection.close()

    async def scenario() -> list[str]:
        communicator = socket(TESTER, "/ws/trail/")
        assert (await communicator.connect())[0]
        thread = threading.Thread(target=worker)
        thread.start()
        got = [json.loads(await communicator.receive_from(timeout=2))]
        thread.join()
        await communicator.disconnect()
        return [f["row"]["text"] for f in got]

    assert async_to_sync(scenario)() == ["tester to assistant: from a thread"]


def test_row_to_many_sockets_of_one_stream_is_read_once(world, monkeypatch) -> None:
    """P3: one nudge to fifty Consoles of one actor makes one database read, and each of them
    still gets the row exactly once."""
    reads: list[int] = []
    real = selectors.read_trail

    def counted(actor, **kwargs):
        reads.append(kwargs.get("after") or 0)
        return real(actor, **kwargs)

    monkeypatch.setattr("chat.consumers.selectors.read_trail", counted)
    tester = world["tester"]

    async def scenario() -> list[list[str]]:
        sockets = [socket(TESTER, "/ws/trail/") for _ in range(50)]
        for communicator in sockets:
            assert (await communicator.connect())[0]
        for communicator in sockets:
            assert await communicator.receive_nothing(timeout=0.01)
        reads.clear()
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="to all"
        )
        got = [[json.loads(await c.receive_from(timeout=5))["row"]["text"]] for c in sockets]
        for communicator in sockets:
            assert await communicator.receive_nothing(timeout=0.01)
            await communicator.disconnect()
        return got

    got = async_to_sync(scenario)()
    assert got == [["tester to assistant: to all"]] * 50
    assert len(reads) <= 2


async def members(group: str) -> int:
    """How many channels the layer holds in `group`."""
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    layer = get_channel_layer()
    if isinstance(layer, InMemoryChannelLayer):
        return len(layer.groups.get(group, {}))
    connection = layer.connection(layer.consistent_hash(group))
    return int(await connection.zcard(layer._group_key(group)))


def test_sockets_of_one_process_follow_their_stream_through_one_membership(world) -> None:
    """P3: a row to fifty Consoles of one process is one channel-layer message, not fifty; each
    socket still gets it once (SPEC §6: none twice), a closed socket hears no more, and the
    membership of a stream no socket follows is dropped at the next renewal."""
    from chat.fan_out import fan_outs_of_this_loop

    tester = world["tester"]
    group = events.trail_group(tester.business_id)

    async def scenario() -> tuple[int, list[list[str]], int]:
        sockets = [socket(TESTER, "/ws/trail/") for _ in range(50)]
        for communicator in sockets:
            assert (await communicator.connect())[0]
        joined = await members(group)
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="to all"
        )
        got = [[json.loads(await c.receive_from(timeout=5))["row"]["text"]] for c in sockets]
        for communicator in sockets:
            await communicator.disconnect()
        for fan_out in fan_outs_of_this_loop():
            await fan_out.renew()
        return joined, got, await members(group)

    joined, got, left = async_to_sync(scenario)()
    assert joined == 1
    assert got == [["tester to assistant: to all"]] * 50
    assert left == 0


def test_socket_whose_membership_the_layer_forgot_catches_up(world, monkeypatch) -> None:
    """A layer that forgot its groups (Redis restarted without persistence, a lapsed group
    expiry) costs a socket no row: every socket renews its memberships and reads once more
    each RESYNC_SECONDS."""
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    monkeypatch.setattr("chat.consumers.RESYNC_SECONDS", 0.2)
    tester = world["tester"]

    async def forget_every_group() -> None:
        layer = get_channel_layer()
        if isinstance(layer, InMemoryChannelLayer):
            layer.groups.clear()
            return
        # Redis: what a restart without persistence does to the trail's group.
        group = events.trail_group(tester.business_id)
        connection = layer.connection(layer.consistent_hash(group))
        await connection.delete(layer._group_key(group))

    async def scenario() -> list[str]:
        communicator = socket(TESTER, "/ws/trail/")
        assert (await communicator.connect())[0]
        await forget_every_group()
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="after the layer forgot"
        )
        got = await frames(communicator, 1)
        # Renewed: the next row arrives by its own nudge, as ever.
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="and the next"
        )
        got += await frames(communicator, 1)
        await communicator.disconnect()
        return [f["row"]["text"] for f in got]

    assert async_to_sync(scenario)() == [
        "tester to assistant: after the layer forgot",
        "tester to assistant: and the next",
    ]


def test_a_nudge_handed_on_while_a_socket_still_connects_costs_it_nothing(
    world, monkeypatch
) -> None:
    """The process hands a nudge to a socket from the moment it follows its stream, before it
    has accepted: the socket takes it, connects, and sends each row once."""
    from chat.fan_out import FanOut

    tester = world["tester"]
    follow = FanOut.follow

    async def follow_then_nudged(self, group, follower) -> None:
        await follow(self, group, follower)
        follower.hear({"type": "trail.nudge", "id": 10**9, "group": group})

    monkeypatch.setattr(FanOut, "follow", follow_then_nudged)

    turns = [(tester, world["tester_thread"], "after an early nudge")]
    assert async_to_sync(trail_of_the_tester_after)(turns) == [
        "tester to assistant: after an early nudge"
    ]


class Hearing:
    """A follower of the process's fan-out that keeps the ids it heard."""

    def __init__(self) -> None:
        self.heard: list[int] = []

    def hear(self, message: dict[str, Any]) -> None:
        self.heard.append(message["id"])


def test_a_socket_that_follows_while_a_renewal_drops_its_group_joins_after_the_drop() -> None:
    """A renewal drops the membership of a group its last socket left; a socket that follows
    the group in that moment must not have its join undone by the drop."""
    from chat.fan_out import FanOut
    from mosaic.layers import InMemoryChannelLayer

    class Slow(InMemoryChannelLayer):
        def __init__(self) -> None:
            super().__init__()
            self.dropped = asyncio.Event()

        async def group_discard(self, group: str, channel: str) -> None:
            await self.dropped.wait()
            await super().group_discard(group, channel)

    async def scenario() -> list[int]:
        layer = Slow()
        fan_out = FanOut(layer)
        gone, late = Hearing(), Hearing()
        await fan_out.follow("g", gone)
        fan_out.unfollow("g", gone)
        renewal = asyncio.create_task(fan_out.renew())
        await asyncio.sleep(0)  # the renewal is dropping the group
        joining = asyncio.create_task(fan_out.follow("g", late))
        await wait_for_async(
            lambda: late in fan_out.followers.get("g", ()),
            what="the late socket following the group",
        )
        layer.dropped.set()
        await renewal
        await joining
        await layer.group_send("g", {"type": "trail.nudge", "id": 1, "group": "g"})
        await wait_for_async(lambda: late.heard, what="the late socket hearing the nudge")
        fan_out.unfollow("g", late)
        return late.heard

    assert asyncio.run(scenario()) == [1]


def test_a_socket_that_fails_to_take_a_nudge_leaves_the_others_hearing() -> None:
    """One follower's fault is logged; the process's other sockets still hear every nudge."""
    from chat.fan_out import FanOut
    from mosaic.layers import InMemoryChannelLayer

    class Broken:
        def hear(self, message) -> None:
            raise RuntimeError("broken socket")

    async def scenario() -> list[int]:
        layer = InMemoryChannelLayer()
        fan_out = FanOut(layer)
        listening = Hearing()
        await fan_out.follow("g", Broken())
        await fan_out.follow("g", listening)
        for row_id in (1, 2):
            await layer.group_send("g", {"type": "trail.nudge", "id": row_id, "group": "g"})
        await wait_for_async(
            lambda: len(listening.heard) == 2, what="the working socket hearing both nudges"
        )
        fan_out.unfollow("g", listening)
        return listening.heard

    assert asyncio.run(scenario()) == [1, 2]


def test_sockets_close_unavailable_when_the_layer_fails_their_streams_renewal(
    world, monkeypatch
) -> None:
    """A layer that cannot renew the process's membership of a stream closes its sockets
    `unavailable` (4503), and each client reconnects after its last id: a socket is never left
    open hearing nothing."""
    from chat.fan_out import FanOut

    async def layer_down(self) -> None:
        raise ConnectionError("the channel layer is down")

    monkeypatch.setattr("chat.consumers.RESYNC_SECONDS", 0.1)
    monkeypatch.setattr(FanOut, "renew", layer_down)

    async def scenario() -> dict[str, Any]:
        communicator = socket(TESTER, "/ws/trail/")
        assert (await communicator.connect())[0]
        return await communicator.receive_output(timeout=5)

    assert async_to_sync(scenario)() == {
        "type": "websocket.close",
        "code": close_code("unavailable"),
    }


def test_socket_joining_a_read_older_than_its_row_reads_again(world, monkeypatch) -> None:
    """Sharing never costs a row: a socket whose nudge found a read in flight that began before
    the row committed (and so lacks it) reads once more, from a read begun after its nudge."""
    from chat import consumers

    tester = world["tester"]
    shared = consumers.SHARED_READS
    joined_an_older_read: list[int] = []

    async def frames(key, *, read, not_before=0):
        if joined_an_older_read == [0]:
            # Stands for a read begun at the dawn of time, before the nudged row committed.
            joined_an_older_read.append(not_before)
            return 0, []
        return await type(shared).frames(shared, key, read=read, not_before=not_before)

    async def scenario() -> list[str]:
        communicator = socket(TESTER, "/ws/trail/")
        assert (await communicator.connect())[0]
        assert await communicator.receive_nothing(timeout=0.2)
        monkeypatch.setattr(shared, "frames", frames)
        joined_an_older_read.append(0)
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="committed mid-read"
        )
        got = [json.loads(await communicator.receive_from(timeout=3))["row"]["text"]]
        assert await communicator.receive_nothing(timeout=0.1)
        await communicator.disconnect()
        return got

    assert async_to_sync(scenario)() == ["tester to assistant: committed mid-read"]
    assert len(joined_an_older_read) == 2  # the stand-in was used, and the socket read again


def test_nudge_to_many_sockets_costs_no_thread_hop_per_socket(world, monkeypatch) -> None:
    """P3: a nudge reaches each socket's handler on the event loop; only the one shared read
    goes to a thread. Channels' dispatch would first send every socket to a thread to close
    old database connections, once per socket and message."""
    hops: list[int] = []
    real = channels.consumer.aclose_old_connections

    async def counted() -> None:
        hops.append(1)
        await real()

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counted)
    tester = world["tester"]

    async def scenario() -> int:
        sockets = [socket(TESTER, "/ws/trail/") for _ in range(20)]
        for communicator in sockets:
            assert (await communicator.connect())[0]
        for communicator in sockets:
            assert await communicator.receive_nothing(timeout=0.01)
        hops.clear()
        await sync_to_async(actions.send_to_thread)(
            tester, thread_id=world["tester_thread"].pk, body="to all"
        )
        for communicator in sockets:
            assert json.loads(await communicator.receive_from(timeout=5))["type"] == "trail.row"
        counted_hops = len(hops)
        for communicator in sockets:
            await communicator.disconnect()
        return counted_hops

    assert async_to_sync(scenario)() == 0


@pytest.mark.parametrize(
    ("path", "thread_key", "single", "several", "field"),
    [
        ("/ws/trail/", None, "trail.row", "trail.rows", "row"),
        ("/ws/chat/threads/{}/", "tester_thread", "message", "messages", "message"),
    ],
)
def test_socket_with_batch_gets_rows_read_together_in_one_frame(
    world, path: str, thread_key: str | None, single: str, several: str, field: str
) -> None:
    """Cheaper fan-out: with `batch=1` the rows of one read go out as one frame, in id order;
    a read of one row is the one-row frame; without it, every row is its own frame."""
    tester = world["tester"]
    thread_id = world["tester_thread"].pk
    for body in ("one", "two", "three"):
        actions.send_to_thread(tester, thread_id=thread_id, body=body)
    url = path.format(world[thread_key].pk) if thread_key else path

    async def scenario(query: str, count: int) -> list[dict[str, Any]]:
        communicator = socket(TESTER, f"{url}?{query}")
        assert (await communicator.connect())[0]
        replayed = await frames(communicator, count)
        await sync_to_async(actions.send_to_thread)(tester, thread_id=thread_id, body="four")
        live = await frames(communicator, 1)
        assert await communicator.receive_nothing(timeout=0.05)
        await communicator.disconnect()
        return replayed + live

    batched = async_to_sync(scenario)("batch=1", 1)
    assert [frame["type"] for frame in batched] == [several, single]
    rows = [*batched[0]["rows"], batched[1][field]]
    assert [row["id"] for row in rows] == sorted(row["id"] for row in rows)
    assert [row.get("body", row.get("text", "")).rsplit(" ", 1)[-1] for row in rows] == [
        "one",
        "two",
        "three",
        "four",
    ]
    # Four rows stored by now, each its own frame, then the fifth live.
    plain = async_to_sync(scenario)("batch=0", 4)
    assert [frame["type"] for frame in plain] == [single] * 5
    ids = [frame[field]["id"] for frame in plain]
    assert ids[:4] == [row["id"] for row in rows]
    assert ids == sorted(ids)
