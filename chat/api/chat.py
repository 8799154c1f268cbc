"""The chat API of SPEC §6: projects, threads, turns, opens, the stop, and the actor's reads.

Each view parses its input, calls one broker function with the listener's actor, and
serialises the answer. Who may do what is the broker's to say.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from broker import actions, fields, selectors
from chat.api import shapes
from chat.api.base import ChatView
from chat.api.docs import ERRORS, LIST_PARAMETERS
from chat.api.inputs import (
    ListQuery,
    QueryFlag,
    QueryNumber,
    StrictBool,
    StrictId,
    StrictInput,
    StrictString,
    list_query,
    parse,
)
from chat.signals import turn_sent


class ProjectsView(ChatView):
    """The business's projects; both sides see them all."""

    class ProjectCreateInput(StrictInput):
        name = StrictString()

    @extend_schema(
        operation_id="projects_list",
        parameters=LIST_PARAMETERS,
        responses={
            200: inline_serializer("Projects", {"projects": shapes.ProjectOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        projects = selectors.list_projects(self.actor(), **list_query(request))
        return Response({"projects": shapes.ProjectOut(projects, many=True).data})  # type: ignore[arg-type]

    @extend_schema(
        operation_id="projects_create",
        request=ProjectCreateInput,
        responses={
            201: inline_serializer("ProjectCreated", {"project": shapes.ProjectOut()}),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        def write() -> Response:
            data = parse(self.ProjectCreateInput, request.data)
            project = actions.create_project(self.actor(), name=data["name"])
            return Response({"project": shapes.ProjectOut(project).data}, status=201)

        return self.answer_once(request, write)


class InstancesView(ChatView):
    """The business's instances, by name: what a thread can be started on, or a turn asked
    again on (R24)."""

    @extend_schema(
        operation_id="instances_list",
        responses={
            200: inline_serializer("Instances", {"instances": shapes.InstanceOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        instances = selectors.list_instances(self.actor())
        return Response({"instances": shapes.InstanceOut(instances, many=True).data})  # type: ignore[arg-type]


class ThreadsView(ChatView):
    """The actor's own threads (R3), and new ones (R2)."""

    class ThreadListQuery(ListQuery):
        project = QueryNumber(required=False, min_value=1)
        q = serializers.CharField(required=False, max_length=200)
        archived = QueryFlag(required=False)
        order = serializers.ChoiceField(required=False, choices=selectors.THREAD_ORDERS)
        below = QueryNumber(required=False, min_value=1)

    class ThreadCreateInput(StrictInput):
        project = StrictId(required=False)
        name = StrictString()
        instance = StrictString(required=False)

    @extend_schema(
        operation_id="threads_list",
        parameters=[
            *LIST_PARAMETERS,
            OpenApiParameter("project", int, description="Only this project's threads."),
            OpenApiParameter(
                "q", str, description="Search the names and messages of your threads."
            ),
            OpenApiParameter(
                "archived",
                str,
                enum=["true", "false"],
                description="`true`: only your archived threads; otherwise only the others.",
            ),
            OpenApiParameter(
                "order",
                str,
                enum=list(selectors.THREAD_ORDERS),
                description=(
                    "`id` (the default): by id, paged by `after` and `before`. `activity`: the"
                    " inbox's order, pinned threads first, then the others, each by last"
                    " activity, newest first; paged by `below`."
                ),
            ),
            OpenApiParameter(
                "below",
                int,
                description="With `order=activity`: the threads listed after this one of yours.",
            ),
        ],
        responses={
            200: inline_serializer("Threads", {"threads": shapes.ThreadOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        query = list_query(request, self.ThreadListQuery)
        threads = selectors.list_threads(
            self.actor(),
            project_id=query.pop("project", None),
            query=query.pop("q", None),
            archived=query.pop("archived", False),
            order=query.pop("order", selectors.BY_ID),
            **query,
        )
        return Response({"threads": shapes.ThreadOut(threads, many=True).data})  # type: ignore[arg-type]

    @extend_schema(
        operation_id="threads_create",
        request=ThreadCreateInput,
        responses={
            201: inline_serializer("ThreadCreated", {"thread": shapes.ThreadOut()}),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        def write() -> Response:
            data = parse(self.ThreadCreateInput, request.data)
            thread = actions.create_thread(
                self.actor(),
                project_id=data.get("project"),
                name=data["name"],
                instance=data.get("instance"),
            )
            return Response({"thread": shapes.ThreadOut(thread).data}, status=201)

        return self.answer_once(request, write)


class SearchView(ChatView):
    """Search every project: the actor's own threads by name and their messages (R3, R1)."""

    class SearchQuery(StrictInput):
        q = serializers.CharField(max_length=fields.SEARCH_MAX)
        limit = QueryNumber(required=False, min_value=1, max_value=fields.MAX_LIMIT)
        before = QueryNumber(required=False, min_value=0)

    @extend_schema(
        operation_id="search",
        parameters=[
            OpenApiParameter(
                "q",
                str,
                required=True,
                description="The text to find, 1–200 characters; case is ignored.",
            ),
            OpenApiParameter("limit", int, description="Messages per page: 1–500, default 100."),
            OpenApiParameter(
                "before",
                int,
                description="The matching messages older than this message id (the next page).",
            ),
        ],
        responses={
            200: inline_serializer(
                "SearchHits",
                {
                    "threads": shapes.ThreadHitOut(many=True),
                    "messages": shapes.MessageHitOut(many=True),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        query = list_query(request, self.SearchQuery)
        hits = selectors.search(self.actor(), query=query.pop("q"), **query)
        return Response(
            {
                "threads": shapes.ThreadHitOut(hits.threads, many=True).data,  # type: ignore[arg-type]
                "messages": shapes.MessageHitOut(hits.messages, many=True).data,  # type: ignore[arg-type]
            }
        )


class ThreadView(ChatView):
    """The actor's own thread with its replies' tokens summed; rename, archive or pin it (R1;
    R22 decides the tester's share)."""

    @extend_schema(
        operation_id="thread_get",
        responses={
            200: inline_serializer("ThreadWithUsage", {"thread": shapes.ThreadReadOut()}),
            **ERRORS,
        },
    )
    def get(self, request: Request, thread_id: int) -> Response:
        thread, usage = selectors.read_thread(self.actor(), thread_id=thread_id)
        shape = dict(shapes.ThreadOut(thread).data)
        shape["usage"] = shapes.UsageOut(usage).data
        return Response({"thread": shape})

    class ThreadChangeInput(StrictInput):
        name = StrictString(required=False)
        archived = StrictBool(required=False)
        pinned = StrictBool(required=False)

    @extend_schema(
        operation_id="thread_change",
        request=ThreadChangeInput,
        responses={
            200: inline_serializer("ThreadChanged", {"thread": shapes.ThreadOut()}),
            **ERRORS,
        },
    )
    def patch(self, request: Request, thread_id: int) -> Response:
        def write() -> Response:
            data = parse(self.ThreadChangeInput, request.data)
            thread = actions.change_thread(
                self.actor(),
                thread_id=thread_id,
                name=data.get("name"),
                archived=data.get("archived"),
                pinned=data.get("pinned"),
            )
            return Response({"thread": shapes.ThreadOut(thread).data})

        return self.answer_once(request, write)


class ThreadReadView(ChatView):
    """Move the owner's read mark of its own thread forward (R1); not bus traffic."""

    class ThreadReadInput(StrictInput):
        up_to = StrictId()

    @extend_schema(
        operation_id="thread_read",
        request=ThreadReadInput,
        responses={200: inline_serializer("ThreadRead", {"thread": shapes.ThreadOut()}), **ERRORS},
    )
    def post(self, request: Request, thread_id: int) -> Response:
        def write() -> Response:
            data = parse(self.ThreadReadInput, request.data)
            thread = actions.mark_read(self.actor(), thread_id=thread_id, up_to=data["up_to"])
            return Response({"thread": shapes.ThreadOut(thread).data})

        return self.answer_once(request, write)


class ThreadMessagesView(ChatView):
    """A thread's messages, oldest first, and a new turn in it (R1, R6, R7)."""

    class TurnInput(StrictInput):
        body = StrictString()

    @extend_schema(
        operation_id="thread_messages_list",
        parameters=LIST_PARAMETERS,
        responses={
            200: inline_serializer("ThreadMessages", {"messages": shapes.MessageOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request, thread_id: int) -> Response:
        messages = selectors.thread_messages(
            self.actor(), thread_id=thread_id, **list_query(request)
        )
        return Response({"messages": shapes.MessageOut(messages, many=True).data})  # type: ignore[arg-type]

    @extend_schema(
        operation_id="thread_messages_send",
        request=TurnInput,
        responses={
            201: inline_serializer(
                "TurnSent",
                {
                    "message": shapes.MessageOut(),
                    "request": serializers.IntegerField(allow_null=True),
                },
            ),
            **ERRORS,
        },
    )
    def post(self, request: Request, thread_id: int) -> Response:
        def write() -> Response:
            data = parse(self.TurnInput, request.data)
            turn = actions.send_to_thread(
                self.actor(), thread_id=thread_id, body=data["body"], via=self.via()
            )
            turn_sent.send(type(self), listener=request._request.listener)  # type: ignore[attr-defined]
            return Response(
                {"message": shapes.MessageOut(turn.message).data, "request": turn.request},
                status=201,
            )

        return self.answer_once(request, write)


NEW_TURN = inline_serializer(
    "NewTurn",
    {
        "message": shapes.MessageOut(),
        "request": serializers.IntegerField(allow_null=True),
        "thread": shapes.ThreadOut(),
    },
)


class NewTurnView(ChatView):
    """R24: a new version of one of the actor's turns, in place or in a new branch."""

    def answer_new_turn(self, request: Request, turn: actions.NewTurn) -> Response:
        turn_sent.send(type(self), listener=request._request.listener)  # type: ignore[attr-defined]
        return Response(
            {
                "message": shapes.MessageOut(turn.message).data,
                "request": turn.request,
                "thread": shapes.ThreadOut(turn.thread).data,
            },
            status=201,
        )


class TurnEditView(NewTurnView):
    """R24: edit one of the actor's turns: a new version with new text."""

    class TurnEditInput(StrictInput):
        body = StrictString()

    @extend_schema(
        operation_id="thread_turn_edit",
        request=TurnEditInput,
        responses={201: NEW_TURN, **ERRORS},
    )
    def post(self, request: Request, thread_id: int, message_id: int) -> Response:
        def write() -> Response:
            data = parse(self.TurnEditInput, request.data)
            turn = actions.edit_turn(
                self.actor(),
                thread_id=thread_id,
                message_id=message_id,
                body=data["body"],
                via=self.via(),
            )
            return self.answer_new_turn(request, turn)

        return self.answer_once(request, write)


class TurnRegenerateView(NewTurnView):
    """R24: ask one of the actor's turns again (named by itself or its reply), on the thread's
    instance or, in a new branch, on another."""

    class TurnRegenerateInput(StrictInput):
        instance = StrictString(required=False)

    @extend_schema(
        operation_id="thread_turn_regenerate",
        request=TurnRegenerateInput,
        responses={201: NEW_TURN, **ERRORS},
    )
    def post(self, request: Request, thread_id: int, message_id: int) -> Response:
        def write() -> Response:
            data = parse(self.TurnRegenerateInput, request.data)
            turn = actions.regenerate_turn(
                self.actor(),
                thread_id=thread_id,
                message_id=message_id,
                instance=data.get("instance"),
                via=self.via(),
            )
            return self.answer_new_turn(request, turn)

        return self.answer_once(request, write)


class ThreadBranchView(ChatView):
    """R24: a new thread of the actor's carrying its thread's conversation up to a message."""

    class ThreadBranchInput(StrictInput):
        message = StrictId()
        name = StrictString(required=False)
        instance = StrictString(required=False)

    @extend_schema(
        operation_id="thread_branch",
        request=ThreadBranchInput,
        responses={
            201: inline_serializer("ThreadBranched", {"thread": shapes.ThreadOut()}),
            **ERRORS,
        },
    )
    def post(self, request: Request, thread_id: int) -> Response:
        def write() -> Response:
            data = parse(self.ThreadBranchInput, request.data)
            thread = actions.branch_thread(
                self.actor(),
                thread_id=thread_id,
                message_id=data["message"],
                name=data.get("name"),
                instance=data.get("instance"),
            )
            return Response({"thread": shapes.ThreadOut(thread).data}, status=201)

        return self.answer_once(request, write)


class ThreadCarriedView(ChatView):
    """R24: the conversation a branch of the actor's carries, oldest first."""

    class CarriedQuery(StrictInput):
        limit = QueryNumber(required=False, min_value=1, max_value=500)

    @extend_schema(
        operation_id="thread_carried",
        parameters=[
            OpenApiParameter(
                "limit", int, description="At most this many, the newest kept (default 100)."
            )
        ],
        responses={
            200: inline_serializer("ThreadCarried", {"messages": shapes.MessageOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request, thread_id: int) -> Response:
        query = list_query(request, self.CarriedQuery)
        messages = selectors.carried_messages(
            self.actor(), thread_id=thread_id, limit=query.get("limit")
        )
        return Response({"messages": shapes.MessageOut(messages, many=True).data})  # type: ignore[arg-type]


class ThreadOpenView(ChatView):
    """Record that the actor opened its own thread (R2: `by = owner`)."""

    class ThreadOpenInput(StrictInput):
        pass

    @extend_schema(
        operation_id="thread_open",
        request=ThreadOpenInput,
        responses={200: inline_serializer("Opened", {"open": shapes.OpenOut()}), **ERRORS},
    )
    def post(self, request: Request, thread_id: int) -> Response:
        def write() -> Response:
            parse(self.ThreadOpenInput, request.data)
            opened = actions.open_thread(self.actor(), thread_id=thread_id)
            return Response({"open": shapes.OpenOut(opened).data})

        return self.answer_once(request, write)


class StopView(ChatView):
    """R13: end the assistant runs on the actor's own threads."""

    allowed_without_send = True

    class AssistantStopInput(StrictInput):
        instance = StrictString(required=False)
        thread = StrictId(required=False)

    @extend_schema(
        operation_id="assistant_stop",
        request=AssistantStopInput,
        responses={
            200: inline_serializer("Stopped", {"stopped": shapes.StoppedOut(many=True)}),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        def write() -> Response:
            data = parse(self.AssistantStopInput, request.data)
            stop = actions.stop_assistant(
                self.actor(), instance=data.get("instance"), thread_id=data.get("thread")
            )
            return Response({"stopped": shapes.StoppedOut(shapes.stopped(stop), many=True).data})

        return self.answer_once(request, write)


class MessagesView(ChatView):
    """The actor's messages view and its count: what is addressed to it (R12, R20)."""

    @extend_schema(
        operation_id="messages_view",
        parameters=LIST_PARAMETERS,
        responses={
            200: inline_serializer(
                "MessagesView",
                {"messages": shapes.MessageOut(many=True), "count": serializers.IntegerField()},
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        view = selectors.messages_view(self.actor(), **list_query(request))
        return Response(
            {"messages": shapes.MessageOut(view.rows, many=True).data, "count": view.count}  # type: ignore[arg-type]
        )


class InboxView(ChatView):
    """R19: decisions routed to the human."""

    @extend_schema(
        operation_id="inbox",
        parameters=LIST_PARAMETERS,
        responses={
            200: inline_serializer("Inbox", {"decisions": shapes.DecisionOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        decisions = selectors.read_inbox(self.actor(), **list_query(request))
        return Response({"decisions": shapes.DecisionOut(decisions, many=True).data})  # type: ignore[arg-type]


class TrailView(ChatView):
    """The trail (R16 labels; R20: the tester reads only its own rows)."""

    @extend_schema(
        operation_id="trail",
        parameters=LIST_PARAMETERS,
        responses={
            200: inline_serializer("Trail", {"rows": shapes.TrailRowOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        rows = selectors.read_trail(self.actor(), **list_query(request))
        return Response({"rows": shapes.TrailRowOut(rows, many=True).data})  # type: ignore[arg-type]
