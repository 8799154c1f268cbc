"""Output shapes of SPEC §6, as DRF serializers (they also describe the OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from broker.models import Decision, Message, Project, Thread, ThreadClaim, ThreadOpen, TrailRow


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


class StoppedOut(serializers.Serializer[ThreadClaim]):
    thread = serializers.IntegerField(source="thread_id")
    run = serializers.CharField()


class DecisionOut(serializers.Serializer[Decision]):
    id = serializers.IntegerField()
    thread = serializers.IntegerField(source="thread_id", allow_null=True)
    from_role = serializers.CharField()
    from_run = serializers.CharField()
    route_to = serializers.CharField()
    body = serializers.CharField()
    created_at = serializers.DateTimeField()
