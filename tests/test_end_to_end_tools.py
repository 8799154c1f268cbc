"""An assistant that acts, end to end (SPEC §7.2): a real `manage.py serve` whose runner asks
the LiteLLM proxy for `acting-upstream`, a model that asks for one `create_task` call and, told
its result, answers in words; spoken to over HTTP and WebSockets from both listeners.

The human's turn makes its task; the tester's is refused (R15) and the model told. Each owner's
thread socket shows the call start and end, the messages API carries the step, and the other
side sees none of it but, for the human, the tester's step as a labelled trail row (R16, R20).

LiteLLM that cannot start fails these tests; nothing here is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.console.server import LiveServer
from tests.support.end_to_end import (
    Frame,
    Side,
    read_quiet,
    read_until,
    reply_to,
    result_of,
    serve_with_model,
    sockets,
    turn_record,
)
from tests.support.model_servers import ACTING_REPLY, LiteLLMPeer


@pytest.fixture(scope="module")
def server(litellm: LiteLLMPeer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    environment = {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": litellm.proxy.url,
        "MOSAIC_ASSISTANT_MODEL": "acting-upstream",
        "MOSAIC_ASSISTANT_API_KEY": litellm.proxy.key,
        "MOSAIC_ASSISTANT_CONNECT_TIMEOUT": "5",
        "MOSAIC_ASSISTANT_IDLE_TIMEOUT": "10",
    }
    with serve_with_model(tmp_path_factory.mktemp("end_to_end_tools"), environment) as served:
        yield served


def step_frames(frames: list[Frame], turn: int) -> list[dict]:
    return [f["step"] for f in frames if f["type"] == "reply.step" and f["in_reply_to"] == turn]


def test_serve_human_turn_makes_its_task_and_tester_turn_is_refused_each_seen_by_its_owner(
    server: LiveServer,
) -> None:
    human, tester = Side.human(server), Side.tester(server)
    try:
        project = human.api.create_project("acting")
        human_thread = human.api.create_thread(project, "human's booking")
        tester_thread = tester.api.create_thread(project, "tester's booking")

        async def scenario() -> dict[str, list[Frame]]:
            async with sockets(
                human.socket(f"/ws/chat/threads/{human_thread}/"),
                tester.socket(f"/ws/chat/threads/{tester_thread}/"),
                human.socket("/ws/trail/"),
                tester.socket("/ws/trail/"),
            ) as (human_chat, tester_chat, human_trail, tester_trail):
                turns["human"] = human.api.send(human_thread, "Book the photographer")
                turns["tester"] = tester.api.send(tester_thread, "Book the photographer")
                seen = {
                    "human": await read_until(human_chat, result_of(turns["human"]), "reply"),
                    "tester": await read_until(tester_chat, result_of(turns["tester"]), "reply"),
                }
                for name, socket in (
                    ("human", human_chat),
                    ("tester", tester_chat),
                    ("human trail", human_trail),
                    ("tester trail", tester_trail),
                ):
                    seen[name] = seen.get(name, []) + await read_quiet(socket)
                return seen

        turns: dict[str, int] = {}
        seen = asyncio.run(scenario())

        expected = {"human": ("ok", None), "tester": ("refused", "invalid")}
        for side, thread in (("human", human_thread), ("tester", tester_thread)):
            owner = human if side == "human" else tester
            live = step_frames(seen[side], turns[side])
            # The call ends shown with its outcome; shown running before, when a read of the
            # socket fell between its start and its end (a quick call's start is read with its
            # end, as a quick reply's drafts are).
            assert [step["outcome"] for step in live[:-1]] in ([], [None]), live
            assert live[-1]["outcome"] == expected[side][0], live
            assert {step["call_id"] for step in live} == {"call_up"}
            messages = owner.messages(thread)
            assert reply_to(messages, turns[side])["body"] == ACTING_REPLY
            [step] = turn_record(messages, turns[side])["steps"]
            assert (step["tool"], step["arguments"]) == ("create_task", {"title": "relayed"})
            assert (step["outcome"], step["code"]) == expected[side]
        human_step = turn_record(human.messages(human_thread), turns["human"])["steps"][0]
        assert set(human_step["result"]) == {"task", "title"}
        tester_step = turn_record(tester.messages(tester_thread), turns["tester"])["steps"][0]
        assert "test conversation" in tester_step["result"]["detail"]

        # R20: the tester's trail shows its own step only; the human's shows both, labelled.
        def step_rows(frames: list[Frame]) -> list[dict]:
            rows = [f["row"] for f in frames if f["type"] == "trail.row"]
            return [row for row in rows if row["kind"] == "step"]

        assert {row["thread"] for row in step_rows(seen["tester trail"])} == {tester_thread}
        human_rows = step_rows(seen["human trail"])
        assert {row["thread"] for row in human_rows} == {human_thread, tester_thread}
        labels = {row["thread"]: row["text"].split(":")[0] for row in human_rows}
        assert labels == {
            human_thread: "assistant to human",
            tester_thread: "assistant to tester",
        }
    finally:
        human.close()
        tester.close()
