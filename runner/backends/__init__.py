"""Reply backends, chosen by `MOSAIC_ASSISTANT_BACKEND`: `offline` (default) or `openai`.

An instance's own reply settings (the business file's `[instances.NAME.reply]`) override the
process's `MOSAIC_ASSISTANT_*` settings key by key (`backend_for`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from runner.backends.base import (
    Draft,
    Reply,
    ReplyBackend,
    ReplyFailed,
    TurnCancelled,
    TurnTools,
    no_drafts,
)

__all__ = [
    "Draft",
    "Reply",
    "ReplyBackend",
    "ReplyFailed",
    "TurnCancelled",
    "TurnTools",
    "backend_for",
    "backend_from_settings",
    "no_drafts",
]

BACKENDS = ("offline", "openai")


def backend_from_settings() -> ReplyBackend:
    """The configured backend; a missing, unknown or invalid setting fails closed at start."""
    return backend_for(None)


def backend_for(reply: Mapping[str, Any] | None, *, instance: str = "") -> ReplyBackend:
    """The backend of an instance whose reply settings are `reply` (None: the process's own).
    A missing, unknown or invalid setting fails closed (`ImproperlyConfigured`)."""
    try:
        return configured_backend(reply or {}, instance=instance)
    except ValueError as error:
        raise ImproperlyConfigured(f"The assistant backend's settings: {error}.") from error


def configured_backend(reply: Mapping[str, Any], *, instance: str = "") -> ReplyBackend:
    where = f"instance {instance!r}: " if instance else ""
    name: str = reply.get("backend", settings.MOSAIC_ASSISTANT_BACKEND)
    if name == "offline":
        from runner.backends.offline import OfflineBackend

        return OfflineBackend(pace=settings.MOSAIC_OFFLINE_PACE)
    if name == "openai":
        model: str = reply.get("model", settings.MOSAIC_ASSISTANT_MODEL)
        base_url: str = reply.get("base_url", settings.MOSAIC_ASSISTANT_BASE_URL)
        if not model or not base_url:
            raise ImproperlyConfigured(
                f"{where}the openai backend needs a base URL and a model "
                "(MOSAIC_ASSISTANT_BASE_URL, MOSAIC_ASSISTANT_MODEL, or the instance's reply "
                "settings)."
            )
        api_key: str = settings.MOSAIC_ASSISTANT_API_KEY
        if "api_key_env" in reply:
            variable = reply["api_key_env"]
            if variable not in os.environ:
                raise ImproperlyConfigured(
                    f"{where}its API key variable {variable} is not set in the environment."
                )
            api_key = os.environ[variable]
        # Imported here: the client library is only loaded where it is used.
        from runner.backends.chat_completions import ChatCompletionsBackend

        return ChatCompletionsBackend(
            base_url=base_url,
            model=model,
            api_key=api_key,
            connect_timeout=settings.MOSAIC_ASSISTANT_CONNECT_TIMEOUT,
            idle_timeout=settings.MOSAIC_ASSISTANT_IDLE_TIMEOUT,
            max_tokens=reply.get("max_tokens", settings.MOSAIC_ASSISTANT_MAX_TOKENS),
            temperature=reply.get("temperature", settings.MOSAIC_ASSISTANT_TEMPERATURE),
            system_prompt=reply.get("system_prompt"),
            context_tokens=reply.get("context_tokens"),
        )
    raise ImproperlyConfigured(
        f"{where}MOSAIC_ASSISTANT_BACKEND is {name!r}; it must be one of {', '.join(BACKENDS)}."
    )
