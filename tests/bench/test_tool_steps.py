"""P9: the fake model's calling mode, read as the product's backend reads it, and one small run
of the scenario (bench.fakemodel, bench.scenarios.p9_tool_steps)."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bench import fakemodel
from bench import processes as proc
from bench.harness import Harness
from bench.plans import QUICK
from bench.scenarios import p9_tool_steps
from runner.backends.chat_completions import ReplySoFar, read_completion


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": '{"outcome": "ok"}'}


@pytest.fixture
def calling_model() -> Iterator[str]:
    """The fake model with two calls a turn, on a port of its own."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), fakemodel.handler(0.0, calls=2))
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    server.shutdown()
    server.server_close()


def asked(url: str, messages: list[dict[str, Any]]) -> ReplySoFar:
    """The model's answer to `messages`, as the `openai` backend reads a whole completion."""
    request = urllib.request.Request(
        url,
        data=json.dumps({"model": "bench", "messages": messages}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        reply = ReplySoFar(started=0.0)
        read_completion(answer.read(), reply)
    return reply


def test_fakemodel_calls_create_task_once_a_request_then_answers_in_words(
    calling_model: str,
) -> None:
    turn = [{"role": "system", "content": "be brief"}, user("do it")]
    first = asked(calling_model, turn).tool_calls(1)
    assert [(c.name, json.loads(c.arguments)) for c in first] == [
        ("create_task", {"title": "bench task"})
    ]
    second = asked(calling_model, [*turn, tool_result(first[0].call_id)]).tool_calls(2)
    assert len(second) == 1 and second[0].call_id != first[0].call_id
    done = [*turn, tool_result(first[0].call_id), tool_result(second[0].call_id)]
    final = asked(calling_model, done)
    assert final.tool_calls(3) == [] and final.reply().text == fakemodel.REPLY


def test_fakemodel_counts_only_the_results_of_the_turn_it_answers() -> None:
    """A thread's earlier turn with its results does not end the calls of the next one."""
    earlier = [user("first"), tool_result("a"), tool_result("b"), {"role": "assistant"}]
    message, finish_reason = fakemodel.answer({"messages": [*earlier, user("second")]}, 2)
    assert finish_reason == "tool_calls" and message["tool_calls"][0]["id"] == "call_bench_1"


def test_fakemodel_without_calls_answers_in_words_as_p5_wants() -> None:
    message, finish_reason = fakemodel.answer({"messages": [user("hello")]}, 0)
    assert (message, finish_reason) == ({"role": "assistant", "content": "bench reply"}, "stop")


def test_p9_turn_cpu_runs_a_runner_whose_every_turn_makes_its_tasks(tmp_path: Path) -> None:
    """A few turns through a real `runassistant`: `turn_cpu` fails unless each turn is
    answered with its two `ok` steps, and the runner's CPU is read over them."""
    template = tmp_path / "product.template"
    proc.prepare_product(f"sqlite:///{template}")
    harness = Harness(QUICK, tmp_path)
    try:
        spent = p9_tool_steps.turn_cpu(harness, template, calls=2, turns=4, threads=2)
    finally:
        harness.cleanup()
    assert 0 < spent < 5
