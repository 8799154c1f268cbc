"""Output shapes of the tester listener's suite runs (they also describe its OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from broker.actions import suite_comparisons
from broker.models import SuiteCase, SuiteChange, SuiteRun, SuiteRunEnd, SuiteVerdict
from chat.api.shapes import Shape


class SuiteRunCountsOut(serializers.Serializer[dict[str, int]]):
    """A run's cases counted by verdict, and how many regressed (`SuiteRun.counts`)."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # `pass` is a Python keyword, so the fields cannot be declared as attributes; they come
        # from the verdicts themselves.
        names = [*SuiteVerdict.values, SuiteChange.REGRESSED.value]
        return {name: serializers.IntegerField() for name in names}


class CostOut(serializers.Serializer[dict[str, Any]]):
    """What replies used and cost: the tokens and the amount in dollars of the turns whose
    usage (and price) is known, and how many turns had no usage or no price. `amount` is null
    when no turn was priced: unknown, never zero."""

    turns = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    amount = serializers.FloatField(allow_null=True)
    turns_without_usage = serializers.IntegerField()
    turns_without_price = serializers.IntegerField()


class RunCostOut(CostOut):
    """A run's cases' costs summed, and how many of its cases recorded none (their cost is
    unknown, so the sums are then incomplete)."""

    cases_without_cost = serializers.IntegerField()


class SuiteRunOut(Shape[SuiteRun]):
    """A suite run: the suites it covers, when it started and ended (null: not yet), the run it
    is compared with (null: none), and its cases counted."""

    id = serializers.IntegerField()
    suites = serializers.ListField(child=serializers.CharField())
    started_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    baseline = serializers.IntegerField(source="baseline_id", allow_null=True)
    counts = SuiteRunCountsOut()
    # What it selected (with the suites, what `compare: "last"` matches), and its alpha.
    instances = serializers.ListField(child=serializers.CharField())
    keyword = serializers.SerializerMethodField()
    alpha = serializers.FloatField()
    # `running`, `finished` or `halted`; when halted, why (else null).
    state = serializers.ChoiceField(choices=["running", *SuiteRunEnd.values])
    reason = serializers.SerializerMethodField()
    # Its cases' tokens and cost, summed.
    cost = RunCostOut()

    def get_keyword(self, run: SuiteRun) -> str | None:
        return run.keyword or None

    def get_reason(self, run: SuiteRun) -> str | None:
        return run.end_reason or None


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
    # The client's statistics (null: a record from a client before them): the pass rate, its
    # 95% Wilson interval [low, high], and pass^k.
    pass_rate = serializers.FloatField(allow_null=True)
    interval = serializers.SerializerMethodField()
    pass_hat_k = serializers.FloatField(allow_null=True)
    definition_hash = serializers.CharField()
    # The baseline's same case's k/N and the one-sided Fisher p-value of the change (null: not
    # compared).
    baseline_passed_runs = serializers.IntegerField(allow_null=True)
    baseline_runs = serializers.IntegerField(allow_null=True)
    p_value = serializers.FloatField(allow_null=True)
    # What its replies used and cost, as the client counted them (null: a record without).
    cost = CostOut(allow_null=True)
    created_at = serializers.DateTimeField()

    def get_interval(self, case: SuiteCase) -> list[float] | None:
        if case.interval_low is None or case.interval_high is None:
            return None
        return [case.interval_low, case.interval_high]


class ComparedSideOut(serializers.Serializer[Any]):
    """One run's result of a compared case: the case's id there, its verdict and k/N."""

    id = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=SuiteVerdict.values)
    passed_runs = serializers.IntegerField()
    runs = serializers.IntegerField()


class ComparedCaseOut(serializers.Serializer[Any]):
    """A case of one run or both: its change from the other run to this one (`missing`: the
    other run's only), each run's result (null: not in that run) and the one-sided Fisher
    p-value the change rests on (null: nothing compared). `id` is the comparison's cursor:
    this run's case, or the other run's when this run has none."""

    id = serializers.IntegerField()
    suite = serializers.CharField(source="row.suite")
    case = serializers.CharField(source="row.case")
    instance = serializers.CharField(source="row.instance")
    change = serializers.ChoiceField(choices=list(suite_comparisons.ORDER))
    now = ComparedSideOut(allow_null=True)
    other = ComparedSideOut(allow_null=True)
    p_value = serializers.FloatField(allow_null=True)


class ComparisonCountsOut(serializers.Serializer[dict[str, int]]):
    """How many of the compared cases each change counts."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return {change: serializers.IntegerField() for change in suite_comparisons.ORDER}


class ShownRepeatOut(serializers.Serializer[Any]):
    """The repeat shown of a case (its last failing one, else its last): its number, its
    thread and whether it passed (null: not said), and whether that thread could be read."""

    repeat = serializers.IntegerField(source="number")
    thread = serializers.IntegerField(allow_null=True)
    passed = serializers.BooleanField(allow_null=True)
    readable = serializers.BooleanField()


class TurnTextsOut(serializers.Serializer[Any]):
    """One run's side of a turn: what was sent and the reply, as its thread holds them (null:
    not there, or not readable), the turn's state and whether it passed (null: not said)."""

    sent = serializers.CharField(allow_null=True)
    reply = serializers.CharField(allow_null=True)
    state = serializers.CharField(allow_null=True)
    passed = serializers.BooleanField(allow_null=True)


class ComparedTurnOut(serializers.Serializer[Any]):
    """A turn by number, each run's side (null: its repeat had no such turn)."""

    turn = serializers.IntegerField()
    now = TurnTextsOut(allow_null=True)
    other = TurnTextsOut(allow_null=True)
