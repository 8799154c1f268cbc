"""The tester listener's own API: the stored history of conversation-test runs.

Only the tester listener serves these routes (the human listener has none of them: 404), and
the fence admits exactly their three writes (L4). Each view parses its input, calls one broker
verb with the tester actor, and serialises the answer; every write honours an
Idempotency-Key (R21).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
    inline_serializer,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from broker.actions import suite_comparisons, suite_runs
from broker.models import SuiteVerdict
from broker.suite_fields import (
    COST_COUNT_MAX,
    DEFAULT_ALPHA,
    END_REASON_MAX,
    FAILURE_TEXT_MAX,
    FAILURES_MAX,
    INSTANCE_NAME_MAX,
    INSTANCES_MAX,
    INTEGER_MAX,
    KEYWORD_MAX,
    RUNS_MAX,
    SUITE_NAME_MAX,
    SUITES_MAX,
    TURN_MAX,
)
from chat.api.base import ChatView
from chat.api.docs import ERRORS
from chat.api.inputs import (
    QueryFlag,
    QueryNumber,
    StrictChoice,
    StrictId,
    StrictInput,
    StrictInteger,
    StrictString,
    list_query,
    parse,
)
from tester.shapes import (
    ComparedCaseOut,
    ComparedTurnOut,
    ComparisonCountsOut,
    ShownRepeatOut,
    SuiteCaseOut,
    SuiteRunOut,
)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": [suite_runs.COMPARE_LAST]},
            {"type": "integer", "minimum": 1, "maximum": INTEGER_MAX},
        ],
        "nullable": True,
        "description": 'The baseline: null (none), "last" or a run id.',
    }
)
class RunComparison(serializers.Field[Any, Any, Any, Any]):
    """`compare`: JSON null, the string `"last"`, or a run id (an integer, not a string)."""

    default_error_messages = {"invalid": 'Must be null, "last" or a run id.'}

    def to_internal_value(self, data: Any) -> Any:
        if data == suite_runs.COMPARE_LAST:
            return data
        if isinstance(data, int) and not isinstance(data, bool) and 1 <= data <= INTEGER_MAX:
            return data
        self.fail("invalid")

    def to_representation(self, value: Any) -> Any:
        return value


class StrictNumber(serializers.FloatField):
    """A JSON number (an integer or a float, not a string or a boolean); whether it is finite
    and within its range is the broker's to say (`broker.suite_fields`)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        try:
            return float(data)
        except OverflowError:
            # JSON reads an integer of any length; one past every float is no number here.
            self.fail("invalid")


class SuiteCaseFailureInput(StrictInput):
    """One failed expectation of a case, as the runner reports it."""

    repeat = StrictInteger(min_value=0, max_value=RUNS_MAX)
    turn = StrictInteger(min_value=0, max_value=TURN_MAX, allow_null=True)
    sent = StrictString(max_length=FAILURE_TEXT_MAX, allow_null=True)
    expected = StrictString(max_length=FAILURE_TEXT_MAX)
    actual = StrictString(max_length=FAILURE_TEXT_MAX)


class SuiteCaseCostInput(StrictInput):
    """What a case's replies used and cost, as the runner counted them; whether the counts
    hold together is the broker's to say (`broker.suite_fields.clean_cost`)."""

    turns = StrictInteger(min_value=0, max_value=COST_COUNT_MAX)
    prompt_tokens = StrictInteger(min_value=0, max_value=COST_COUNT_MAX)
    completion_tokens = StrictInteger(min_value=0, max_value=COST_COUNT_MAX)
    # In dollars; null when no turn was priced.
    amount = StrictNumber(allow_null=True)
    turns_without_usage = StrictInteger(min_value=0, max_value=COST_COUNT_MAX)
    turns_without_price = StrictInteger(min_value=0, max_value=COST_COUNT_MAX)


class SuiteRunsView(ChatView):
    """The business's suite runs, newest first, and a new one."""

    class SuiteRunListQuery(StrictInput):
        limit = QueryNumber(required=False, min_value=1, max_value=500)
        before = QueryNumber(required=False, min_value=0)

    class SuiteRunStartInput(StrictInput):
        suites = serializers.ListField(
            child=StrictString(allow_blank=False, min_length=1, max_length=SUITE_NAME_MAX),
            min_length=1,
            max_length=SUITES_MAX,
        )
        compare = RunComparison(required=False, allow_null=True)
        # A change is significant when its p-value is below alpha.
        alpha = StrictNumber(required=False, help_text=f"0 < alpha < 1; default {DEFAULT_ALPHA}")
        # The instances the cases are planned on ("" is the business's default), and the case
        # selection (null: every case): with the suites, what `"last"` matches.
        instances = serializers.ListField(
            child=StrictString(max_length=INSTANCE_NAME_MAX),
            max_length=INSTANCES_MAX,
            required=False,
        )
        keyword = StrictString(max_length=KEYWORD_MAX, allow_null=True, required=False)

    @extend_schema(
        operation_id="suite_runs_list",
        parameters=[
            OpenApiParameter("limit", int, description="Page size: 1–500, default 100."),
            OpenApiParameter("before", int, description="The newest runs with a smaller id."),
        ],
        responses={
            200: inline_serializer("SuiteRuns", {"runs": SuiteRunOut(many=True)}),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> Response:
        query = list_query(request, self.SuiteRunListQuery)
        runs = suite_runs.list_suite_runs(self.actor(), **query)
        return Response({"runs": SuiteRunOut(runs, many=True).data})  # type: ignore[arg-type]

    @extend_schema(
        operation_id="suite_runs_start",
        request=SuiteRunStartInput,
        responses={
            201: inline_serializer("SuiteRunStarted", {"run": SuiteRunOut()}),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        def write() -> Response:
            data = parse(self.SuiteRunStartInput, request.data)
            run = suite_runs.start_suite_run(
                self.actor(),
                suites=data["suites"],
                compare=data.get("compare"),
                alpha=data.get("alpha", DEFAULT_ALPHA),
                instances=data.get("instances", []),
                keyword=data.get("keyword"),
            )
            return Response({"run": SuiteRunOut(run).data}, status=201)

        return self.answer_once(request, write)


class SuiteRunView(ChatView):
    """One of the business's suite runs, with a page of its cases in id order."""

    class SuiteRunReadQuery(StrictInput):
        limit = QueryNumber(required=False, min_value=1, max_value=500)
        after = QueryNumber(required=False, min_value=0)

    @extend_schema(
        operation_id="suite_run_read",
        parameters=[
            OpenApiParameter("limit", int, description="Page size: 1–500 cases, default 100."),
            OpenApiParameter("after", int, description="The cases after this case id."),
        ],
        responses={
            200: inline_serializer(
                "SuiteRunRead",
                {
                    "run": SuiteRunOut(),
                    "cases": SuiteCaseOut(many=True),
                    "more": serializers.BooleanField(
                        help_text="More cases follow: ask again with after = the last case's id."
                    ),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, run_id: int) -> Response:
        query = list_query(request, self.SuiteRunReadQuery)
        found = suite_runs.read_suite_run(self.actor(), run_id=run_id, **query)
        return Response(
            {
                "run": SuiteRunOut(found.run).data,
                "cases": SuiteCaseOut(found.cases, many=True).data,  # type: ignore[arg-type]
                "more": found.more,
            }
        )


class SuiteRunComparisonView(ChatView):
    """Two of the business's suite runs compared case by case: regressions first, the same
    cases apart."""

    class SuiteRunComparisonQuery(StrictInput):
        limit = QueryNumber(required=False, min_value=1, max_value=500)
        after = QueryNumber(required=False, min_value=0)
        same = QueryFlag(required=False)

    @extend_schema(
        operation_id="suite_run_compare",
        parameters=[
            OpenApiParameter("limit", int, description="Page size: 1–500 cases, default 100."),
            OpenApiParameter("after", int, description="The cases after this compared case's id."),
            OpenApiParameter(
                "same", bool, description="`true`: the cases whose change is `same` alone."
            ),
        ],
        responses={
            200: inline_serializer(
                "SuiteRunComparison",
                {
                    "run": SuiteRunOut(),
                    "other": SuiteRunOut(),
                    "counts": ComparisonCountsOut(),
                    "cases": ComparedCaseOut(many=True),
                    "more": serializers.BooleanField(
                        help_text="More cases follow: ask again with after = the last case's id."
                    ),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, run_id: int, other_id: int) -> Response:
        query = list_query(request, self.SuiteRunComparisonQuery)
        found = suite_comparisons.compare_suite_runs(
            self.actor(), run_id=run_id, other_id=other_id, **query
        )
        return Response(
            {
                "run": SuiteRunOut(found.run).data,
                "other": SuiteRunOut(found.other).data,
                "counts": found.counts,
                "cases": ComparedCaseOut(found.cases, many=True).data,
                "more": found.more,
            }
        )


class SuiteRunComparedCaseView(ChatView):
    """A case of a run beside the other run's same case: the repeat shown of each and their
    turns side by side, what was sent and each reply."""

    class SuiteRunComparedCaseQuery(StrictInput):
        limit = QueryNumber(required=False, min_value=1, max_value=500)
        after = QueryNumber(required=False, min_value=0)

    @extend_schema(
        operation_id="suite_run_compare_case",
        parameters=[
            OpenApiParameter("limit", int, description="Page size: 1–500 turns, default 100."),
            OpenApiParameter("after", int, description="The turns after this turn number."),
        ],
        responses={
            200: inline_serializer(
                "SuiteRunComparedCase",
                {
                    "case": ComparedCaseOut(),
                    "now": ShownRepeatOut(allow_null=True),
                    "other": ShownRepeatOut(allow_null=True),
                    "turns": ComparedTurnOut(many=True),
                    "more": serializers.BooleanField(
                        help_text="More turns follow: ask again with after = the last turn."
                    ),
                },
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, run_id: int, other_id: int, case_id: int) -> Response:
        query = list_query(request, self.SuiteRunComparedCaseQuery)
        found = suite_comparisons.compare_suite_case(
            self.actor(), run_id=run_id, other_id=other_id, case_id=case_id, **query
        )
        return Response(
            {
                "case": ComparedCaseOut(found.case).data,
                "now": None if found.now is None else ShownRepeatOut(found.now).data,
                "other": None if found.other is None else ShownRepeatOut(found.other).data,
                "turns": ComparedTurnOut(found.turns, many=True).data,
                "more": found.more,
            }
        )


class SuiteRunCasesView(ChatView):
    """Record one case's result in a run that has not ended; `change` is the broker's."""

    @extend_schema_serializer(deprecate_fields=["attempts"])
    class SuiteCaseInput(StrictInput):
        suite = StrictString(allow_blank=False, min_length=1, max_length=SUITE_NAME_MAX)
        case = StrictString(allow_blank=False, min_length=1, max_length=SUITE_NAME_MAX)
        # Empty for a case that reached no instance (no thread).
        instance = StrictString(max_length=INSTANCE_NAME_MAX)
        verdict = StrictChoice(choices=SuiteVerdict.values)
        passed_runs = StrictInteger(min_value=0, max_value=RUNS_MAX)
        runs = StrictInteger(min_value=1, max_value=RUNS_MAX)
        threads = serializers.ListField(child=StrictId(), max_length=RUNS_MAX, required=False)
        failures = serializers.ListField(
            child=SuiteCaseFailureInput(), max_length=FAILURES_MAX, required=False
        )
        # The runner's own detail of each repeat; `attempts` is its deprecated name.
        repeats = serializers.ListField(
            child=serializers.DictField(), max_length=RUNS_MAX, required=False
        )
        attempts = serializers.ListField(
            child=serializers.DictField(), max_length=RUNS_MAX, required=False
        )
        # The client's statistics over the repeats: all three or none.
        pass_rate = StrictNumber(required=False)
        interval = serializers.ListField(
            child=StrictNumber(), min_length=2, max_length=2, required=False
        )
        pass_hat_k = StrictNumber(required=False)
        # The sha256 of the case's definition (turns, expectations, judge).
        definition_hash = StrictString(min_length=64, max_length=64, required=False)
        # What its replies used and cost, as the runner counted them.
        cost = SuiteCaseCostInput(required=False)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            if "repeats" in attrs and "attempts" in attrs:
                raise serializers.ValidationError(
                    {"attempts": ["is the deprecated name of repeats: give one of them"]}
                )
            return attrs

    @extend_schema(
        operation_id="suite_run_record",
        request=SuiteCaseInput,
        responses={
            201: inline_serializer("SuiteCaseRecorded", {"case": SuiteCaseOut()}),
            **ERRORS,
        },
    )
    def post(self, request: Request, run_id: int) -> Response:
        def write() -> Response:
            data = parse(self.SuiteCaseInput, request.data)
            case = suite_runs.record_suite_case(
                self.actor(),
                run_id=run_id,
                suite=data["suite"],
                case=data["case"],
                instance=data["instance"],
                verdict=data["verdict"],
                passed_runs=data["passed_runs"],
                runs=data["runs"],
                threads=data.get("threads", []),
                failures=[dict(failure) for failure in data.get("failures", [])],
                attempts=data.get("repeats", data.get("attempts", [])),
                pass_rate=data.get("pass_rate"),
                interval=data.get("interval"),
                pass_hat_k=data.get("pass_hat_k"),
                definition_hash=data.get("definition_hash"),
                cost=dict(data["cost"]) if "cost" in data else None,
            )
            return Response({"case": SuiteCaseOut(case).data}, status=201)

        return self.answer_once(request, write)


class SuiteRunEndView(ChatView):
    """End a run: it takes no more cases (ending it again answers it as it is). Without a
    reason it finished; with one it was halted (refused, interrupted)."""

    class SuiteRunEndInput(StrictInput):
        reason = StrictString(max_length=END_REASON_MAX, required=False)

    @extend_schema(
        operation_id="suite_run_end",
        request=SuiteRunEndInput,
        responses={200: inline_serializer("SuiteRunEnded", {"run": SuiteRunOut()}), **ERRORS},
    )
    def post(self, request: Request, run_id: int) -> Response:
        def write() -> Response:
            data = parse(self.SuiteRunEndInput, request.data)
            run = suite_runs.end_suite_run(self.actor(), run_id=run_id, reason=data.get("reason"))
            return Response({"run": SuiteRunOut(run).data})

        return self.answer_once(request, write)
