"""Django's migrate, which is not refused for missing database guards (`mosaic.E003`).

Missing guards are what `migrate` repairs: `broker.apps` installs every guard at the end of each
run. Every other check still runs, and still refuses.
"""

from __future__ import annotations

from typing import Any

from django.core.management.commands import migrate

from broker.checks import guards_reinstalled_after


class Command(migrate.Command):
    def check(self, *args: Any, **kwargs: Any) -> None:
        with guards_reinstalled_after():
            super().check(*args, **kwargs)
