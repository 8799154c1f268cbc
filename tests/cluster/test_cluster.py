"""Scale-out (SPEC §9): the same code as N daphne processes per listener and M runners on
PostgreSQL and Redis. A Console on one human listener sees rows sent through the other and
through the tester listener; every turn is answered exactly once; a stop sent through one
listener ends a run that a runner process holds."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.clients import Api, Follower
from tests.cluster.services import SLOW
from tests.mosaic.test_body_limit import HUGE, connect, head, read_response
from tests.support.cluster import PASSWORD, SERVICES, Cluster

pytestmark = SERVICES


def ws(url: str) -> str:
    return url.replace("http://", "ws://")


async def human_on(cluster: Cluster) -> tuple[Api, Api]:
    """The human signed in once, on both human listeners (sessions live in the database)."""
    first = Api(cluster.human_urls[0])
    await first.sign_in("ada", PASSWORD)
    second = Api(cluster.human_urls[1], cookies=httpx.Cookies(first.client.cookies))
    return first, second


async def project_id(api: Api, name: str) -> int:
    answer = await api.post("/api/chat/projects", {"name": name})
    if answer.status_code == 201:
        return int(answer.json()["project"]["id"])
    assert answer.json()["error"] == "project-exists", answer.text
    projects = (await api.ok("/api/chat/projects"))["projects"]
    return next(int(p["id"]) for p in projects if p["name"] == name)


async def replies_by_turn(api: Api, threads: list[int]) -> Counter[int]:
    """RESULT messages per turn they answer, over the threads' whole history."""
    counts: Counter[int] = Counter()
    for thread in threads:
        for message in await api.all_rows(f"/api/chat/threads/{thread}/messages", "messages"):
            if message["class"] == "RESULT":
                counts[message["in_reply_to"]] += 1
    return counts


async def wait_answered(
    api: Api, threads: list[int], turns: set[int], timeout: float
) -> Counter[int]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        counts = await replies_by_turn(api, threads)
        if turns <= set(counts):
            return counts
        assert loop.time() < deadline, f"turns never answered: {sorted(turns - set(counts))[:10]}"
        await asyncio.sleep(0.2)


def test_cluster_console_on_one_listener_sees_rows_sent_through_the_others(
    cluster: Cluster,
) -> None:
    """A trail on human listener A receives, live and in id order, the turns sent through
    human listener B, the tester's turns sent through the tester listener (labelled, R16),
    and the runners' replies; exactly the rows of the database's trail."""

    async def scenario() -> dict[str, Any]:
        a, b = await human_on(cluster)
        tester = Api(cluster.tester_url)
        start = (await a.all_rows("/api/trail", "rows") or [{"id": 0}])[-1]["id"]
        follower = Follower(
            ws(cluster.human_urls[0]), cluster.human_urls[0], dict(a.client.cookies), after=start
        )
        follower.start()
        await asyncio.wait_for(follower.live.wait(), 10)
        project = await project_id(b, "scale-out")
        human_thread = await b.thread(project, "through B")
        tester_thread = await tester.thread(project, "through the tester")
        sent = []
        for index in range(5):
            sent.append((await b.send(human_thread, f"human turn {index}"))[0])
            sent.append((await tester.send(tester_thread, f"tester turn {index}"))[0])
        await wait_answered(b, [human_thread], set(sent[0::2]), 30)
        await wait_answered(tester, [tester_thread], set(sent[1::2]), 30)
        rows = [r for r in await a.all_rows("/api/trail", "rows") if r["id"] > start]
        await follower.wait_for({r["id"] for r in rows}, 10)
        await follower.stop()
        for api in (a, b, tester):
            await api.aclose()
        return {"rows": rows, "follower": follower}

    result = asyncio.run(scenario())
    follower, rows = result["follower"], result["rows"]
    assert follower.received == [r["id"] for r in rows]  # in id order, none twice, none missed
    texts = list(follower.texts.values())
    assert sum(t.startswith("human to assistant: human turn") for t in texts) == 5
    assert sum(t.startswith("tester to assistant: tester turn") for t in texts) == 5
    assert sum(t.startswith("assistant to tester: ") for t in texts) == 5
    assert sum(t.startswith("assistant to human: ") for t in texts) == 5


def test_cluster_every_turn_answered_exactly_once(cluster: Cluster) -> None:
    """SPEC §7 across processes: 60 turns sent at once through both human listeners and the
    tester listener, in 12 threads, are answered by the two runner processes: one RESULT each,
    in the turn's thread, to its sender."""

    async def scenario() -> tuple[Counter[int], list[int], float]:
        a, b = await human_on(cluster)
        tester = Api(cluster.tester_url)
        project = await project_id(a, "exactly once")
        plan = [a, b, tester] * 4
        threads = [await api.thread(project, f"once {i}") for i, api in enumerate(plan)]
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def talk(api: Api, thread: int) -> list[int]:
            return [(await api.send(thread, f"turn {turn}"))[0] for turn in range(5)]

        sent = await asyncio.gather(*(talk(api, t) for api, t in zip(plan, threads, strict=True)))
        turns = {turn for batch in sent for turn in batch}
        sides = list(zip(plan, threads, sent, strict=True))
        human_threads = [thread for api, thread, _ in sides if api is not tester]
        tester_threads = [thread for api, thread, _ in sides if api is tester]
        human_turns = {turn for api, _, batch in sides if api is not tester for turn in batch}
        counts = await wait_answered(a, human_threads, human_turns, 60)
        counts += await wait_answered(tester, tester_threads, turns - human_turns, 60)
        elapsed = loop.time() - started
        for api in (a, b, tester):
            await api.aclose()
        return counts, sorted(turns), elapsed

    counts, turns, elapsed = asyncio.run(scenario())
    assert len(turns) == 60
    assert sorted(counts) == turns
    assert set(counts.values()) == {1}
    print(f"exactly once: 60 turns through 3 listeners answered once each in {elapsed:.1f}s")


def ops_metric(cluster: Cluster, name: str, labels: dict[str, str]) -> float:
    """A sample of the ops listener's `/metrics`, summed over every process by the listener."""
    text = httpx.get(f"{cluster.ops_url}/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def test_cluster_metrics_add_up_every_process(cluster: Cluster) -> None:
    """Two turns sent through each human listener process and the tester listener
    process, answered by the runner processes: the ops listener's `/metrics` counts all of
    them, not one process's share."""
    human, tester = {"listener": "human"}, {"listener": "tester"}
    answered = {"state": "answered"}
    before = [ops_metric(cluster, "mosaic_sends_total", labels) for labels in (human, tester)]
    answered_before = ops_metric(cluster, "mosaic_turns_total", answered)

    async def scenario() -> None:
        a, b = await human_on(cluster)
        tester_api = Api(cluster.tester_url)
        project = await project_id(a, "metrics")
        sides = [(a, await a.thread(project, "m-a")), (b, await b.thread(project, "m-b"))]
        sides.append((tester_api, await tester_api.thread(project, "m-tester")))
        for api, thread in sides:
            turns = {(await api.send(thread, f"turn {n}"))[0] for n in range(2)}
            await wait_answered(api, [thread], turns, 60)
        for api, _ in sides:
            await api.aclose()

    asyncio.run(scenario())
    after = [ops_metric(cluster, "mosaic_sends_total", labels) for labels in (human, tester)]
    assert after == [before[0] + 4, before[1] + 2]
    assert ops_metric(cluster, "mosaic_turns_total", answered) >= answered_before + 6


def test_cluster_stop_through_one_listener_ends_a_run_a_runner_process_holds(
    cluster: Cluster,
) -> None:
    """R13 across processes: a turn sent through human listener A is held mid-turn by a runner
    process; the tester's stop (tester listener) does not touch it (`not-held`); the human's
    stop sent through human listener B ends it: the runner abandons the model call and no
    reply lands, while the next turn in the thread is answered."""

    async def scenario() -> None:
        a, b = await human_on(cluster)
        tester = Api(cluster.tester_url)
        project = await project_id(a, "stop")
        thread = await a.thread(project, "held")
        body = f"{SLOW} think long"
        turn, _ = await a.send(thread, body)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while body not in cluster.model.held:
            assert loop.time() < deadline, "no runner took the turn"
            await asyncio.sleep(0.05)

        refused = await tester.post("/api/chat/stop", {})
        assert (refused.status_code, refused.json()["error"]) == (409, "not-held")
        stopped = (await b.ok("/api/chat/stop", {}))["stopped"]
        assert [s["thread"] for s in stopped] == [thread]
        run = stopped[0]["run"]
        assert any(run.startswith(f"{name}-") for name in cluster.runner_names), run

        deadline = loop.time() + 10
        while body not in cluster.model.abandoned:
            assert loop.time() < deadline, "the runner did not abandon the stopped turn"
            await asyncio.sleep(0.05)
        after, _ = await b.send(thread, "and now?")
        counts = await wait_answered(a, [thread], {after}, 30)
        assert turn not in counts
        for api in (a, b, tester):
            await api.aclose()

    asyncio.run(scenario())


def test_cluster_listeners_refuse_an_oversized_body_before_reading_it(cluster: Cluster) -> None:
    """Every listener process of the cluster is `serve`'s bounded server: a
    declared length over the limit is answered 413 `too-large` to its headers alone."""
    for url in [*cluster.human_urls, cluster.tester_url]:
        port = urlsplit(url).port
        assert port is not None
        with connect(port) as client:
            client.sendall(head(port, "/api/chat/projects", {"Content-Length": str(HUGE)}))
            status, _, body = read_response(client)
        assert (status, json.loads(body)["error"]) == (413, "too-large"), url
