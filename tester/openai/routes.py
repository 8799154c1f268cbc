"""The tester's OpenAI-compatible routes (SPEC §6.1), bound to their own key and gates.

Only the tester listener's urlconf names them: on the human listener `/v1/` is no route (404).
"""

from __future__ import annotations

from django.urls import URLPattern

from chat.routes import bind
from tester.openai import views
from tester.openai.gates import OPENAI_AUTHENTICATION, OPENAI_GATES

ROUTES: tuple[tuple[str, type[views.OpenAIView], str], ...] = (
    ("v1/models", views.ModelsView, "openai-models"),
    ("v1/models/<str:model>", views.ModelView, "openai-model"),
    ("v1/chat/completions", views.ChatCompletionsView, "openai-chat-completions"),
)


def openai_routes() -> list[URLPattern]:
    return [
        bind(route, view, name, authentication=OPENAI_AUTHENTICATION, gates=OPENAI_GATES)
        for route, view, name in ROUTES
    ]
