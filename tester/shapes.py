"""Output shapes of the tester listener's suite runs (they also describe its OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from broker.models import SuiteCase, SuiteChange, SuiteRun, SuiteVerdict
from chat.api.shapes import Shape


class SuiteRunCountsOut(serializers.Serializer[dict[str, int]]):
    """A run's cases counted by verdict, and how many regressed (`SuiteRun.counts`)."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # `pass` is a Python keyword, so the fields cannot be declared as attributes; they come
        # from the verdicts themselves.
        names = [*SuiteVerdict.values, SuiteChange.REGRESSED.value]
        return {name: serializers.IntegerField() for name in names}


class SuiteRunOut(Shape[SuiteRun]):
    """A suite run: the suites it covers, when it started and ended (null: not yet), the run it
    is compared with (null: none), and its cases counted."""

    id = serializers.IntegerField()
    suites = serializers.ListField(child=serializers.CharField())
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    baseline = serializers.IntegerField(source="baseline_id", allow_null=True)
    counts = SuiteRunCountsOut()


class SuiteCaseFailureOut(serializers.Serializer[dict[str, Any]]):
    """One failed expectation of a case: the repeat and turn it was in (turn null: the case as
    a whole), what was sent, expected, and what came."""

    repeat = serializers.IntegerField()
    turn = serializers.IntegerField(allow_null=True)
    sent = serializers.CharField(allow_null=True)
    expected = serializers.CharField()
    actual = serializers.CharField()


@extend_schema_serializer(deprecate_fields=["attempts"])
class SuiteCaseOut(Shape[SuiteCase]):
    """A case's result in a run: its verdict over `runs` repeats, and how that compares with
    the baseline's same case (`change`)."""

    id = serializers.IntegerField()
    suite = serializers.CharField()
    case = serializers.CharField()
    instance = serializers.CharField()  # type: ignore[assignment]
    verdict = serializers.ChoiceField(choices=SuiteVerdict.values)
    passed_runs = serializers.IntegerField()
    runs = serializers.IntegerField()
    change = serializers.ChoiceField(choices=SuiteChange.values)
    threads = serializers.ListField(child=serializers.IntegerField())
    failures = SuiteCaseFailureOut(many=True)
    # The runner's own detail of each repeat, as it sent it; `attempts` is its deprecated name.
    repeats = serializers.ListField(child=serializers.DictField(), source="attempts")
    attempts = serializers.ListField(child=serializers.DictField())
    created_at = serializers.DateTimeField()
