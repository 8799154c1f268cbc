"""The tester's OpenAI-compatible routes (SPEC §6.1): its instances as models, and a chat
completion as a turn of the tester's.

Each view speaks to the broker through its verbs, as the tester: the instances
(`instance.list`), a conversation started or continued (`conversation.start`,
`conversation.continue`), and, while the answer waits on the loop, the turn's reply
(`tester.openai.answers`). Every rule stays the broker's.
"""

from __future__ import annotations

import re
import secrets
from typing import Any, NoReturn

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response

from broker import actions, refusals, selectors
from broker.fields import ID_DIGITS
from broker.models import Via
from broker.refusals import Refusal
from chat.api.base import ChatView
from chat.errors import exception_handler
from chat.signals import turn_sent
from tester.openai import shapes
from tester.openai.answers import StreamedCompletion, TurnAnswer, WaitedCompletion
from tester.openai.inputs import Asked, Unreadable, read_request

# The project a new conversation's thread goes in, and the header that names another.
PROJECT_HEADER = "X-Mosaic-Project"
DEFAULT_PROJECT = "openai"
# The thread a request continues, named outright; also told on every completion's answer.
THREAD_HEADER = "X-Mosaic-Thread"
# The request's fields this endpoint did not use (`tester.openai.inputs`).
IGNORED_HEADER = "X-Mosaic-Ignored-Fields"
# A new thread's name is taken in the same millisecond so rarely that three tries suffice.
NAME_TRIES = 3


class ModelNotFound(Exception):
    """`model` names no instance of the business."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class JsonAnyway(BaseContentNegotiation):
    """The client's Accept decides nothing: every answer here is JSON, or a stream of it."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


def openai_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """A request this endpoint cannot read, or a model that is none, in OpenAI's words; every
    other refusal as the chat API's, which `tester.openai.errors` then reshapes."""
    if isinstance(exc, Unreadable):
        return Response(
            shapes.error(400, refusals.INVALID, exc.message, param=exc.param), status=400
        )
    if isinstance(exc, ModelNotFound):
        message = f"The model {exc.name!r} does not exist: GET /v1/models lists the instances."
        body = shapes.error(404, shapes.MODEL_NOT_FOUND, message, param="model")
        return Response(body, status=404)
    return exception_handler(exc, context)


class OpenAIView(ChatView):
    """A view of these routes: OpenAI's errors, JSON whatever the Accept, and the key read only
    once the gates that come first have passed (`tester.openai.gates.OPENAI_GATES`)."""

    content_negotiation_class = JsonAnyway

    def perform_authentication(self, request: Request) -> None:
        """Lazily: the gates read `request.auth` when their turn comes."""

    def permission_denied(
        self, request: Request, message: str | None = None, code: str | None = None
    ) -> NoReturn:
        """A gate's refusal as it is: DRF's own would read the key first, to answer 401."""
        raise PermissionDenied(detail=message, code=code)

    def get_exception_handler(self) -> Any:
        return openai_exception_handler

    def instance_names(self) -> list[str]:
        return [instance.name for instance in selectors.list_instances(self.actor())]


class ModelsView(OpenAIView):
    """`GET /v1/models`: the business's instances, each as a model named as it is."""

    @extend_schema(exclude=True)
    def get(self, request: Request) -> Response:
        return Response(shapes.model_list(self.instance_names()))


class ModelView(OpenAIView):
    """`GET /v1/models/NAME`: one instance as a model."""

    @extend_schema(exclude=True)
    def get(self, request: Request, model: str) -> Response:
        if model not in self.instance_names():
            raise ModelNotFound(model)
        return Response(shapes.model(model))


class ChatCompletionsView(OpenAIView):
    """`POST /v1/chat/completions`: the request's last message is a turn of the tester's in
    the thread its conversation maps to; the answer is that turn's reply."""

    @extend_schema(exclude=True)
    def post(self, request: Request) -> TurnAnswer:
        asked = read_request(request.data)
        if asked.model not in self.instance_names():
            raise ModelNotFound(asked.model)
        # R21: with an Idempotency-Key, a repeat waits for the first one's turn again.
        where = self.answer_once(request, lambda: Response(self.send(request, asked))).data
        kind = StreamedCompletion if asked.stream else WaitedCompletion
        answer = kind(
            actor=self.actor(), thread=where["thread"], turn=where["turn"], instance=asked.model
        )
        answer[THREAD_HEADER] = str(where["thread"])
        if asked.ignored:
            answer[IGNORED_HEADER] = asked.ignored_header
        return answer

    def send(self, request: Request, asked: Asked) -> dict[str, int]:
        """The turn, in a new thread or the one the conversation continues; where it went."""
        named = _thread_named(request)
        if named is None and not asked.history:
            turn = self.start(_project_named(request), asked)
        else:
            turn = actions.continue_conversation(
                self.actor(),
                instance=asked.model,
                history=asked.history,
                body=asked.turn,
                via=Via.API,
                thread_id=named,
            )
        turn_sent.send(type(self), listener=request._request.listener)  # type: ignore[attr-defined]
        return {"thread": int(turn.message.thread_id or 0), "turn": turn.message.pk}

    def start(self, project: str, asked: Asked) -> actions.SentTurn:
        """A new thread for the conversation, named for the moment it began."""
        tries = 1
        while True:
            try:
                return actions.start_conversation(
                    self.actor(),
                    project=project,
                    instance=asked.model,
                    name=_new_thread_name(),
                    body=asked.turn,
                    via=Via.API,
                )
            except Refusal as refusal:
                if refusal.code != refusals.THREAD_EXISTS or tries >= NAME_TRIES:
                    raise
                tries += 1


def _new_thread_name() -> str:
    """`chat completion · <UTC time to the millisecond> · <six hex digits>`."""
    now = timezone.now()
    return (
        f"chat completion · {now:%Y-%m-%d %H:%M:%S}.{now.microsecond // 1000:03d} · "
        f"{secrets.token_hex(3)}"
    )


def _header_text(request: Request, name: str) -> str | None:
    """A header's value as the UTF-8 its client wrote (the server hands it over as Latin-1)."""
    value = request.headers.get(name)
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise Unreadable(f"{name} must be UTF-8 text.") from None


def _project_named(request: Request) -> str:
    return _header_text(request, PROJECT_HEADER) or DEFAULT_PROJECT


def _thread_named(request: Request) -> int | None:
    value = _header_text(request, THREAD_HEADER)
    if value is None:
        return None
    if not re.fullmatch(ID_DIGITS, value.strip()):
        raise Unreadable(f"{THREAD_HEADER} must be a thread's id.")
    return int(value.strip())
