"""Peers no one here wrote, testing the assistant through the tester's OpenAI-compatible
endpoint (SPEC §6.1): promptfoo from the npm registry running the example in
`examples/promptfoo/`, and LiteLLM's proxy with the tester listener as its upstream model.

Both are installed by `make test` (.venv-promptfoo, .venv-litellm); a missing one fails these
tests, never skips them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.console.api import LiveApi
from tests.support.model_servers import ROOT, LiteLLMProxy
from tests.support.openai_api import KEY, OpenAIServer, openai_server

PROMPTFOO_HOME = ROOT / ".venv-promptfoo"
PROMPTFOO = PROMPTFOO_HOME / "node_modules" / ".bin" / "promptfoo"
EXAMPLE = ROOT / "examples" / "promptfoo" / "promptfooconfig.yaml"
PEER_SECONDS = 300


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenAIServer]:
    with openai_server(tmp_path_factory.mktemp("openai_peers")) as served:
        yield served


def threads_of_project(endpoint: OpenAIServer, name: str) -> list[dict[str, object]]:
    api = LiveApi(endpoint.server.tester_url)
    try:
        [project] = [p for p in api.get("/api/chat/projects")["projects"] if p["name"] == name]
        found = api.get(f"/api/chat/threads?project={project['id']}&limit=500")["threads"]
        return list(found)
    finally:
        api.close()


def test_promptfoo_evaluates_the_example_through_the_tester(
    endpoint: OpenAIServer, tmp_path: Path
) -> None:
    """`npx promptfoo eval` on the example, as its comment says to run it: every case passes,
    each a tester thread of its own in the project the example names."""
    if not PROMPTFOO.exists():
        pytest.fail(
            f"promptfoo is not installed in {PROMPTFOO_HOME}: `make test` installs it "
            "(Node.js from requirements-promptfoo.txt, then examples/promptfoo/package-lock.json).",
            pytrace=False,
        )
    output = tmp_path / "results.json"
    environment = {
        "PATH": f"{PROMPTFOO_HOME / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        "PROMPTFOO_CONFIG_DIR": str(tmp_path / "promptfoo"),
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_DISABLE_SHARING": "1",
        "NO_COLOR": "1",
        "MOSAIC_OPENAI_BASE_URL": endpoint.base_url,
        "MOSAIC_TESTER_API_KEY": KEY,
    }
    ran = subprocess.run(
        [
            str(PROMPTFOO_HOME / "bin" / "npx"),
            "--prefix",
            str(PROMPTFOO_HOME),
            "--no-install",
            "promptfoo",
            "eval",
            *("-c", str(EXAMPLE), "-o", str(output)),
            "--no-cache",
            "--no-progress-bar",
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=PEER_SECONDS,
    )
    assert output.exists(), ran.stdout[-3000:] + ran.stderr[-3000:]
    results = json.loads(output.read_text())["results"]
    cases = results["results"]
    assert results["stats"]["errors"] == 0 and results["stats"]["failures"] == 0, [
        (case.get("error"), case["response"]) for case in cases
    ]
    assert results["stats"]["successes"] == len(cases) >= 2
    assert {case["response"]["output"] for case in cases} == {
        "Echo: Hello there",
        "Echo: Please say: refunds need a receipt",
    }
    threads = threads_of_project(endpoint, "promptfoo example")
    assert len(threads) >= len(cases) and {t["owner"] for t in threads} == {"tester"}


@pytest.fixture(scope="module")
def proxy(
    endpoint: OpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiteLLMProxy]:
    """LiteLLM's proxy serving `mosaic-assistant`, whose upstream is the tester listener."""
    upstream = {
        "model": "openai/assistant",
        "api_base": endpoint.base_url,
        "api_key": KEY,
        "extra_headers": {"X-Mosaic-Project": "through litellm"},
    }
    proxied = LiteLLMProxy(
        workdir=tmp_path_factory.mktemp("litellm_upstream"),
        config={
            "model_list": [{"model_name": "mosaic-assistant", "litellm_params": upstream}],
            "litellm_settings": {"num_retries": 0, "request_timeout": 60},
        },
    )
    try:
        proxied.start()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield proxied
    finally:
        proxied.stop()


def test_litellm_relays_a_completion_and_a_stream_from_the_tester(
    proxy: LiteLLMProxy, endpoint: OpenAIServer
) -> None:
    """A client of the proxy reaches the assistant through the product: the reply is the
    instance's, streamed as well as whole, and each request is a tester thread."""
    with openai.OpenAI(base_url=proxy.url, api_key=proxy.key, max_retries=0) as client:
        whole = client.chat.completions.create(
            model="mosaic-assistant", messages=[{"role": "user", "content": "via the proxy"}]
        )
        streamed = client.chat.completions.create(
            model="mosaic-assistant",
            messages=[{"role": "user", "content": "streamed via the proxy"}],
            stream=True,
        )
        text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices)
    assert whole.choices[0].message.content == "Echo: via the proxy"
    assert text == "Echo: streamed via the proxy"
    threads = threads_of_project(endpoint, "through litellm")
    assert len(threads) == 2 and {t["owner"] for t in threads} == {"tester"}
