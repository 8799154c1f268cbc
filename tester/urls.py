"""Routes of the tester listener (L8): the chat API, its trail and messages, the tester's
suite runs, its OpenAI-compatible endpoint (SPEC §6.1), the schema.

Admin and sign-in are not here: the tester listener has no sign-in, every request is the
tester (L5). What is absent answers 404 `not-found`.
"""

from django.urls import path

from chat.api.schema_views import DocsView, SchemaView
from chat.routes import api_routes
from chat.views import console
from tester.gates import TESTER_AUTHENTICATION, TESTER_GATES
from tester.openai.routes import openai_routes
from tester.routes import suite_run_routes

handler400 = "chat.views.bad_request"
handler404 = "chat.views.not_found"
handler500 = "chat.views.server_error"

urlpatterns = [
    *api_routes(authentication=TESTER_AUTHENTICATION, gates=TESTER_GATES),
    # The tester's own: the history of its conversation-test runs.
    *suite_run_routes(authentication=TESTER_AUTHENTICATION, gates=TESTER_GATES),
    # Any OpenAI client's way in: a key instead of the page's Origin (its own gates).
    *openai_routes(),
    path("api/schema", SchemaView.as_view(urlconf="tester.urls"), name="schema"),
    path("api/docs", DocsView.as_view(url_name="schema"), name="api-docs"),
    path("", console, name="console"),
]
