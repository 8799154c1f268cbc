"""The LiteLLM proxy as a conversation test's judge: a real OpenAI-compatible server, asked
with its key named by `api_key_env`, its verdict and reason carried into the report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.model_servers import JUDGE_VERDICT, LiteLLMPeer
from tests.support.served import Served, human_left_alone
from tests.support.suite_runs import run_testassistant, write_suite

SUITE = """
name = "judged by litellm"
project = "qa"

[judge]
base_url = "{url}"
model = "judge"
api_key_env = "PROXY_JUDGE_KEY"

[[cases]]
name = "polite greeting"

[[cases.turns]]
send = "hello"
expect = {{ icontains = ["hello"], judge = "Greets the user politely" }}
"""


@pytest.fixture
def live(suite_server: Served) -> Iterator[Served]:
    with human_left_alone(suite_server):
        yield suite_server


def test_run_with_litellm_as_the_judge_keeps_its_reason(
    live: Served, litellm: LiteLLMPeer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROXY_JUDGE_KEY", litellm.proxy.key)
    path = write_suite(tmp_path, SUITE.format(url=litellm.proxy.url))
    ran = run_testassistant(path, "--url", live.url, "--json")
    assert ran.status == 0, ran.out + ran.error
    case, _summary = ran.json_lines()
    assert case["verdict"] == "pass"
    verdict = json.loads(JUDGE_VERDICT)
    assert case["repeats"][0]["turns"][0]["judge"] == [verdict | {"valid": True}]


def test_run_with_a_wrong_key_for_the_judge_is_an_error(
    live: Served, litellm: LiteLLMPeer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy refuses a key it does not know: the case is `error`, never a pass."""
    monkeypatch.setenv("PROXY_JUDGE_KEY", "sk-not-the-proxys")
    path = write_suite(tmp_path, SUITE.format(url=litellm.proxy.url))
    ran = run_testassistant(path, "--url", live.url, "--json")
    assert ran.status == 1, ran.out + ran.error
    case, _summary = ran.json_lines()
    assert (case["verdict"], case["error"]) == ("error", "judge")
    assert case["detail"].startswith(
        f"the judge judge at {litellm.proxy.url}/chat/completions answered 4"
    )
