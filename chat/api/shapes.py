"""Output shapes of SPEC §6, as DRF serializers (they also describe the OpenAPI schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from broker.actions import Stop
from broker.models import Decision, Message, Project, ReplyState, Thread, ThreadOpen, TrailRow


def time_text(moment: datetime | None) -> str | None:
    """A time as every shape writes it (ISO 8601, UTC), or None."""
    return None if moment is None else serializers.DateTimeField().to_representation(moment)


class ErrorOut(serializers.Serializer[Any]):
    """Every refusal: a stable code and one sentence."""

    error = serializers.CharField()
    detail = serializers.CharField()


class ProjectOut(serializers.Serializer[Project]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    created_at = serializers.DateTimeField()


class ThreadOut(serializers.Serializer[Thread]):
    id = serializers.IntegerField()
    project = serializers.IntegerField(source="project_id")
    name = serializers.CharField()
    owner = serializers.CharField()
    instance = serializers.CharField(source="instance.name")  # type: ignore[assignment]
    created_at = serializers.DateTimeField()


class MessageOut(serializers.Serializer[Message]):
    id = serializers.IntegerField()
    thread = serializers.IntegerField(source="thread_id", allow_null=True)
    from_role = serializers.CharField()
    from_run = serializers.CharField()
    to_role = serializers.CharField()
    body = serializers.CharField()
    in_reply_to = serializers.IntegerField(source="in_reply_to_id", allow_null=True)
    request = serializers.IntegerField(source="request_id", allow_null=True)
    created_at = serializers.DateTimeField()
    # SPEC §7.1: a turn's reply state (null for other messages), and what the model server
    # reported about a RESULT (null when unknown).
    reply_state = serializers.ChoiceField(choices=ReplyState.values, allow_null=True)
    retry_at = serializers.SerializerMethodField()
    failure = serializers.SerializerMethodField()
    model = serializers.CharField(allow_null=True)
    finish_reason = serializers.CharField(allow_null=True)
    usage = serializers.SerializerMethodField()

    def get_retry_at(self, message: Message) -> str | None:
        progress = message.progress_or_none if message.message_class == "REQUEST" else None
        return time_text(progress.retry_at if progress is not None else None)

    def get_failure(self, message: Message) -> str | None:
        progress = message.progress_or_none if message.message_class == "REQUEST" else None
        return progress.failure or None if progress is not None else None

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
        return fields


class OpenOut(serializers.Serializer[ThreadOpen]):
    thread = serializers.IntegerField(source="thread_id")
    by = serializers.CharField()
    at = serializers.DateTimeField()


class ActorOut(serializers.Serializer[Any]):
    role = serializers.CharField()
    run = serializers.CharField()


class TrailRowOut(serializers.Serializer[TrailRow]):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    thread = serializers.IntegerField(source="thread_id", allow_null=True)
    from_role = serializers.CharField()
    from_run = serializers.CharField()
    to_role = serializers.CharField()
    actor = serializers.SerializerMethodField()
    text = serializers.CharField()

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


class DecisionOut(serializers.Serializer[Decision]):
    id = serializers.IntegerField()
    thread = serializers.IntegerField(source="thread_id", allow_null=True)
    from_role = serializers.CharField()
    from_run = serializers.CharField()
    route_to = serializers.CharField()
    body = serializers.CharField()
    created_at = serializers.DateTimeField()
