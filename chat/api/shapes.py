"""Output shapes of SPEC §6, as DRF serializers (they also describe the OpenAPI schema)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar, cast

from drf_spectacular.utils import extend_schema_field, inline_serializer
from rest_framework import serializers

from broker.actions import Stop
from broker.models import (
    Creator,
    Decision,
    Instance,
    Message,
    Project,
    ReplyState,
    Step,
    StepOutcome,
    Thread,
    ThreadOpen,
    TrailKind,
    TrailRow,
    Via,
)
from broker.selectors import MessageHit

T = TypeVar("T")

# A plain field is read by walking its attribute path and converting the value; any other
# field by a function of the shape being written and the instance.
Convert = Callable[[Any], Any]
Read = Callable[["Shape[Any]", Any], Any]
PlainReading = tuple[str, tuple[str, ...], Convert]
OtherReading = tuple[str, None, Read]


def iso_time(moment: datetime) -> str:
    """An aware time in ISO 8601, in UTC with `Z`: what DRF writes with the time zone the
    settings fix (UTC), without looking the zone up for every value."""
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.isoformat()[:-6] + "Z"


def time_text(moment: datetime | None) -> str | None:
    """A time as every shape writes it (ISO 8601, UTC), or None."""
    return None if moment is None else iso_time(moment)


# The field kinds whose reading is a plain attribute walk and a plain conversion; any other
# field is read the way DRF reads it.
PLAIN_CONVERSIONS: dict[type[serializers.Field[Any, Any, Any, Any]], Convert] = {
    serializers.IntegerField: int,
    serializers.CharField: str,
    serializers.DateTimeField: iso_time,
}


class Shape(serializers.Serializer[T]):
    """A model's output shape: DRF's serializer whose `to_representation` is planned once per
    shape instead of walked field by field for every row.

    A page of a hundred messages spent half its time in DRF's generic reading (a `try` and an
    `isinstance` per attribute, three time-zone lookups per date). The declared fields stay the
    one source of the shape, and of the OpenAPI schema; the plan only reads them, and a test
    holds its output equal to DRF's own reading for every shape."""

    _plans: ClassVar[dict[type[Any], list[PlainReading | OtherReading]]] = {}

    def to_representation(self, instance: T) -> dict[str, Any]:
        plan = self._plans.get(type(self)) or self._plan()
        shape: dict[str, Any] = {}
        for name, path, read in plan:
            if path is None:
                shape[name] = cast(Read, read)(self, instance)
                continue
            value: Any = instance
            for attribute in path:
                value = getattr(value, attribute)
            shape[name] = None if value is None else cast(Convert, read)(value)
        return shape

    @classmethod
    def _plan(cls) -> list[PlainReading | OtherReading]:
        # Planned on an empty shape, so the plan keeps no row of the shape that asked for it.
        plan: list[PlainReading | OtherReading] = []
        for field in cls()._readable_fields:
            name = str(field.field_name)
            convert = PLAIN_CONVERSIONS.get(type(field))
            # A custom output format, or `source="*"` (no attribute path), is DRF's to read.
            if convert is not None and "format" not in vars(field) and field.source_attrs:
                plan.append((name, tuple(field.source_attrs), convert))
            elif isinstance(field, serializers.SerializerMethodField):
                plan.append((name, None, _method_reading(str(field.method_name))))
            else:
                plan.append((name, None, _field_reading(field)))
        cls._plans[cls] = plan
        return plan


def _method_reading(method_name: str) -> Read:
    return lambda shape, instance: getattr(shape, method_name)(instance)


def _field_reading(field: serializers.Field[Any, Any, Any, Any]) -> Read:
    def read(shape: Shape[Any], instance: Any) -> Any:
        value = field.get_attribute(instance)
        return None if value is None else field.to_representation(value)

    return read


class ErrorOut(serializers.Serializer[Any]):
    """Every refusal: a stable code and one sentence."""

    error = serializers.CharField()
    detail = serializers.CharField()


class ProjectOut(Shape[Project]):
    """A project of the business: both sides see every project, and `creator` says which side
    made it."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    created_at = serializers.DateTimeField()
    # The human's Console tags the tester's projects.
    creator = serializers.ChoiceField(choices=Creator.choices)


PRICING = inline_serializer(
    "Pricing",
    {"input": serializers.FloatField(), "output": serializers.FloatField()},
    allow_null=True,
)


class InstanceOut(Shape[Instance]):
    """An instance of the business: its name (a thread's address), its role, whether a new
    thread goes to it when none is named (the business's `default_instance`), and what a
    million tokens of its model cost, when the business file says (`reply.pricing`)."""

    name = serializers.CharField()
    role = serializers.CharField(source="role.name")
    # Not `get_default`: a serializer is a field, whose own `get_default` that would override.
    default = serializers.SerializerMethodField(method_name="is_default")
    pricing = serializers.SerializerMethodField()

    def is_default(self, instance: Instance) -> bool:
        return bool(instance.name == instance.business.default_instance)

    @extend_schema_field(PRICING)
    def get_pricing(self, instance: Instance) -> dict[str, float] | None:
        # The prices only: the rest of the reply settings (a key's variable, a prompt) stay
        # the business file's.
        pricing = (instance.reply or {}).get("pricing")
        return dict(pricing) if isinstance(pricing, dict) else None


BRANCHED_FROM = inline_serializer(
    "BranchedFrom",
    {
        "thread": serializers.IntegerField(),
        "name": serializers.CharField(),
        "message": serializers.IntegerField(allow_null=True),
    },
    allow_null=True,
)


class ThreadOut(Shape[Thread]):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    owner = serializers.CharField()
    instance = serializers.CharField(source="instance.name")  # type: ignore[assignment]
    created_at = serializers.DateTimeField()
    # The inbox: computed by the thread list, for the owner's side.
    archived = serializers.BooleanField()
    pinned = serializers.BooleanField()
    last_message_at = serializers.DateTimeField(allow_null=True)
    preview = serializers.CharField(allow_null=True)
    unread = serializers.IntegerField()
    read_up_to = serializers.IntegerField(allow_null=True)
    # R24: the thread a branch was made from (its current name, read with the thread) and the
    # last message it carries; null for a thread that is no branch.
    branched_from = serializers.SerializerMethodField()

    @extend_schema_field(BRANCHED_FROM)
    def get_branched_from(self, thread: Thread) -> dict[str, Any] | None:
        if thread.branched_from_id is None:
            return None
        return {
            "thread": thread.branched_from_id,
            "name": thread.branched_from.name,  # type: ignore[union-attr]
            "message": thread.branched_at_id,
        }


class ThreadHitOut(ThreadOut):
    """A thread a search found by its name: the thread, and its project's name (a search
    covers every project)."""

    project_name = serializers.CharField(source="project.name")


class MessageHitOut(Shape[MessageHit]):
    """A message a search found, where it is, and a snippet of its body around the match."""

    id = serializers.IntegerField()
    thread = serializers.IntegerField()
    thread_name = serializers.CharField()
    project = serializers.IntegerField()
    project_name = serializers.CharField()
    archived = serializers.BooleanField()
    from_role = serializers.CharField()
    created_at = serializers.DateTimeField()
    snippet = serializers.CharField()


class UsageOut(serializers.Serializer[Any]):
    """The tokens a thread's replies recorded, summed (SPEC §7.1's `usage` of each RESULT)."""

    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class ThreadReadOut(ThreadOut):
    """One thread as its list shows it, with its replies' tokens summed (the single thread's
    read only: the list leaves them out)."""

    usage = UsageOut()


class StepOut(Shape[Step]):
    """A tool call of a turn (SPEC §7.2): what was called, how it ended, what it gave."""

    id = serializers.IntegerField()
    turn = serializers.IntegerField(source="turn_id")
    call_id = serializers.CharField()
    round = serializers.IntegerField()
    tool = serializers.CharField()
    arguments = serializers.JSONField()
    outcome = serializers.ChoiceField(choices=StepOutcome.values)
    code = serializers.SerializerMethodField()
    result = serializers.JSONField()
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField()

    def get_code(self, step: Step) -> str | None:
        return step.code or None


def running_step(turn_id: int, calling: dict[str, Any]) -> dict[str, Any]:
    """The step shape of the call a run is making now: no id, outcome or end yet."""
    return {
        "id": None,
        "turn": turn_id,
        "call_id": calling.get("call_id"),
        "round": calling.get("round"),
        "tool": calling.get("tool"),
        "arguments": calling.get("arguments"),
        "outcome": None,
        "code": None,
        "result": None,
        "started_at": time_text(datetime.fromisoformat(calling["started_at"])),
        "ended_at": None,
    }


class MessageOut(Shape[Message]):
    id = serializers.IntegerField()
    thread = serializers.IntegerField(source="thread_id", allow_null=True)
    from_role = serializers.CharField()
    from_run = serializers.CharField()
    to_role = serializers.CharField()
    body = serializers.CharField()
    in_reply_to = serializers.IntegerField(source="in_reply_to_id", allow_null=True)
    request = serializers.IntegerField(source="request_id", allow_null=True)
    created_at = serializers.DateTimeField()
    # R24: on a new version of a turn, the turn's first version; else null.
    version_of = serializers.IntegerField(source="version_of_id", allow_null=True)
    # SPEC §7.1: a turn's reply state (null for other messages), and what the model server
    # reported about a RESULT (null when unknown).
    reply_state = serializers.ChoiceField(choices=ReplyState.values, allow_null=True)
    retry_at = serializers.SerializerMethodField()
    failure = serializers.SerializerMethodField()
    model = serializers.CharField(allow_null=True)
    finish_reason = serializers.CharField(allow_null=True)
    usage = serializers.SerializerMethodField()
    # A RESULT's timing: from the model request to its first text, and from the turn it
    # answers to it (null when unknown, and for every other message).
    first_token_ms = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.SerializerMethodField()
    # SPEC §7.2: a turn's tool calls, stored ones only (the thread socket shows a running one).
    steps = serializers.SerializerMethodField()

    def get_steps(self, message: Message) -> list[dict[str, Any]]:
        return [StepOut(step).data for step in message.loaded_steps]

    def get_retry_at(self, message: Message) -> str | None:
        progress = message.progress_or_none if message.message_class == "REQUEST" else None
        return time_text(progress.retry_at if progress is not None else None)

    def get_failure(self, message: Message) -> str | None:
        progress = message.progress_or_none if message.message_class == "REQUEST" else None
        return progress.failure or None if progress is not None else None

    def get_partial(self, message: Message) -> str | None:
        progress = message.progress_or_none if message.message_class == "REQUEST" else None
        if progress is None or progress.state != ReplyState.STOPPED:
            return None
        return progress.draft or None

    def get_duration_ms(self, message: Message) -> int | None:
        # Read with the message where its read annotated it (`selectors.with_turn_start`).
        started = message.turn_created_at
        if message.message_class != "RESULT" or started is None:
            return None
        return max(0, round((message.created_at - started).total_seconds() * 1000))

    def get_usage(self, message: Message) -> dict[str, int | None] | None:
        if message.prompt_tokens is None and message.completion_tokens is None:
            return None
        return {
            "prompt_tokens": message.prompt_tokens,
            "completion_tokens": message.completion_tokens,
        }

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # `class` is a Python keyword, so it cannot be declared as an attribute.
        fields = super().get_fields()
        fields["class"] = serializers.ChoiceField(
            source="message_class", choices=["REQUEST", "RESULT", "NOTICE", "MESSAGE"]
        )
        # What the reply had written when a stop ended it: null unless the turn is `stopped`
        # with text (SPEC §7.1: kept on the turn's record, never a RESULT). Declared here
        # because `partial` is a serializer's own attribute (partial updates).
        fields["partial"] = serializers.SerializerMethodField(method_name="get_partial")
        return fields


class OpenOut(Shape[ThreadOpen]):
    thread = serializers.IntegerField(source="thread_id")
    by = serializers.CharField()
    at = serializers.DateTimeField()


class TrailRowOut(Shape[TrailRow]):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    thread = serializers.IntegerField(source="thread_id", allow_null=True)
    from_role = serializers.CharField()
    from_run = serializers.CharField()
    to_role = serializers.CharField()
    actor = serializers.SerializerMethodField()
    text = serializers.CharField()
    # What the row records (Consoles decide on it, never on the text), the thread's name when
    # it was written, and the channel of a human's or tester's message.
    kind = serializers.ChoiceField(choices=TrailKind.values)
    thread_name = serializers.CharField(allow_null=True)
    via = serializers.ChoiceField(choices=Via.values, allow_null=True)

    def get_actor(self, row: TrailRow) -> dict[str, str]:
        return {"role": row.actor_role, "run": row.actor_run}


class StoppedOut(serializers.Serializer[Any]):
    """One thread a stop reached: the run that held it (null when none did) and its turns
    that became `stopped` (SPEC §7.1)."""

    thread = serializers.IntegerField()
    run = serializers.CharField(allow_null=True)
    turns = serializers.ListField(child=serializers.IntegerField())


def stopped(stop: Stop) -> list[dict[str, Any]]:
    return [
        {"thread": thread, "run": run, "turns": turns} for thread, run, turns in stop.by_thread()
    ]


class DecisionOut(Shape[Decision]):
    id = serializers.IntegerField()
    thread = serializers.IntegerField(source="thread_id", allow_null=True)
    from_role = serializers.CharField()
    from_run = serializers.CharField()
    route_to = serializers.CharField()
    body = serializers.CharField()
    created_at = serializers.DateTimeField()
