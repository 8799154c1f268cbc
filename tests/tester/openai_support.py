"""What the tests of the tester's OpenAI-compatible routes share (SPEC §6.1): the key they
configure, and reading a refusal whichever shape it came in."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

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
