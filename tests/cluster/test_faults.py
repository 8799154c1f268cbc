"""Faults under the running cluster (SPEC §6 `unavailable`, §9 scale-out): Redis restarted
under live Consoles, PostgreSQL connections cut, a human listener's daphne process killed.
Each fault leaves the cluster serving without a restart of anything but what was broken;
the killed listener comes last because it stays dead."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import httpx

from tests.cluster.clients import Api, Follower
from tests.cluster.services import wait_until
from tests.cluster.test_cluster import human_on, project_id, wait_answered, ws
from tests.cluster.websocket import HandshakeRefused, connect
from tests.support.cluster import SERVICES, Cluster

pytestmark = SERVICES

UNAVAILABLE = {"error": "unavailable", "detail": "The service is unavailable; retry shortly."}
READY = {"database": "ok", "migrations": "ok", "channel-layer": "ok"}


def every_listener(cluster: Cluster) -> list[str]:
    return [*cluster.human_urls, cluster.tester_url, cluster.ops_url]


async def readiness(cluster: Cluster) -> list[tuple[int, dict[str, str]]]:
    """Each listener process's `/readyz`: its status and its checks."""
    async with httpx.AsyncClient(timeout=15) as client:
        answers = [await client.get(f"{url}/readyz") for url in every_listener(cluster)]
    return [(answer.status_code, answer.json()["checks"]) for answer in answers]


async def ready_again(cluster: Cluster, timeout: float) -> list[tuple[int, dict[str, str]]]:
    """`/readyz` of every listener once all answer 200 (failing after `timeout` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (answers := await readiness(cluster)) != [(200, READY)] * len(answers):
        assert loop.time() < deadline, answers
        await asyncio.sleep(0.2)
    return answers


def follower(cluster: Cluster, api: Api, index: int, after: int) -> Follower:
    url = cluster.human_urls[index]
    return Follower(ws(url), url, dict(api.client.cookies), after=after)


async def trail_ids(api: Api, after: int) -> list[int]:
    return [row["id"] for row in await api.all_rows("/api/trail", "rows") if row["id"] > after]


def holds_the_trail(received: list[int], expected: list[int]) -> bool:
    """A socket's rows are the database's as last read — no gap, no duplicate, in id order —
    followed only by rows committed after that read (a runner may still be closing its turn)."""
    return received[: len(expected)] == expected and received == sorted(set(received))


async def newest_trail_id(api: Api) -> int:
    rows = (await api.ok("/api/trail?limit=1"))["rows"]
    return int(rows[-1]["id"]) if rows else 0


def test_redis_restarted_under_live_consoles_they_resume_with_no_gap(cluster: Cluster) -> None:
    """Three live trails (two on human listener A, one on B) while turns flow through both
    human listeners and the tester listener; Redis is killed and started again empty, twice:
    after a long outage and after a blip. Every trail ends with exactly the database's rows: no
    gap, no duplicate, in order, whether its socket was closed (it reconnects after its last
    id) or lived through. Turns sent while Redis was down are stored and answered."""

    async def scenario() -> dict[str, Any]:
        a, b = await human_on(cluster)
        tester = Api(cluster.tester_url)
        project = await project_id(a, "redis restart")
        threads = [(a, await a.thread(project, "r-a")), (b, await b.thread(project, "r-b"))]
        threads.append((tester, await tester.thread(project, "r-tester")))
        start = await newest_trail_id(a)
        followers = [follower(cluster, a, 0, start), follower(cluster, a, 0, start)]
        followers.append(follower(cluster, b, 1, start))
        for each in followers:
            each.start()
        await asyncio.wait_for(asyncio.gather(*(f.live.wait() for f in followers)), 10)

        sent: list[int] = []
        refused = 0
        sending = asyncio.Event()
        sending.set()

        async def keep_sending() -> None:
            nonlocal refused
            index = 0
            while sending.is_set():
                api, thread = threads[index % 3]
                message, answers_503 = await api.send(thread, f"turn {index}")
                sent.append(message)
                refused += answers_503
                index += 1
                await asyncio.sleep(0.05)

        sender = asyncio.create_task(keep_sending())
        loop = asyncio.get_running_loop()

        async def sent_more(count: int) -> None:
            target = len(sent) + count
            deadline = loop.time() + 30
            while len(sent) < target:
                assert loop.time() < deadline, "sends stalled"
                await asyncio.sleep(0.05)

        await sent_more(6)
        outages = []
        readiness_down: list[tuple[int, dict[str, str]]] = []
        # A long outage (turns go on while Redis is down) and a blip (down and straight back
        # up, as a restart is): a socket may live through the blip, its groups forgotten.
        for turns_while_down in (3, 0):
            cluster.redis.crash()
            down_at, before = loop.time(), len(sent)
            if turns_while_down:
                # While Redis is down every listener's /readyz says why.
                readiness_down = await readiness(cluster)
            await sent_more(turns_while_down)
            await asyncio.to_thread(cluster.redis.start)
            outages.append((loop.time() - down_at, len(sent) - before))
            await sent_more(6)
        readiness_up = await ready_again(cluster, 30)
        sending.clear()
        await sender

        await wait_answered(a, [threads[0][1]], set(sent[0::3]), 60)
        await wait_answered(b, [threads[1][1]], set(sent[1::3]), 60)
        await wait_answered(tester, [threads[2][1]], set(sent[2::3]), 60)
        expected = await trail_ids(a, start)
        caught_up_from = loop.time()
        for each in followers:
            await each.wait_for(set(expected), 30)
        caught_up = loop.time() - caught_up_from
        for each in followers:
            await each.stop()
        for api in (a, b, tester):
            await api.aclose()
        return {
            "expected": expected,
            "followers": followers,
            "sent": len(sent),
            "refused": refused,
            "outages": outages,
            "caught_up": caught_up,
            "readiness_down": readiness_down,
            "readiness_up": readiness_up,
        }

    result = asyncio.run(scenario())
    for each in result["followers"]:
        assert holds_the_trail(each.received, result["expected"]), each.received
        # A socket closed on the way only as `unavailable`, the code that says "retry".
        assert set(each.closes) <= {4503}, each.closes
    channel_layer_down = {**READY, "channel-layer": "failed"}
    assert result["readiness_down"] == [(503, channel_layer_down)] * 4
    assert result["readiness_up"] == [(200, READY)] * 4
    outages = ", ".join(f"{down:.1f}s with {turns} turns sent" for down, turns in result["outages"])
    print(
        f"redis restarts: {result['sent']} turns ({result['refused']} answers 503), "
        f"{len(result['expected'])} trail rows; Redis down {outages}; trails complete "
        f"{result['caught_up']:.1f}s after the last turn was answered; reconnects "
        f"{[f.connects - 1 for f in result['followers']]}, closes "
        f"{[f.closes for f in result['followers']]}"
    )


def test_postgres_connections_cut_answer_503_then_recover_without_restart(
    cluster: Cluster,
) -> None:
    """Every connection to PostgreSQL is cut and new ones are refused: reads and writes on
    both listeners answer 503 `unavailable` (never a 500, never a hang), sign-in too, and a
    WebSocket is not opened; a live trail reconnects until it can. Once connections are
    allowed again every process serves again and the runners answer, with nothing restarted."""

    async def scenario() -> dict[str, Any]:
        a, b = await human_on(cluster)
        tester = Api(cluster.tester_url)
        project = await project_id(a, "postgres cut")
        thread = await a.thread(project, "pg-a")
        tester_thread = await tester.thread(project, "pg-tester")
        start = await newest_trail_id(a)
        trail = follower(cluster, b, 1, start)
        trail.start()
        await asyncio.wait_for(trail.live.wait(), 10)
        loop = asyncio.get_running_loop()

        cluster.database.cut()
        answers: list[tuple[str, int, Any, float]] = []
        probes = [
            ("human read A", a.get("/api/chat/projects")),
            ("human read B", b.get(f"/api/chat/threads/{thread}/messages")),
            ("human write B", b.post(f"/api/chat/threads/{thread}/messages", {"body": "x"})),
            ("tester read", tester.get("/api/chat/threads")),
            (
                "tester write",
                tester.post(f"/api/chat/threads/{tester_thread}/messages", {"body": "x"}),
            ),
            (
                "sign-in",
                Api(cluster.human_urls[1]).post(
                    "/api/auth/login", {"username": "ada", "password": "wrong"}
                ),
            ),
        ]
        for label, probe in probes:
            began = loop.time()
            answer = await probe
            try:
                body = answer.json()
            except ValueError:
                body = answer.text[:200]
            answers.append((label, answer.status_code, body, loop.time() - began))
        pages = [(await api.get("/")).status_code for api in (a, tester)]
        # While PostgreSQL is cut every listener's /readyz says why.
        readiness_down = await readiness(cluster)
        try:
            socket = await connect(
                f"{ws(cluster.human_urls[0])}/ws/trail/?after={start}",
                origin=cluster.human_urls[0],
                cookies=dict(a.client.cookies),
            )
        except HandshakeRefused as refused:
            socket_answer: Any = f"HTTP {refused.status}"
        else:
            await socket.receive()
            socket_answer = socket.close_code

        cluster.database.restore()
        restored_at = loop.time()
        readiness_up = await ready_again(cluster, 30)
        message, answers_503 = await a.send(thread, "after the cut")
        recovered = loop.time() - restored_at
        tester_message, _ = await tester.send(tester_thread, "after the cut")
        await wait_answered(a, [thread], {message}, 30)
        await wait_answered(tester, [tester_thread], {tester_message}, 30)
        answered = loop.time() - restored_at
        expected = await trail_ids(b, start)
        await trail.wait_for(set(expected), 30)
        await trail.stop()
        for api in (a, b, tester):
            await api.aclose()
        return {
            "answers": answers,
            "pages": pages,
            "readiness_down": readiness_down,
            "readiness_up": readiness_up,
            "socket": socket_answer,
            "recovered": recovered,
            "answered": answered,
            "answers_503": answers_503,
            "trail": trail,
            "expected": expected,
        }

    result = asyncio.run(scenario())
    for label, status, body, seconds in result["answers"]:
        assert (label, status, body) == (label, 503, UNAVAILABLE)
        assert seconds < 5, (label, seconds)
    assert result["pages"] == [200, 200]  # the Console pages need no database
    # The migrations check ran once, while the database answered: it is not asked again.
    assert result["readiness_down"] == [(503, {**READY, "database": "failed"})] * 4
    assert result["readiness_up"] == [(200, READY)] * 4
    assert result["socket"] == 4503
    assert holds_the_trail(result["trail"].received, result["expected"]), result["trail"].received
    print(
        f"postgres cut: {len(result['answers'])} requests answered 503 in at most "
        f"{max(s for *_, s in result['answers']):.2f}s; first write accepted "
        f"{result['recovered']:.2f}s after restore ({result['answers_503']} retries); replies "
        f"landed {result['answered']:.1f}s after restore; socket {result['socket']}"
    )


def test_a_killed_human_listener_leaves_the_others_serving(cluster: Cluster) -> None:
    """SIGKILL one human listener's daphne process: the other human listener and the tester
    listener keep serving, the trail on the other keeps receiving rows, the runners keep
    answering; the supervisor reports the death. SIGTERM to the supervisor then stops every
    process that is left."""

    async def scenario() -> dict[str, Any]:
        a, b = await human_on(cluster)
        tester = Api(cluster.tester_url)
        project = await project_id(b, "daphne killed")
        thread = await b.thread(project, "k-b")
        tester_thread = await tester.thread(project, "k-tester")
        start = await newest_trail_id(b)
        on_b = follower(cluster, b, 1, start)
        on_a = follower(cluster, a, 0, start)
        for each in (on_a, on_b):
            each.start()
        await asyncio.wait_for(asyncio.gather(on_a.live.wait(), on_b.live.wait()), 10)

        os.kill(cluster.pids["human listener 1"], signal.SIGKILL)
        loop = asyncio.get_running_loop()
        killed_at = loop.time()
        while on_a.live.is_set():
            assert loop.time() - killed_at < 10, "the killed listener's socket stayed open"
            await asyncio.sleep(0.05)
        sent = [(await b.send(thread, f"turn {n}"))[0] for n in range(3)]
        tester_sent = [(await tester.send(tester_thread, f"turn {n}"))[0] for n in range(3)]
        await wait_answered(b, [thread], set(sent), 30)
        await wait_answered(tester, [tester_thread], set(tester_sent), 30)
        expected = await trail_ids(b, start)
        await on_b.wait_for(set(expected), 30)
        served = loop.time() - killed_at
        dead = await asyncio.gather(a.get("/api/chat/projects"), return_exceptions=True)
        for each in (on_a, on_b):
            await each.stop()
        for api in (a, b, tester):
            await api.aclose()
        return {"on_b": on_b, "on_a": on_a, "expected": expected, "dead": dead, "served": served}

    result = asyncio.run(scenario())
    assert holds_the_trail(result["on_b"].received, result["expected"]), result["on_b"].received
    assert result["on_b"].connects == 1  # never dropped
    assert isinstance(result["dead"][0], Exception)
    assert result["on_a"].connects == 1
    wait_until(
        lambda: (
            "human listener 1" in cluster.output() and "exited with status -9" in cluster.output()
        ),
        timeout=10,
        what="the supervisor reporting the death",
    )
    survivors = [label for label in cluster.pids if label != "human listener 1"]
    assert all(cluster.alive(label) for label in survivors)

    cluster.process.send_signal(signal.SIGTERM)
    assert cluster.process.wait(30) == 0
    assert not any(cluster.alive(label) for label in cluster.pids)
    print(
        f"daphne killed: {len(result['expected'])} rows on the other listener's trail, "
        f"turns answered, {result['served']:.1f}s; every other process stopped on SIGTERM"
    )
