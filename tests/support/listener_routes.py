"""Every route of each listener, read from its urlconf, so a new route is walked by the tests
that walk them without anyone listing it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from django.urls import URLPattern, URLResolver, resolve
from django.urls.resolvers import RoutePattern

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


# A regex route's named group, written as a sample: the first of its alternatives
# (`(?P<app_label>broker|auth)`), or one word for anything else (`(?P<url>.*)`).
_NAMED_GROUP = re.compile(r"\(\?P<\w+>([^()]*)\)")
_WORDS = re.compile(r"\w+(\|\w+)*")


def _sample(group: re.Match[str]) -> str:
    return group[1].split("|")[0] if _WORDS.fullmatch(group[1]) else "x"


def every_path(listener: str, ident: str = "1") -> dict[str, str]:
    """Every route of the listener, admin's included trees too, as a path that resolves (each
    parameter written as `ident`, a regex group as a sample that matches it), keyed by the
    route as written. A route behind an earlier one of the same path (admin's sign-in behind
    the throttled one) walks the earlier one."""
    urlconf = URLCONFS[listener]
    paths = {}

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
                continue
            written = str(pattern.pattern)
            if isinstance(pattern.pattern, RoutePattern):
                part = _CONVERTER.sub(ident, written)
            else:
                part = _NAMED_GROUP.sub(_sample, written).removeprefix("^").removesuffix("$")
            path = "/" + prefix + part
            resolve(path, urlconf)  # Resolver404 when the sample is not a path of the listener
            paths[prefix + written] = path

    walk(import_module(urlconf).urlpatterns, "")
    return paths
