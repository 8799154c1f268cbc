"""A conversation-test suite on a real model (`make model-check`): SmolLM2-135M-Instruct on
llama-cpp-python's server answers as the assistant AND grades as the judge and plays the
simulated user, through a real `manage.py serve` and `testassistant`.

A 135M-parameter model is a poor assistant and a worse judge, so this records the verdicts
rather than requiring them: what it proves is that every part of a judged, repeated, simulated
run works against a real OpenAI-compatible server — each case gets a verdict, the judge's
answers are parsed or refused as the JSON they must be, the run is stored, and the report is
written. Marked `model`: the suite leaves it out; a missing .venv-model fails it, never skips.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.server import LiveServer
from tests.support.end_to_end import serve_with_model
from tests.support.model_servers import LlamaServer
from tests.support.suite_runs import run_testassistant, write_suite

pytestmark = pytest.mark.model

ALIAS = "smollm2"
CONTEXT_TOKENS = 2048

SUITE = """
name = "smollm2"
project = "model-check"

[judge]
base_url = "{url}"
model = "{alias}"
votes = 3

[[cases]]
name = "greets"
repeat = 3
pass_rate = 0.6

[[cases.turns]]
send = "Say hello."
expect = {{ within = 120, finish_reason = "stop", judge = "The reply is a greeting." }}

[[cases]]
name = "capital as JSON"
repeat = 2
pass_rate = 0.5

[[cases.turns]]
send = 'Answer only with JSON like {{"city": "..."}}: what is the capital of France?'
expect = {{ within = 120, json_schema = {{ type = "object", required = ["city"] }} }}

[[cases]]
name = "asks for the time"

[cases.simulate]
persona = "a polite visitor"
goal = "the assistant says hello back"
max_turns = 2
within = 120
"""


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(workdir=tmp_path_factory.mktemp("llama_suite"), context=CONTEXT_TOKENS)
    try:
        server.start()
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(llama: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    environment = {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": llama.url,
        "MOSAIC_ASSISTANT_MODEL": ALIAS,
        "MOSAIC_ASSISTANT_API_KEY": "",
        "MOSAIC_ASSISTANT_CONTEXT_TOKENS": str(CONTEXT_TOKENS),
        "MOSAIC_ASSISTANT_MAX_TOKENS": "64",
    }
    with serve_with_model(tmp_path_factory.mktemp("model_suite"), environment) as served:
        yield served


def test_model_suite_with_smollm2_as_assistant_and_judge_records_its_verdicts(
    llama: LlamaServer, server: LiveServer, tmp_path: Path
) -> None:
    path = write_suite(tmp_path, SUITE.format(url=llama.url, alias=ALIAS))
    html = tmp_path / "model-check.html"
    ran = run_testassistant(
        path, "--url", server.tester_url, "--json", "--jobs", "2", "--html", html
    )
    # A verdict for every case, whichever it is: the status says only whether all passed.
    assert ran.status in (0, 1), ran.out + ran.error
    *cases, summary = ran.json_lines()
    assert [case["case"] for case in sorted(cases, key=lambda c: c["case"])] == [
        "asks for the time",
        "capital as JSON",
        "greets",
    ]
    for case in cases:
        assert case["verdict"] in ("pass", "flaky", "fail", "error")
        assert case["repeat_count"] == {"greets": 3, "capital as JSON": 2}.get(case["case"], 1)
        print(
            f"\n{case['case']}: {case['verdict']} {case['passed_repeats']}/{case['repeat_count']}"
            f" — {case['expected'] or ''} {case['actual'] or case['detail'] or ''}"[:400]
        )
        for repeat in case["repeats"]:
            for turn in repeat["turns"]:
                votes = "; ".join(json.dumps(vote) for vote in turn["judge"])
                print(f"  {turn['seconds']:.1f} s {turn['sent'][:40]!r} → {votes}"[:300])
    stored = summary["summary"]
    assert sum(stored[verdict] for verdict in ("pass", "flaky", "fail", "error")) == 3
    assert html.read_text().count('class="case"') == 3
    print(f"\nsummary: {json.dumps(stored)}; report {html} ({os.path.getsize(html)} bytes)")
