"""Signing in and out of the human listener (session and CSRF cookies; SPEC §6)."""

from __future__ import annotations

from django.contrib.auth import authenticate, login, logout
from django.middleware.csrf import get_token
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from broker import refusals
from broker.access import access_human_actor
from broker.refusals import Refusal
from chat.api.base import ChatView
from chat.api.docs import ERRORS
from chat.api.inputs import StrictInput, StrictString, parse
from chat.sign_in_throttle import address_of, check_sign_in_allowed


class LoginView(ChatView):
    """Sign in as the business's human; answers with the session and CSRF cookies."""

    class SignInInput(StrictInput):
        username = StrictString()
        password = StrictString()

    @extend_schema(
        operation_id="auth_login",
        request=SignInInput,
        responses={200: inline_serializer("SignedIn", {"user": serializers.CharField()}), **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = parse(self.SignInInput, request.data)
        # Before the password is checked: a throttled attempt learns nothing (429).
        check_sign_in_allowed(username=data["username"], address=address_of(request._request))
        user = authenticate(request._request, username=data["username"], password=data["password"])
        if user is None:
            raise Refusal(refusals.NOT_AUTHENTICATED, "Wrong username or password.")
        # Only a business's human signs in here; staff use admin.
        access_human_actor(username=user.get_username())
        login(request._request, user)
        get_token(request._request)
        return Response({"user": user.get_username()})


class LogoutView(ChatView):
    """Sign out; the session ends and a live Console loses its access."""

    allowed_without_send = True

    class SignOutInput(StrictInput):
        pass

    @extend_schema(
        operation_id="auth_logout",
        request=SignOutInput,
        responses={200: inline_serializer("SignedOut", {}), **ERRORS},
    )
    def post(self, request: Request) -> Response:
        parse(self.SignOutInput, request.data)
        logout(request._request)
        return Response({})
