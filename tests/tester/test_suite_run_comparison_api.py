"""Two stored test runs compared, through the tester listener: `GET
/api/suite-runs/ID/comparison/OTHER` (the cases by change, regressions first, the same ones
apart) and `.../cases/CASE` (a case's replies side by side). Tester only (L8: the human
listener has neither route, `test_suite_run_api`); refusals `{"error", "detail"}` with SPEC §6's
statuses, never a 500."""

from __future__ import annotations

from typing import Any

import pytest

from broker.models import Business
from tests.support.listeners import ListenerClient

COMPARISON = {"run", "other", "counts", "cases", "more"}
COUNTS = {"regressed", "fixed", "changed", "new", "missing", "same"}
ROW = {"id", "suite", "case", "instance", "change", "now", "other", "p_value"}
SIDE = {"id", "verdict", "passed_runs", "runs"}
REPLIES = {"case", "now", "other", "turns", "more"}
REPEAT = {"repeat", "thread", "passed", "readable"}
TEXTS = {"sent", "reply", "state", "passed"}


def refusal(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "detail"}
    return str(response.json()["error"])


def stored_run(
    client: ListenerClient, cases: list[dict[str, Any]], compare: int | None = None
) -> int:
    run = client.post("/api/suite-runs", {"suites": ["smoke"], "compare": compare})
    assert run.status_code == 201, run.text
    run_id = int(run.json()["run"]["id"])
    for case in cases:
        recorded = client.post(f"/api/suite-runs/{run_id}/cases", case)
        assert recorded.status_code == 201, recorded.text
    assert client.post(f"/api/suite-runs/{run_id}/end", {}).status_code == 200
    return run_id


def case(name: str, passed: int, runs: int, **more: Any) -> dict[str, Any]:
    return {
        "suite": "smoke",
        "case": name,
        "instance": "",
        "verdict": "pass" if passed == runs else "fail",
        "passed_runs": passed,
        "runs": runs,
        **more,
    }


@pytest.fixture
def runs(tester_client: ListenerClient, tester_thread_id: int) -> tuple[int, int, int]:
    """A baseline, a run compared with it (greets regressed, refuses fixed) and its case
    greets, whose failing repeat's one turn is in the tester's thread."""
    sent = tester_client.post(
        f"/api/chat/threads/{tester_thread_id}/messages", {"body": "hello there"}
    )
    assert sent.status_code == 201, sent.text
    turn = {"turn": 1, "id": sent.json()["message"]["id"], "reply_id": None, "state": "failed"}
    first = stored_run(
        tester_client, [case("greets", 10, 10, instance="assistant"), case("refuses", 0, 5)]
    )
    repeat = {"repeat": 3, "thread": tester_thread_id, "passed": False, "turns": [turn]}
    second = stored_run(
        tester_client,
        [
            case(
                "greets",
                2,
                10,
                instance="assistant",
                threads=[tester_thread_id],
                repeats=[repeat],
            ),
            case("refuses", 5, 5),
        ],
        compare=first,
    )
    read = tester_client.get(f"/api/suite-runs/{second}").json()
    return first, second, read["cases"][0]["id"]


def test_comparison_answers_its_shape_regressions_first(
    tester_client: ListenerClient, runs: tuple[int, int, int]
) -> None:
    first, second, greets = runs
    answer = tester_client.get(f"/api/suite-runs/{second}/comparison/{first}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == COMPARISON and set(body["counts"]) == COUNTS
    assert (body["run"]["id"], body["other"]["id"], body["more"]) == (second, first, False)
    assert [(row["case"], row["change"]) for row in body["cases"]] == [
        ("greets", "regressed"),
        ("refuses", "fixed"),
    ]
    row = body["cases"][0]
    assert set(row) == ROW and set(row["now"]) == SIDE and set(row["other"]) == SIDE
    assert (row["id"], row["now"]["passed_runs"], row["other"]["passed_runs"]) == (greets, 2, 10)
    assert 0 < row["p_value"] < 0.05
    same = tester_client.get(f"/api/suite-runs/{second}/comparison/{first}?same=true").json()
    assert same["cases"] == [] and same["counts"]["same"] == 0
    # The other way round, the baseline against the later run: decided by the same rule,
    # regressions first still.
    back = tester_client.get(f"/api/suite-runs/{first}/comparison/{second}").json()
    assert [(row["case"], row["change"]) for row in back["cases"]] == [
        ("refuses", "regressed"),
        ("greets", "fixed"),
    ]


def test_compared_case_answers_its_replies_side_by_side(
    tester_client: ListenerClient, runs: tuple[int, int, int], tester_thread_id: int
) -> None:
    first, second, greets = runs
    answer = tester_client.get(f"/api/suite-runs/{second}/comparison/{first}/cases/{greets}")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == REPLIES and set(body["now"]) == REPEAT
    assert body["now"] == {
        "repeat": 3,
        "thread": tester_thread_id,
        "passed": False,
        "readable": True,
    }
    # The baseline's greets kept no repeats.
    assert (body["other"], body["case"]["change"], body["more"]) == (None, "regressed", False)
    [turn] = body["turns"]
    assert set(turn["now"]) == TEXTS and turn["other"] is None
    assert (turn["turn"], turn["now"]["sent"], turn["now"]["reply"]) == (1, "hello there", None)


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=501", "after=-1", "limit=x", "same=yes", "before=1"]
)
def test_comparison_bad_query_is_invalid(
    tester_client: ListenerClient, runs: tuple[int, int, int], query: str
) -> None:
    first, second, _ = runs
    response = tester_client.get(f"/api/suite-runs/{second}/comparison/{first}?{query}")
    assert refusal(response, 400) == "invalid"


@pytest.mark.parametrize("query", ["limit=0", "after=x", "same=true"])
def test_compared_case_bad_query_is_invalid(
    tester_client: ListenerClient, runs: tuple[int, int, int], query: str
) -> None:
    first, second, greets = runs
    path = f"/api/suite-runs/{second}/comparison/{first}/cases/{greets}?{query}"
    assert refusal(tester_client.get(path), 400) == "invalid"


def test_comparison_refusals_are_not_found_or_invalid(
    tester_client: ListenerClient, runs: tuple[int, int, int]
) -> None:
    """A missing run or case is 404, a run compared with itself or a cursor of no compared
    case 400; an id past the databases' integers is 404 too, never a 500."""
    first, second, _ = runs
    base = "/api/suite-runs"
    assert refusal(tester_client.get(f"{base}/{second}/comparison/999999"), 404) == "not-found"
    assert refusal(tester_client.get(f"{base}/999999/comparison/{first}"), 404) == "not-found"
    huge = "9" * 18
    assert refusal(tester_client.get(f"{base}/{second}/comparison/{huge}"), 404) == "not-found"
    assert refusal(tester_client.get(f"{base}/{second}/comparison/{second}"), 400) == "invalid"
    path = f"{base}/{second}/comparison/{first}?after=999999"
    assert refusal(tester_client.get(path), 400) == "invalid"
    # A case of the other run is not this run's.
    other_case = tester_client.get(f"{base}/{first}").json()["cases"][0]["id"]
    path = f"{base}/{second}/comparison/{first}/cases/{other_case}"
    assert refusal(tester_client.get(path), 404) == "not-found"
    path = f"{base}/{second}/comparison/{first}/cases/{huge}"
    assert refusal(tester_client.get(path), 404) == "not-found"
    assert refusal(tester_client.get(f"{base}/{second}/comparison"), 404) == "not-found"


def test_comparison_while_tester_off_is_tester_off(
    business: Business, tester_client: ListenerClient, runs: tuple[int, int, int]
) -> None:
    first, second, greets = runs
    Business.objects.filter(pk=business.pk).update(tester_enabled=False)
    for path in (
        f"/api/suite-runs/{second}/comparison/{first}",
        f"/api/suite-runs/{second}/comparison/{first}/cases/{greets}",
    ):
        assert refusal(tester_client.get(path), 403) == "tester-off"
