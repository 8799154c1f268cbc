"""Strict input fields: a field of the wrong type is `invalid`, never silently coerced."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from broker import fields
from broker.refusals import Refusal


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
    """A JSON string that UTF-8 can carry (`broker.fields.clean_text`, the one place that rule
    lives, for every transport); limits and content rules are the broker's too."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("allow_blank", True)
        super().__init__(**kwargs)
        # DRF's own copy of the surrogate rule; the broker's applies instead.
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(validator, ProhibitSurrogateCharactersValidator)
        ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            return fields.clean_text(data, what=self.field_name or "value")
        except Refusal as refusal:
            raise serializers.ValidationError(refusal.detail) from None


class StrictBool(serializers.BooleanField):
    """A JSON boolean (not a string, not a number)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictInteger(serializers.IntegerField):
    """A JSON integer (not a string, a float or a boolean)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictId(StrictInteger):
    """A JSON integer id (not a string, not a boolean)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(**kwargs)


class StrictChoice(serializers.ChoiceField):
    """A JSON string among the choices (DRF's own field compares `str(data)` with them, so it
    judges a number or a list by its text)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=type(data).__name__)
        return super().to_internal_value(data)


class QueryNumber(serializers.IntegerField):
    """A number in a query string: ASCII digits only (`broker.fields.parse_id`), where DRF's
    own field would also take "٣", "1_0" or "1.0"."""

    def to_internal_value(self, data: Any) -> int:
        try:
            return fields.parse_id(data, what=self.field_name or "id")
        except Refusal:
            self.fail("invalid")


class QueryFlag(serializers.Field[bool, str, str, Any]):
    """A yes/no in a query string: exactly `true` or `false` (DRF's own field would also take
    "1", "on", "yes", "True" …)."""

    default_error_messages = {"invalid": "Must be true or false."}
    FLAGS: dict[str, bool] = {"true": True, "false": False}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, str) or data not in self.FLAGS:
            self.fail("invalid")
        return self.FLAGS[data]

    def to_representation(self, value: bool) -> str:
        return "true" if value else "false"


def parse(serializer_class: type[StrictInput], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class ListQuery(StrictInput):
    """`limit` and one cursor (SPEC §6); the broker checks ranges and that only one is given."""

    limit = QueryNumber(required=False, min_value=1, max_value=500)
    after = QueryNumber(required=False, min_value=0)
    before = QueryNumber(required=False, min_value=0)


def list_query(request: Any, serializer_class: type[StrictInput] = ListQuery) -> dict[str, Any]:
    """Query parameters as one flat dict (a repeated parameter is refused)."""
    params = request.query_params
    repeated = [name for name in params if len(params.getlist(name)) > 1]
    if repeated:
        raise serializers.ValidationError({repeated[0]: ["is given more than once"]})
    return parse(serializer_class, {name: params[name] for name in params})
