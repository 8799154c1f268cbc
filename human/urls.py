"""Routes of the human listener: the chat API, sign-in, the schema, admin."""

from django.contrib import admin
from django.urls import path
from django.views.generic import TemplateView

from chat.api.auth import LoginView, LogoutView
from chat.api.chat import InboxView
from chat.api.schema_views import DocsView, SchemaView
from chat.routes import api_routes, bind
from chat.views import admin_sign_in, console, page
from human.gates import HUMAN_AUTHENTICATION, HUMAN_GATES, SIGN_IN_GATES

handler400 = "chat.views.bad_request"
handler404 = "chat.views.not_found"
handler500 = "chat.views.server_error"

urlpatterns = [
    *api_routes(authentication=HUMAN_AUTHENTICATION, gates=HUMAN_GATES),
    bind("api/inbox", InboxView, "inbox", authentication=HUMAN_AUTHENTICATION, gates=HUMAN_GATES),
    bind("api/auth/login", LoginView, "auth-login", authentication=(), gates=SIGN_IN_GATES),
    bind(
        "api/auth/logout",
        LogoutView,
        "auth-logout",
        authentication=HUMAN_AUTHENTICATION,
        gates=HUMAN_GATES,
    ),
    path("api/schema", SchemaView.as_view(urlconf="human.urls"), name="schema"),
    path("api/docs", DocsView.as_view(url_name="schema"), name="api-docs"),
    path("signin", page(TemplateView.as_view(template_name="signin.html")), name="signin"),
    # Before admin's own routes: its sign-in is throttled as the Console's is.
    path("admin/login/", admin_sign_in, name="admin-sign-in"),
    path("admin/", admin.site.urls),
    path("", console, name="console"),
]
