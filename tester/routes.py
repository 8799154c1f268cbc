"""The tester listener's own routes, bound to its authentication and gates.

The chat API's routes are shared with the human listener (`chat.routes`); these are the
tester's alone: the human listener's urlconf never names them, so there they are 404.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.urls import URLPattern

from chat.api.base import ChatView
from chat.routes import bind
from tester import api

ROUTES: tuple[tuple[str, type[ChatView], str], ...] = (
    ("api/suite-runs", api.SuiteRunsView, "suite-runs"),
    ("api/suite-runs/<id:run_id>", api.SuiteRunView, "suite-run"),
    ("api/suite-runs/<id:run_id>/cases", api.SuiteRunCasesView, "suite-run-cases"),
    ("api/suite-runs/<id:run_id>/end", api.SuiteRunEndView, "suite-run-end"),
    (
        "api/suite-runs/<id:run_id>/comparison/<id:other_id>",
        api.SuiteRunComparisonView,
        "suite-run-comparison",
    ),
    (
        "api/suite-runs/<id:run_id>/comparison/<id:other_id>/cases/<id:case_id>",
        api.SuiteRunComparedCaseView,
        "suite-run-compared-case",
    ),
)


def suite_run_routes(
    *, authentication: Sequence[type[Any]], gates: Sequence[type[Any]]
) -> list[URLPattern]:
    return [
        bind(route, view, name, authentication=authentication, gates=gates)
        for route, view, name in ROUTES
    ]
