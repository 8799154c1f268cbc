"""System checks for the listeners' configuration: L9's proxy secret (`mosaic.E010`).

Settings refuse the same configuration at start-up (`ImproperlyConfigured`); the check says it
again for `manage.py check`, and `chat.gates.proxy_username` fails closed whatever the settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks

E010 = "mosaic.E010"


@checks.register()
def check_proxy_secret(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """L9: a configured proxy user header needs the proxy's shared secret."""
    if not settings.MOSAIC_PROXY_USER_HEADER.strip() or settings.MOSAIC_PROXY_SECRET:
        return []
    return [
        checks.Error(
            "MOSAIC_PROXY_USER_HEADER is set but MOSAIC_PROXY_SECRET is not.",
            hint=(
                "Set MOSAIC_PROXY_SECRET to a long random value and have the proxy send it in "
                "X-Mosaic-Proxy-Secret with every request; an address alone proves nothing on "
                "a shared host."
            ),
            id=E010,
        )
    ]
