"""Strict input fields: a field of the wrong type is `invalid`, never silently coerced."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class StrictInput(serializers.Serializer[Any]):
    """A JSON object with exactly the declared fields; anything else is refused."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"body": ["must be a JSON object"]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0]: ["is not a known field"]})
        return super().to_internal_value(data)


class StrictString(serializers.CharField):
    """A JSON string; limits and content rules are the broker's (`broker.fields`)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return data


class StrictId(serializers.IntegerField):
    """A JSON integer id (not a string, not a boolean)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


def parse(serializer_class: type[StrictInput], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class ListQuery(StrictInput):
    """`limit` and one cursor (SPEC §6); the broker checks ranges and that only one is given."""

    limit = serializers.IntegerField(required=False, min_value=1, max_value=500)
    after = serializers.IntegerField(required=False, min_value=0, max_value=2**63 - 1)
    before = serializers.IntegerField(required=False, min_value=0, max_value=2**63 - 1)


def list_query(request: Any, serializer_class: type[StrictInput] = ListQuery) -> dict[str, Any]:
    """Query parameters as one flat dict (a repeated parameter is refused)."""
    params = request.query_params
    repeated = [name for name in params if len(params.getlist(name)) > 1]
    if repeated:
        raise serializers.ValidationError({repeated[0]: ["is given more than once"]})
    return parse(serializer_class, {name: params[name] for name in params})
