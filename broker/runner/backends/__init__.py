"""Reply backends, chosen by `MOSAIC_ASSISTANT_BACKEND`: `offline` (default) or `openai`."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from broker.runner.backends.base import (
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
    "backend_from_settings",
    "no_drafts",
]

BACKENDS = ("offline", "openai")


def backend_from_settings() -> ReplyBackend:
    """The configured backend; a missing, unknown or invalid setting fails closed at start."""
    try:
        return configured_backend()
    except ValueError as error:
        raise ImproperlyConfigured(f"The assistant backend's settings: {error}.") from error


def configured_backend() -> ReplyBackend:
    name: str = settings.MOSAIC_ASSISTANT_BACKEND
    if name == "offline":
        from broker.runner.backends.offline import OfflineBackend

        return OfflineBackend(pace=settings.MOSAIC_OFFLINE_PACE)
    if name == "openai":
        model: str = settings.MOSAIC_ASSISTANT_MODEL
        base_url: str = settings.MOSAIC_ASSISTANT_BASE_URL
        if not model or not base_url:
            raise ImproperlyConfigured(
                "MOSAIC_ASSISTANT_BACKEND=openai needs MOSAIC_ASSISTANT_BASE_URL and "
                "MOSAIC_ASSISTANT_MODEL."
            )
        # Imported here: the client library is only loaded where it is used.
        from broker.runner.backends.chat_completions import ChatCompletionsBackend

        return ChatCompletionsBackend(
            base_url=base_url,
            model=model,
            api_key=settings.MOSAIC_ASSISTANT_API_KEY,
            connect_timeout=settings.MOSAIC_ASSISTANT_CONNECT_TIMEOUT,
            idle_timeout=settings.MOSAIC_ASSISTANT_IDLE_TIMEOUT,
            max_tokens=settings.MOSAIC_ASSISTANT_MAX_TOKENS,
            temperature=settings.MOSAIC_ASSISTANT_TEMPERATURE,
        )
    raise ImproperlyConfigured(
        f"MOSAIC_ASSISTANT_BACKEND is {name!r}; it must be one of {', '.join(BACKENDS)}."
    )
