"""What the tests of the tester's OpenAI-compatible routes share (SPEC §6.1): the key they
configure, and reading a refusal whichever shape it came in."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from broker.business_file import DEMO_FILE
from tests.console.server import LiveServer, serving
from tests.support.model_servers import FakeModel, serve_fake_model

KEY = "mt-test-key-of-the-suite"


def bearer(key: str = KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def tester_key(settings: Any) -> dict[str, str]:
    """The endpoint's key configured, and the header that sends it."""
    settings.MOSAIC_TESTER_API_KEY = KEY
    return bearer()


def is_openai_path(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


def openai_error(response: httpx.Response) -> dict[str, Any]:
    """OpenAI's error body (`{"error": {"message", "type", "param", "code"}}`), checked."""
    assert response.headers.get("content-type", "").startswith("application/json"), response
    answer = response.json()
    assert set(answer) - {"mosaic"} == {"error"}, response.text
    error = answer["error"]
    assert set(error) == {"message", "type", "param", "code"}, response.text
    assert isinstance(error["message"], str) and isinstance(error["code"], str), response.text
    expected = "server_error" if response.status_code >= 500 else "invalid_request_error"
    assert error["type"] == expected, response.text
    return dict(error)


def refusal_code(response: httpx.Response) -> str:
    """The refusal's code: the product's `{"error": code}`, or OpenAI's `error.code`."""
    error = response.json()["error"]
    return str(error["code"] if isinstance(error, dict) else error)


# --- a real serve whose instances answer from scripted model servers -------------------------

# The demo business's file with an instance per kind of answer: `assistant` echoes, word by
# word; `slow` streams forty pieces a quarter second apart (a stream to hang up on); `broken`'s
# model refuses every request (a turn that fails at once); `silent`'s says nothing for a minute
# (a wait that runs out).
BUSINESS = DEMO_FILE.read_text() + "".join(
    ("" if name == "assistant" else f'\n[instances.{name}]\nrole = "assistant"\n')
    + f"""
[instances.{name}.reply]
backend = "openai"
base_url = "{{{name}}}"
model = "{name}-model"
"""
    for name in ("assistant", "slow", "broken", "silent")
)
SLOW_PIECES = [f"piece{number} " for number in range(40)]
# How long the served endpoint waits without news of a turn (MOSAIC_TESTER_API_WAIT_SECONDS).
WAIT_SECONDS = 3.0


def echo(body: dict[str, Any]) -> str:
    """The scripted model's reply: the last line of the last message, echoed (the product puts
    the tester line before the tester's own words)."""
    said = str(body["messages"][-1]["content"]).rsplit("\n", 1)[-1]
    return f"Echo: {said}"


@contextmanager
def openai_server(workdir: Path) -> Iterator[OpenAIServer]:
    """`manage.py serve` with the key set, its instances answered by the fake models above."""
    with ExitStack() as stack:
        models = {
            "assistant": FakeModel(script=echo, chunk_delay=0.15),
            "slow": FakeModel(pieces=SLOW_PIECES, chunk_delay=0.25),
            "broken": FakeModel(status=400, error_message="This model refuses every request."),
            "silent": FakeModel(delay=60),
        }
        for model in models.values():
            stack.enter_context(serve_fake_model(model))
        business = BUSINESS.format(**{name: model.url for name, model in models.items()})
        settings = {
            "MOSAIC_TESTER_API_KEY": KEY,
            "MOSAIC_TESTER_API_WAIT_SECONDS": str(WAIT_SECONDS),
            "MOSAIC_ASSISTANT_API_KEY": "unused",
            "MOSAIC_ASSISTANT_ATTEMPTS": "1",
        }
        server = stack.enter_context(
            serving(
                workdir,
                f"mosaic_openai_{os.getpid()}_{workdir.name}",
                settings=settings,
                business_file=business,
            )
        )
        yield OpenAIServer(server=server, models=models)


@dataclass
class OpenAIServer:
    server: LiveServer
    models: dict[str, FakeModel]

    @property
    def base_url(self) -> str:
        return f"{self.server.tester_url}/v1"
