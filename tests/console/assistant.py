"""The assistant of the browser tests' server: answered by the suite's fake model server, which
each test (or the screenshots) shapes."""

from __future__ import annotations

MODEL_NAME = "console-model"
# Seconds before a failed attempt is tried again: long enough to see the turn retrying.
RETRY_SECONDS = "4"


def assistant_settings(model_url: str) -> dict[str, str]:
    """The server's settings that send its assistant's turns to the model at `model_url`."""
    return {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": model_url,
        "MOSAIC_ASSISTANT_MODEL": MODEL_NAME,
        "MOSAIC_ASSISTANT_API_KEY": "console-test-key",
        "MOSAIC_ASSISTANT_RETRY_SECONDS": RETRY_SECONDS,
    }


# The demo business with a second instance, `reviewer`: the assistant may consult it (R23) and
# the human may talk to it (a turn asked again on it, R24). Each is answered by its own run.
WITH_REVIEWER = """
[business]
slug = "demo"
human = "ada"
tester_enabled = true
default_instance = "assistant"

[roles.assistant]
receive_from = ["human", "reviewer"]
send_to = ["human", "reviewer"]
cross_role = []

[roles.reviewer]
receive_from = ["assistant", "human"]
send_to = ["assistant", "human"]
cross_role = []

[instances.assistant]
role = "assistant"

[instances.reviewer]
role = "reviewer"
"""
