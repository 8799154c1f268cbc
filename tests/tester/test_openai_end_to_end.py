"""The official `openai` client against a real `manage.py serve` (SPEC §6.1): the tester
listener's OpenAI-compatible routes, each request a tester conversation with the real
assistant, whose instances answer from scripted model servers (`openai_server`); the human
listener has no such routes, and the human's own work is left as it was.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.console.api import LiveApi
from tests.support.openai_api import (
    KEY,
    SLOW_PIECES,
    WAIT_SECONDS,
    OpenAIServer,
    openai_server,
)
from tests.support.served import Served, human_left_alone, served

HELLO = [{"role": "user", "content": "hello there"}]
STOP_SECONDS = 20.0


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OpenAIServer, Served]]:
    with (
        openai_server(tmp_path_factory.mktemp("openai_end_to_end")) as endpoint,
        served(endpoint.server, answered=True) as people,
        human_left_alone(people),
    ):
        yield endpoint, people


@pytest.fixture
def endpoint(live: tuple[OpenAIServer, Served]) -> OpenAIServer:
    return live[0]


@pytest.fixture
def client(endpoint: OpenAIServer) -> Iterator[openai.OpenAI]:
    """The client as a test team configures it: a base URL and a key; no retries, so each
    refusal is seen once."""
    with openai.OpenAI(base_url=endpoint.base_url, api_key=KEY, max_retries=0) as made:
        yield made


def messages_of(endpoint: OpenAIServer, thread: int) -> list[dict[str, Any]]:
    api = LiveApi(endpoint.server.tester_url)
    try:
        return list(api.get(f"/api/chat/threads/{thread}/messages")["messages"])
    finally:
        api.close()


def test_models_are_the_instances(client: openai.OpenAI) -> None:
    assert sorted(model.id for model in client.models.list()) == [
        "assistant",
        "broken",
        "silent",
        "slow",
    ]
    assert client.models.retrieve("slow").id == "slow"


def test_a_completion_is_the_assistants_reply_as_recorded(
    client: openai.OpenAI, endpoint: OpenAIServer
) -> None:
    """The request went through the product: a tester thread, the product's prompt (the
    tester line before the words), the model's recorded name, usage and finish."""
    raw = client.chat.completions.with_raw_response.create(
        model="assistant", messages=HELLO, temperature=0.3, max_tokens=20
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "Echo: hello there"
    assert (completion.model, completion.choices[0].finish_reason) == ("assistant-model", "stop")
    assert completion.usage is not None and completion.usage.total_tokens == 13
    mosaic = (completion.model_extra or {})["mosaic"]
    assert completion.id == f"chatcmpl-{mosaic['turn']}"
    assert raw.headers["x-mosaic-thread"] == str(mosaic["thread"])
    assert raw.headers["x-mosaic-ignored-fields"] == "max_tokens, temperature"
    asked = endpoint.models["assistant"].requests[-1]
    assert "temperature" not in asked and "tester running a product test" in str(asked["messages"])
    stored = messages_of(endpoint, mosaic["thread"])
    assert [(m["from_role"], m["class"]) for m in stored] == [
        ("tester", "REQUEST"),
        ("assistant", "RESULT"),
    ]


def test_a_streamed_completion_arrives_in_pieces_then_finishes(client: openai.OpenAI) -> None:
    """Chunks built from the stored drafts, the last with finish_reason and usage."""
    stream = client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "one two three four five six seven"}],
        stream=True,
    )
    chunks = list(stream)
    texts = [chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices]
    assert "".join(texts) == "Echo: one two three four five six seven"
    assert len([text for text in texts if text]) >= 2, texts
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 11


def test_a_second_turn_continues_the_thread_it_sends_back(
    client: openai.OpenAI, endpoint: OpenAIServer
) -> None:
    first = client.chat.completions.with_raw_response.create(model="assistant", messages=HELLO)
    said = first.parse().choices[0].message.content
    second = client.chat.completions.with_raw_response.create(
        model="assistant",
        messages=[
            *HELLO,
            {"role": "assistant", "content": said},
            {"role": "user", "content": "and"},
        ],
    )
    assert second.headers["x-mosaic-thread"] == first.headers["x-mosaic-thread"]
    assert second.parse().choices[0].message.content == "Echo: and"
    # The model was given the thread's history by the product, not by the client.
    history = endpoint.models["assistant"].requests[-1]["messages"]
    assert any(message.get("content") == said for message in history)


@pytest.mark.parametrize(
    ("ask", "error", "status", "code"),
    [
        (
            {"model": "gpt-4o", "messages": HELLO},
            openai.NotFoundError,
            404,
            "model_not_found",
        ),
        (
            {"model": "assistant", "messages": [{"role": "system", "content": "x"}, *HELLO]},
            openai.BadRequestError,
            400,
            "invalid",
        ),
        (
            {
                "model": "assistant",
                "messages": [*HELLO, {"role": "assistant", "content": "Sure!"}, *HELLO],
            },
            openai.BadRequestError,
            400,
            "invalid",
        ),
        ({"model": "broken", "messages": HELLO}, openai.InternalServerError, 502, "turn-failed"),
        ({"model": "silent", "messages": HELLO}, openai.APIStatusError, 504, "timeout"),
    ],
    ids=["unknown-model", "system-message", "forged-history", "failed-turn", "timed-out"],
)
def test_each_refusal_reaches_the_client_in_openais_shape(
    client: openai.OpenAI,
    ask: dict[str, Any],
    error: type[openai.APIStatusError],
    status: int,
    code: str,
) -> None:
    with pytest.raises(error) as refused:
        client.chat.completions.create(**ask)
    assert refused.value.status_code == status
    assert isinstance(refused.value.body, dict) and refused.value.body["code"] == code


def test_the_failure_sentence_and_the_waits_thread_are_told(client: openai.OpenAI) -> None:
    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="broken", messages=HELLO)
    assert "refuses every request" in failed.value.message
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as waited:
        client.chat.completions.create(model="silent", messages=HELLO)
    assert WAIT_SECONDS <= time.monotonic() - started < WAIT_SECONDS + 5
    assert waited.value.response.headers["x-mosaic-thread"] in waited.value.message


@pytest.mark.parametrize(
    ("client_options", "error", "code"),
    [
        ({"api_key": "not-the-key"}, openai.AuthenticationError, "invalid_api_key"),
        (
            {"api_key": KEY, "default_headers": {"Sec-Fetch-Site": "cross-site"}},
            openai.PermissionDeniedError,
            "fetch-metadata-refused",
        ),
    ],
    ids=["wrong-key", "cross-site"],
)
def test_a_wrong_key_and_a_page_elsewhere_are_refused(
    endpoint: OpenAIServer,
    client_options: dict[str, Any],
    error: type[openai.APIStatusError],
    code: str,
) -> None:
    with (
        openai.OpenAI(base_url=endpoint.base_url, max_retries=0, **client_options) as other,
        pytest.raises(error) as refused,
    ):
        other.models.list()
    assert isinstance(refused.value.body, dict) and refused.value.body["code"] == code


def test_the_human_listener_answers_404_on_v1(endpoint: OpenAIServer) -> None:
    with (
        openai.OpenAI(
            base_url=f"{endpoint.server.human_url}/v1", api_key=KEY, max_retries=0
        ) as human,
        pytest.raises(openai.NotFoundError) as refused,
    ):
        human.chat.completions.create(model="assistant", messages=HELLO)
    assert refused.value.response.json() == {"error": "not-found", "detail": "No such route."}


def test_hanging_up_mid_stream_stops_the_turn(
    client: openai.OpenAI, endpoint: OpenAIServer
) -> None:
    """A client that hangs up stops the turn, as Stop does: the turn ends `stopped`, keeping
    what was written as its partial, and the run's own request to the model is cut."""
    slow = endpoint.models["slow"]
    slow.hung_up.clear()
    stream = client.chat.completions.create(model="slow", messages=HELLO, stream=True)
    thread = int(stream.response.headers["x-mosaic-thread"])
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:
        [turn] = [m for m in messages_of(endpoint, thread) if m["class"] == "REQUEST"]
        if turn["reply_state"] == "stopped":
            break
        time.sleep(0.1)
    assert turn["reply_state"] == "stopped", turn
    assert turn["partial"] and SLOW_PIECES[0] in turn["partial"]
    assert slow.hung_up.wait(STOP_SECONDS)


def test_the_humans_lists_hold_nothing_of_it_and_the_trail_its_labelled_rows(
    client: openai.OpenAI, live: tuple[OpenAIServer, Served]
) -> None:
    """R3, R16, R20: the tester's conversations are tester threads like any other."""
    _, people = live
    completion = client.chat.completions.create(model="assistant", messages=HELLO)
    thread = (completion.model_extra or {})["mosaic"]["thread"]
    threads = people.human.get("/api/chat/threads?limit=500")["threads"]
    assert thread not in {each["id"] for each in threads}
    rows = people.human.get("/api/trail?limit=500")["rows"]
    mine = [row for row in rows if row["thread"] == thread]
    assert {row["text"] for row in mine} >= {
        "tester to assistant: hello there",
        "assistant to tester: Echo: hello there",
    }
    assert {row["via"] for row in mine if row["from_role"] == "tester"} == {"api"}
    assert httpx.get(f"{people.server.human_url}/v1/models").status_code == 404
