"""Reply backends (SPEC §7, `runner.backends`): the one line both use, and the backend the
settings choose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from runner.backends import backend_from_settings
from runner.backends.chat_completions import ChatCompletionsBackend
from runner.backends.offline import OfflineBackend
from runner.turns import TESTER_LINE

ROOT = Path(__file__).resolve().parents[2]

TESTER_LINE_IN_SPEC = "This message is from a tester running a product test; it authorizes nothing."


def test_tester_line_is_spec_line() -> None:
    """SPEC §7: the one constant both backends use is the spec's line, exactly."""
    assert TESTER_LINE == TESTER_LINE_IN_SPEC


# --- choosing a backend -------------------------------------------------------------------


def test_backend_from_settings_default_is_offline_with_configured_pace(settings) -> None:
    settings.MOSAIC_OFFLINE_PACE = 0.25
    backend = backend_from_settings()
    assert backend.name == "offline"
    assert isinstance(backend, OfflineBackend) and backend.pace == 0.25


def test_backend_from_settings_openai_reads_every_setting(settings) -> None:
    settings.MOSAIC_ASSISTANT_BACKEND = "openai"
    settings.MOSAIC_ASSISTANT_BASE_URL = "http://127.0.0.1:8080/v1"
    settings.MOSAIC_ASSISTANT_MODEL = "llama"
    settings.MOSAIC_ASSISTANT_API_KEY = "k"
    settings.MOSAIC_ASSISTANT_CONNECT_TIMEOUT = 4.0
    settings.MOSAIC_ASSISTANT_IDLE_TIMEOUT = 90.0
    settings.MOSAIC_ASSISTANT_MAX_TOKENS = 512
    settings.MOSAIC_ASSISTANT_TEMPERATURE = 0.7
    backend = backend_from_settings()
    assert isinstance(backend, ChatCompletionsBackend)
    assert (backend.base_url, backend.model, backend.api_key) == (
        "http://127.0.0.1:8080/v1",
        "llama",
        "k",
    )
    assert (backend.connect_timeout, backend.idle_timeout) == (4.0, 90.0)
    assert (backend.max_tokens, backend.temperature) == (512, 0.7)


@pytest.mark.parametrize(
    ("name", "model"),
    [("openai", ""), ("gpt", "m"), ("", "m")],
    ids=["no-model", "unknown", "empty"],
)
def test_backend_from_settings_misconfigured_fails_closed(settings, name: str, model: str) -> None:
    settings.MOSAIC_ASSISTANT_BACKEND = name
    settings.MOSAIC_ASSISTANT_MODEL = model
    with pytest.raises(ImproperlyConfigured):
        backend_from_settings()


@pytest.mark.parametrize(
    ("backend", "setting", "value"),
    [
        ("openai", "MOSAIC_ASSISTANT_IDLE_TIMEOUT", 0.0),
        ("openai", "MOSAIC_ASSISTANT_MAX_TOKENS", 0),
        ("offline", "MOSAIC_OFFLINE_PACE", -1.0),
    ],
)
def test_backend_from_settings_invalid_value_fails_closed(
    settings, backend: str, setting: str, value: float
) -> None:
    settings.MOSAIC_ASSISTANT_BACKEND = backend
    settings.MOSAIC_ASSISTANT_MODEL = "m"
    setattr(settings, setting, value)
    with pytest.raises(ImproperlyConfigured, match="assistant backend's settings"):
        backend_from_settings()


def settings_in_fresh_process(environment: dict[str, str]) -> dict[str, object]:
    names = [
        "MOSAIC_ASSISTANT_IDLE_TIMEOUT",
        "MOSAIC_ASSISTANT_CONNECT_TIMEOUT",
        "MOSAIC_ASSISTANT_MAX_TOKENS",
        "MOSAIC_ASSISTANT_TEMPERATURE",
        "MOSAIC_OFFLINE_PACE",
    ]
    code = (
        "import json, mosaic.settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {names!r}}}))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MOSAIC_")}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, **environment},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def test_settings_old_whole_reply_timeout_is_read_as_idle_timeout() -> None:
    """Configurations written for `MOSAIC_ASSISTANT_TIMEOUT` keep working: it is the idle
    timeout's fallback; `MOSAIC_ASSISTANT_IDLE_TIMEOUT` wins when both are set."""
    defaults = settings_in_fresh_process({})
    assert defaults == {
        "MOSAIC_ASSISTANT_IDLE_TIMEOUT": 60.0,
        "MOSAIC_ASSISTANT_CONNECT_TIMEOUT": 10.0,
        "MOSAIC_ASSISTANT_MAX_TOKENS": None,
        "MOSAIC_ASSISTANT_TEMPERATURE": None,
        "MOSAIC_OFFLINE_PACE": 0.04,
    }
    old = settings_in_fresh_process({"MOSAIC_ASSISTANT_TIMEOUT": "120"})
    assert old["MOSAIC_ASSISTANT_IDLE_TIMEOUT"] == 120.0
    both = settings_in_fresh_process(
        {"MOSAIC_ASSISTANT_TIMEOUT": "120", "MOSAIC_ASSISTANT_IDLE_TIMEOUT": "45"}
    )
    assert both["MOSAIC_ASSISTANT_IDLE_TIMEOUT"] == 45.0
