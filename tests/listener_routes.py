"""Every route of each listener, read from its urlconf, so a new route is walked by the tests
that walk them without anyone listing it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from django.urls import URLPattern

from mosaic.middleware import URLCONFS

_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


@dataclass(frozen=True)
class Route:
    listener: str
    template: str  # as written in the urlconf: "api/chat/threads/<id:thread_id>/messages"
    name: str
    callback: Any

    @property
    def has_id(self) -> bool:
        return _CONVERTER.search(self.template) is not None

    @property
    def is_page(self) -> bool:
        """A page for people (HTML on GET); everything else answers JSON."""
        return not self.template.startswith("api/")

    def path(self, ident: str = "1") -> str:
        """The route's path with every parameter written as `ident`, exactly as given."""
        return "/" + _CONVERTER.sub(ident, self.template)

    @property
    def write_method(self) -> str | None:
        """The write the route's view serves: POST, PATCH (a thread's changes), or None."""
        view = getattr(self.callback, "view_class", None)
        for method in ("POST", "PATCH"):
            if view is not None and hasattr(view, method.lower()):
                return method
        return None

    @property
    def writes(self) -> bool:
        """Whether the route's view serves a write."""
        return self.write_method is not None


def routes(listener: str) -> list[Route]:
    """The listener's routes. Admin (an included URL tree, and the throttled sign-in placed in
    front of it) is Django's own staff site of HTML forms, outside the chat contract, and is
    left out."""
    patterns = import_module(URLCONFS[listener]).urlpatterns
    return [
        Route(listener, str(pattern.pattern), pattern.name or "", pattern.callback)
        for pattern in patterns
        if isinstance(pattern, URLPattern) and not str(pattern.pattern).startswith("admin/")
    ]
