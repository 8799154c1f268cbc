"""The chat API's routes, bound to one listener's authentication and gates.

Both listeners serve the same views; each urlconf calls `api_routes` with its own classes, so
no view can be reached on a listener without that listener's gates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.urls import URLPattern, path, register_converter

from broker.fields import ID_DIGITS
from chat.api import chat
from chat.api.base import ChatView


class IdConverter:
    """A row id in a path: 1 to 18 digits, so it always fits the database's integers."""

    regex = ID_DIGITS

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(IdConverter, "id")

ROUTES: tuple[tuple[str, type[ChatView], str], ...] = (
    ("api/chat/projects", chat.ProjectsView, "chat-projects"),
    ("api/chat/instances", chat.InstancesView, "chat-instances"),
    ("api/chat/threads", chat.ThreadsView, "chat-threads"),
    ("api/chat/threads/<id:thread_id>", chat.ThreadView, "chat-thread"),
    ("api/chat/threads/<id:thread_id>/read", chat.ThreadReadView, "chat-thread-read"),
    ("api/chat/threads/<id:thread_id>/messages", chat.ThreadMessagesView, "chat-thread-messages"),
    ("api/chat/threads/<id:thread_id>/open", chat.ThreadOpenView, "chat-thread-open"),
    (
        "api/chat/threads/<id:thread_id>/messages/<id:message_id>/edit",
        chat.TurnEditView,
        "chat-turn-edit",
    ),
    (
        "api/chat/threads/<id:thread_id>/messages/<id:message_id>/regenerate",
        chat.TurnRegenerateView,
        "chat-turn-regenerate",
    ),
    ("api/chat/threads/<id:thread_id>/branch", chat.ThreadBranchView, "chat-thread-branch"),
    ("api/chat/threads/<id:thread_id>/carried", chat.ThreadCarriedView, "chat-thread-carried"),
    ("api/chat/stop", chat.StopView, "chat-stop"),
    ("api/chat/search", chat.SearchView, "chat-search"),
    ("api/messages", chat.MessagesView, "messages"),
    ("api/trail", chat.TrailView, "trail"),
)


def bind(
    route: str,
    view: type[Any],
    name: str,
    *,
    authentication: Sequence[type[Any]],
    gates: Sequence[type[Any]],
) -> URLPattern:
    return path(  # type: ignore[no-any-return]
        route,
        view.as_view(authentication_classes=authentication, permission_classes=gates),
        name=name,
    )


def api_routes(
    *, authentication: Sequence[type[Any]], gates: Sequence[type[Any]]
) -> list[URLPattern]:
    return [
        bind(route, view, name, authentication=authentication, gates=gates)
        for route, view, name in ROUTES
    ]
