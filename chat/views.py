"""Django-level answers of both listeners: JSON errors outside DRF."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import ensure_csrf_cookie
from rest_framework.exceptions import Throttled

from broker import refusals
from broker.access import access_human_actor
from broker.refusals import Refusal
from chat.bodies import unreadable_body_refusal
from chat.errors import METHOD_NOT_ALLOWED, error_response, retry_after
from chat.gates import proxy_username
from chat.sign_in_throttle import address_of, check_sign_in_allowed

PAGE_METHODS = ("GET", "HEAD")


# Names the listener on its answer to a route it does not have, so a client pointed at the
# wrong one can say which it reached (the conversation-test client tells the human listener
# from the tester's by it).
LISTENER_HEADER = "X-Mosaic-Listener"


def not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    response = error_response(refusals.NOT_FOUND, "No such route.")
    response[LISTENER_HEADER] = getattr(request, "listener", "human")
    return response


def bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    # A body Django could not parse (admin's sign-in, a page's POST) says so.
    return error_response(
        *(unreadable_body_refusal(exception) or (refusals.INVALID, "Bad request."))
    )


def server_error(request: HttpRequest, *args: Any) -> JsonResponse:
    # Never expected: every known failure has its own code. Still an error body, never a page.
    return JsonResponse({"error": "server-error", "detail": "Something went wrong."}, status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> JsonResponse:
    return error_response(refusals.CSRF_FAILED, f"CSRF check failed: {reason}")


def admin_sign_in(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
    """Admin's sign-in, held to the same throttle as the Console's (`chat.sign_in_throttle`)."""
    if request.method == "POST":
        try:
            check_sign_in_allowed(
                username=str(request.POST.get("username", "")), address=address_of(request)
            )
        except Throttled as throttled:
            response = error_response(refusals.TOO_MANY_REQUESTS, str(throttled.detail))
            response["Retry-After"] = retry_after(throttled)
            return response
    return admin.site.login(request, extra_context)


def page(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A page is read, never written to: other methods are 405 `method-not-allowed`, JSON like
    every refusal (Django's own answer would be an empty HTML 405)."""

    @wraps(view)
    def read_only(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method not in PAGE_METHODS:
            response = error_response(METHOD_NOT_ALLOWED, f"{request.method} is not served here.")
            response["Allow"] = ", ".join(PAGE_METHODS)
            return response
        return view(request, *args, **kwargs)

    return read_only


def human_visitor(request: HttpRequest) -> str:
    """Who opens the human Console: `human` (the business's human, or a user the trusted proxy
    names: the API decides about them), `nobody` (no session), `other` (signed in, but not the
    human of a business: staff), or `unknown` when the database cannot say.

    Only what the page shows depends on it; the API and the sockets decide for themselves.
    """
    if proxy_username(getattr(request, "scope", None)) is not None:
        return "human"
    try:
        user = request.user
        if not user.is_authenticated:
            return "nobody"
        access_human_actor(username=user.get_username())
    except Refusal:
        return "other"
    except DatabaseError:
        # The Console page needs no database (the fault tests): it loads, and says so itself.
        return "unknown"
    return "human"


@page
@ensure_csrf_cookie
def console(request: HttpRequest) -> HttpResponseBase:
    """The Console page of the listener it is served on; its data comes from the chat API.

    On the human listener a first visit without a session goes to the sign-in form (the
    address's `#…` goes with it, and comes back after signing in); a signed-in user who is not
    the business's human (staff) gets the page saying whose Console it is."""
    listener = getattr(request, "listener", "human")
    visitor = "tester" if listener == "tester" else human_visitor(request)
    if visitor == "nobody":
        return redirect("signin")
    context = {
        "listener": listener,
        "visitor": visitor,
        "send_enabled": settings.MOSAIC_CONSOLE_SEND,
        # The fields' limits come from the broker's settings, never written again in a template.
        "name_max": settings.MOSAIC_NAME_MAX,
        "body_max": settings.MOSAIC_BODY_MAX,
    }
    return render(request, "console.html", context)
