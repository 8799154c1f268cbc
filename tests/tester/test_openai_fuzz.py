"""No body makes a 500 on the tester's OpenAI-compatible endpoint (SPEC §6, §6.1).

Its routes are described by OpenAI, not by the listener's own schema, so they are fuzzed here
rather than in `tests/chat/test_schema.py`: bodies near a real request and bodies that are any
JSON at all, sent with the key through the listener's real application. Every answer is below
500 — or the 504 of a turn no runner answers here — and every refusal is in OpenAI's shape.
`MOSAIC_FUZZ_EXAMPLES` scales it as it scales the schema's fuzzing (`make fuzz`).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.listeners import TESTER, ListenerClient
from tests.support.openai_api import bearer, openai_error, tester_key  # noqa: F401

EXAMPLES = int(os.environ.get("MOSAIC_FUZZ_EXAMPLES", "10")) * 20

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
parts = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image_url", ""])},
        optional={"text": st.text(max_size=12) | json_values},
    ),
    max_size=3,
)
message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "system", "developer", "tool", "x"])
        | json_values,
        "content": st.text(max_size=20) | parts | json_values,
    },
    optional={
        "name": st.text(max_size=6) | json_values,
        "tool_calls": json_values,
        "refusal": st.none(),
    },
)
near_requests = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["assistant", "nobody", ""]) | json_values,
        "messages": st.lists(message, max_size=4) | json_values,
    },
    optional={
        "stream": st.booleans() | json_values,
        "stream_options": st.fixed_dictionaries({}, optional={"include_usage": json_values})
        | json_values,
        "n": st.sampled_from([1, 2, 0]) | json_values,
        "tools": json_values,
        "tool_choice": st.sampled_from(["none", "auto", "required"]) | json_values,
        "temperature": json_values,
        "max_tokens": json_values,
    },
)
headers = st.fixed_dictionaries(
    {},
    optional={
        "X-Mosaic-Thread": st.sampled_from(["1", "0", "x", "9" * 30]),
        "X-Mosaic-Project": st.sampled_from(["openai", "", " padded ", "evals"]),
        "Idempotency-Key": st.sampled_from(["k", "", "\x7f"]),
    },
)


@pytest.mark.usefixtures("tester_key", "business")
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=near_requests | json_values, sent=headers)
def test_any_body_is_answered_below_500_and_refused_in_openais_shape(
    settings_override: Any, body: Any, sent: dict[str, str]
) -> None:
    response = ListenerClient(TESTER).request(
        "POST",
        "/v1/chat/completions",
        content=json.dumps(body).encode(),
        headers={**bearer(), "Content-Type": "application/json", **sent},
        write_headers=False,
    )
    shown = (body, sent, response.status_code, response.text[:300])
    assert response.status_code < 500 or response.status_code == 504, shown
    if response.status_code >= 400:
        openai_error(response)


@pytest.fixture
def settings_override(settings: Any) -> None:
    """No runner answers here: a completion's wait ends at its first read."""
    settings.MOSAIC_TESTER_API_WAIT_SECONDS = 0
