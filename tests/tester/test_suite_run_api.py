"""The suite runs' routes: on the tester listener only (L8), their writes through the fence
(L4) and L3's gates, refusals `{"error", "detail"}` with SPEC §6's statuses, R21's keys."""

from __future__ import annotations

from typing import Any

import pytest

from broker.models import Business, SuiteCase, SuiteRun
from tests.support.listeners import ListenerClient
from tests.support.suite_runs import CASE_COST

RUN = {
    "id",
    "suites",
    "started_at",
    "ended_at",
    "baseline",
    "counts",
    "instances",
    "keyword",
    "alpha",
    "state",
    "reason",
    "cost",
}
COUNTS = {"pass", "flaky", "fail", "error", "regressed"}
CASE = {
    "id",
    "suite",
    "case",
    "instance",
    "verdict",
    "passed_runs",
    "runs",
    "change",
    "threads",
    "failures",
    "repeats",
    "attempts",
    "pass_rate",
    "interval",
    "pass_hat_k",
    "definition_hash",
    "baseline_passed_runs",
    "baseline_runs",
    "p_value",
    "cost",
    "created_at",
}


def case_body(**changes: Any) -> dict[str, Any]:
    return {
        "suite": "smoke",
        "case": "greets",
        "instance": "assistant",
        "verdict": "pass",
        "passed_runs": 1,
        "runs": 1,
        **changes,
    }


def refusal(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    assert set(response.json()) == {"error", "detail"}
    return str(response.json()["error"])


@pytest.fixture
def run_id(tester_client: ListenerClient) -> int:
    started = tester_client.post("/api/suite-runs", {"suites": ["smoke"]})
    assert started.status_code == 201, started.text
    return int(started.json()["run"]["id"])


def stored() -> tuple[int, int]:
    return SuiteRun.objects.count(), SuiteCase.objects.count()


def test_suite_run_routes_answer_their_shapes_on_the_tester_listener(
    tester_client: ListenerClient, tester_thread_id: int
) -> None:
    """Start, record, end, list, read: each 2xx with the RUN and CASE shapes."""
    first = tester_client.post("/api/suite-runs", {"suites": ["smoke", "billing"]})
    assert (first.status_code, set(first.json())) == (201, {"run"})
    run = first.json()["run"]
    assert set(run) == RUN and set(run["counts"]) == COUNTS
    assert (run["suites"], run["baseline"], run["ended_at"]) == (["billing", "smoke"], None, None)
    recorded = tester_client.post(
        f"/api/suite-runs/{run['id']}/cases",
        case_body(
            verdict="fail",
            passed_runs=0,
            runs=4,
            threads=[tester_thread_id],
            failures=[{"repeat": 1, "turn": 0, "sent": "hi", "expected": "hello", "actual": "no"}],
            repeats=[{"thread": tester_thread_id, "ms": [812.5], "model": None}],
        ),
    )
    assert (recorded.status_code, set(recorded.json())) == (201, {"case"})
    case = recorded.json()["case"]
    assert set(case) == CASE
    assert (case["verdict"], case["change"], case["threads"]) == ("fail", "new", [tester_thread_id])
    assert case["repeats"] == [{"thread": tester_thread_id, "ms": [812.5], "model": None}]
    ended = tester_client.post(f"/api/suite-runs/{run['id']}/end", {})
    assert (ended.status_code, set(ended.json())) == (200, {"run"})
    assert ended.json()["run"]["ended_at"] is not None
    assert ended.json()["run"]["counts"] == {
        "pass": 0,
        "flaky": 0,
        "fail": 1,
        "error": 0,
        "regressed": 0,
    }

    second = tester_client.post(
        "/api/suite-runs", {"suites": ["billing", "smoke"], "compare": "last"}
    ).json()["run"]
    assert second["baseline"] == run["id"]
    fixed = tester_client.post(
        f"/api/suite-runs/{second['id']}/cases", case_body(passed_runs=4, runs=4)
    ).json()["case"]
    assert (fixed["change"], fixed["p_value"]) == ("fixed", pytest.approx(1 / 70))
    assert (fixed["baseline_passed_runs"], fixed["baseline_runs"]) == (0, 4)

    listed = tester_client.get("/api/suite-runs")
    assert (listed.status_code, set(listed.json())) == (200, {"runs"})
    assert [r["id"] for r in listed.json()["runs"]] == [second["id"], run["id"]]
    assert all(set(r) == RUN for r in listed.json()["runs"])
    paged = tester_client.get(f"/api/suite-runs?before={second['id']}&limit=1").json()["runs"]
    assert [r["id"] for r in paged] == [run["id"]]

    read = tester_client.get(f"/api/suite-runs/{run['id']}")
    assert (read.status_code, set(read.json())) == (200, {"run", "cases", "more"})
    assert read.json()["run"] == ended.json()["run"]
    assert (read.json()["cases"], read.json()["more"]) == ([case], False)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/suite-runs"),
        ("POST", "/api/suite-runs"),
        ("GET", "/api/suite-runs/{run}"),
        ("POST", "/api/suite-runs/{run}/cases"),
        ("POST", "/api/suite-runs/{run}/end"),
        ("GET", "/api/suite-runs/{run}/comparison/{run}"),
        ("GET", "/api/suite-runs/{run}/comparison/{run}/cases/1"),
    ],
)
def test_suite_run_routes_are_not_found_on_the_human_listener(
    human_client: ListenerClient,
    anonymous_client: ListenerClient,
    run_id: int,
    broker_calls: list[str],
    method: str,
    path: str,
) -> None:
    """L8: the routes are the tester listener's; the human listener has none of them, signed
    in or not, and never calls the broker for them."""
    broker_calls.clear()
    body = {"suites": ["smoke"]} if method == "POST" else None
    before = (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True)))
    for client in (human_client, anonymous_client):
        response = client.request(method, path.format(run=run_id), json=body)
        assert refusal(response, 404) == "not-found"
        # So that a client pointed here can say it reached the human listener.
        assert response.headers["X-Mosaic-Listener"] == "human"
    assert broker_calls == []
    assert (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True))) == before


def test_a_route_the_tester_listener_lacks_answers_404_naming_it(
    tester_client: ListenerClient,
) -> None:
    response = tester_client.get("/api/no-such-route")
    assert refusal(response, 404) == "not-found"
    assert response.headers["X-Mosaic-Listener"] == "tester"


WRITES = [
    ("/api/suite-runs", {"suites": ["smoke"]}),
    ("/api/suite-runs/{run}/cases", case_body()),
    ("/api/suite-runs/{run}/end", {}),
]


@pytest.mark.parametrize(("path", "body"), WRITES, ids=["start", "record", "end"])
@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Origin": "http://evil.example"}, 403, "origin-refused"),
        ({"Origin": "http://127.0.0.1:7332"}, 403, "origin-refused"),
        ({"Sec-Fetch-Site": "cross-site"}, 403, "fetch-metadata-refused"),
        ({"Content-Type": "text/plain"}, 415, "unsupported-media-type"),
        ({"X-User": "ada"}, 403, "proxy-header-refused"),
    ],
    ids=["origin", "human-origin", "fetch-metadata", "text-plain", "proxy-header"],
)
def test_suite_run_write_refused_by_l3_never_calls_broker(
    tester_client: ListenerClient,
    run_id: int,
    broker_calls: list[str],
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    status: int,
    code: str,
) -> None:
    """L3 holds for the suite runs' writes as for every tester write (W2): refused with its
    code, the broker never called, nothing stored or ended."""
    broker_calls.clear()
    before = (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True)))
    response = tester_client.post(path.format(run=run_id), body, headers=headers)
    assert refusal(response, status) == code
    assert broker_calls == []
    assert (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True))) == before


@pytest.mark.parametrize(("path", "body"), WRITES, ids=["start", "record", "end"])
def test_suite_run_write_while_tester_off_is_tester_off(
    business: Business, tester_client: ListenerClient, run_id: int, path: str, body: Any
) -> None:
    Business.objects.filter(pk=business.pk).update(tester_enabled=False)
    response = tester_client.post(path.format(run=run_id), body)
    assert refusal(response, 403) == "tester-off"


@pytest.mark.parametrize(("path", "body"), WRITES, ids=["start", "record", "end"])
def test_suite_run_write_repeated_with_key_answers_once(
    tester_client: ListenerClient, run_id: int, path: str, body: dict[str, Any]
) -> None:
    """R21: the same key and body answer the first answer and store nothing new; the same key
    with another body is `idempotency-key-reused`."""
    headers = {"Idempotency-Key": "suite-1"}
    first = tester_client.post(path.format(run=run_id), body, headers=headers)
    after_first = (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True)))
    again = tester_client.post(path.format(run=run_id), body, headers=headers)
    assert first.status_code in (200, 201), first.text
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert (stored(), list(SuiteRun.objects.values_list("ended_at", flat=True))) == after_first
    other = tester_client.post(path.format(run=run_id), {"other": 1}, headers=headers)
    assert refusal(other, 422) == "idempotency-key-reused"


@pytest.mark.parametrize("name", ["repeats", "attempts"])
def test_suite_run_case_repeats_are_served_under_their_deprecated_name_too(
    tester_client: ListenerClient, run_id: int, tester_thread_id: int, name: str
) -> None:
    """`attempts`, the deprecated name of `repeats`, is still taken and still served, with the
    same list as `repeats`."""
    repeats = [{"repeat": 1, "thread": tester_thread_id, "passed": True}]
    response = tester_client.post(
        f"/api/suite-runs/{run_id}/cases", case_body(threads=[tester_thread_id], **{name: repeats})
    )
    assert response.status_code == 201, response.text
    case = response.json()["case"]
    assert case["repeats"] == case["attempts"] == repeats
    [read] = tester_client.get(f"/api/suite-runs/{run_id}").json()["cases"]
    assert read["repeats"] == read["attempts"] == repeats


def test_suite_run_case_naming_the_humans_thread_is_thread_not_owned(
    tester_client: ListenerClient, run_id: int, tester_thread_id: int, human_thread_id: int
) -> None:
    """R1 over HTTP: a case's threads are the tester's own; the human's is 403."""
    response = tester_client.post(
        f"/api/suite-runs/{run_id}/cases",
        case_body(threads=[tester_thread_id, human_thread_id]),
    )
    assert refusal(response, 403) == "thread-not-owned"
    assert SuiteCase.objects.count() == 0


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/suite-runs", {"suites": ["smoke"], "compare": 999999}),
        ("POST", "/api/suite-runs/999999/cases", case_body()),
        ("POST", "/api/suite-runs/999999/end", {}),
        ("GET", "/api/suite-runs/999999", None),
        ("GET", "/api/suite-runs/99999999999999999999999", None),
        ("POST", "/api/suite-runs/{run}/cases", case_body(threads=[999999])),
    ],
)
def test_suite_run_unknown_ids_are_not_found(
    tester_client: ListenerClient, run_id: int, method: str, path: str, body: Any
) -> None:
    response = tester_client.request(method, path.format(run=run_id), json=body)
    assert refusal(response, 404) == "not-found"


def test_suite_run_case_into_ended_run_or_twice_is_invalid(
    tester_client: ListenerClient, run_id: int
) -> None:
    path = f"/api/suite-runs/{run_id}/cases"
    assert tester_client.post(path, case_body()).status_code == 201
    assert refusal(tester_client.post(path, case_body(verdict="fail", passed_runs=0)), 400) == (
        "invalid"
    )
    tester_client.post(f"/api/suite-runs/{run_id}/end", {})
    assert refusal(tester_client.post(path, case_body(case="later")), 400) == "invalid"
    assert SuiteCase.objects.count() == 1


BAD_STARTS: list[Any] = [
    {},
    {"suites": []},
    {"suites": "smoke"},
    {"suites": [""]},
    {"suites": ["x" * 81]},
    {"suites": ["smoke", "smoke"]},
    {"suites": ["smoke"], "compare": "first"},
    {"suites": ["smoke"], "compare": True},
    {"suites": ["smoke"], "compare": 0},
    {"suites": ["smoke"], "compare": "1"},
    {"suites": ["smoke"], "compare": 1.0},
    {"suites": ["smoke"], "compare": 10**30},
    {"suites": ["smoke"], "extra": 1},
    {"suites": ["smoke"], "alpha": 0},
    {"suites": ["smoke"], "alpha": 1},
    {"suites": ["smoke"], "alpha": "0.05"},
    {"suites": ["smoke"], "alpha": None},
    {"suites": ["smoke"], "instances": "assistant"},
    {"suites": ["smoke"], "instances": ["a", "a"]},
    {"suites": ["smoke"], "keyword": ""},
    {"suites": ["smoke"], "keyword": 5},
    ["smoke"],
]
BAD_CASES: list[Any] = [
    case_body(verdict="ok"),
    case_body(verdict=None),
    case_body(runs=0),
    case_body(runs="1"),
    case_body(passed_runs=2),
    case_body(runs=10**30),
    case_body(change="fixed"),
    case_body(threads=["1"]),
    case_body(threads=[True]),
    case_body(failures=[{"repeat": 1}]),
    case_body(failures=[{"repeat": 1, "turn": 0, "sent": 1, "expected": "e", "actual": "a"}]),
    case_body(repeats=[1]),
    case_body(repeats=[{"text": "a\u0000b"}]),
    case_body(repeats=[{"text": "\ud800"}]),
    case_body(attempts=[1]),
    case_body(attempts=[{"text": "a\u0000b"}]),
    case_body(attempts=[{"text": "\ud800"}]),
    # One list under both its names.
    case_body(repeats=[{"repeat": 1}], attempts=[{"repeat": 1}]),
    case_body(pass_rate=1.0),
    case_body(pass_rate=1.0, interval=[0.2], pass_hat_k=1.0),
    case_body(pass_rate="1", interval=[0.2, 1.0], pass_hat_k=1.0),
    case_body(pass_rate=0.1, interval=[0.2, 1.0], pass_hat_k=1.0),
    case_body(definition_hash="x" * 64),
    case_body(definition_hash=5),
    case_body(cost=None),
    case_body(cost=[2, 11, 2]),
    case_body(cost={**CASE_COST, "currency": "USD"}),
    case_body(cost={key: value for key, value in CASE_COST.items() if key != "amount"}),
    case_body(cost={**CASE_COST, "amount": "0.021"}),
    case_body(cost={**CASE_COST, "amount": None}),
    case_body(cost={**CASE_COST, "prompt_tokens": 1.5}),
    case_body(cost={**CASE_COST, "turns": 2**63}),
    case_body(cost={**CASE_COST, "turns_without_usage": 3}),
    # An integer past any float: refused, never a 500.
    case_body(cost={**CASE_COST, "amount": 10**400}),
    case_body(pass_rate=10**400, interval=[0.0, 1.0]),
    {key: value for key, value in case_body().items() if key != "verdict"},
]


@pytest.mark.parametrize("body", BAD_STARTS, ids=repr)
def test_suite_run_bad_start_is_invalid(
    tester_client: ListenerClient, run_id: int, body: Any
) -> None:
    assert refusal(tester_client.post("/api/suite-runs", body), 400) == "invalid"
    assert stored() == (1, 0)


@pytest.mark.parametrize("body", BAD_CASES, ids=range(len(BAD_CASES)))
def test_suite_run_bad_case_is_invalid(
    tester_client: ListenerClient, run_id: int, body: Any
) -> None:
    response = tester_client.post(f"/api/suite-runs/{run_id}/cases", body)
    assert refusal(response, 400) == "invalid"
    assert stored() == (1, 0)


def test_suite_run_stores_the_selection_statistics_and_a_halted_end(
    tester_client: ListenerClient,
) -> None:
    """A run's selection and alpha, a case's statistics and definition hash, served as
    stored; an end with a reason is `halted` with it, one without `finished`."""
    started = tester_client.post(
        "/api/suite-runs",
        {"suites": ["smoke"], "alpha": 0.01, "instances": ["", "helper"], "keyword": "greets"},
    ).json()["run"]
    assert (started["alpha"], started["instances"], started["keyword"]) == (
        0.01,
        ["", "helper"],
        "greets",
    )
    assert (started["state"], started["reason"]) == ("running", None)
    statistics = {
        "pass_rate": 1.0,
        "interval": [0.20654329147389294, 1.0],
        "pass_hat_k": 1.0,
        "definition_hash": "0" * 64,
    }
    case = tester_client.post(
        f"/api/suite-runs/{started['id']}/cases", case_body(instance="", **statistics)
    ).json()["case"]
    assert {key: case[key] for key in statistics} == statistics
    halted = tester_client.post(
        f"/api/suite-runs/{started['id']}/end", {"reason": "tester-off: tests are off"}
    ).json()["run"]
    assert (halted["state"], halted["reason"]) == ("halted", "tester-off: tests are off")
    plain = tester_client.post("/api/suite-runs", {"suites": ["smoke"]}).json()["run"]
    assert (plain["alpha"], plain["instances"], plain["keyword"]) == (0.05, [], None)
    finished = tester_client.post(f"/api/suite-runs/{plain['id']}/end", {}).json()["run"]
    assert (finished["state"], finished["reason"]) == ("finished", None)


def test_suite_run_serves_each_cases_cost_and_the_runs_summed(
    tester_client: ListenerClient, run_id: int
) -> None:
    """SPEC §6.3: a case's cost is served as recorded (null for a record without one); the
    run's is its cases' summed, with how many recorded none, its amount null while nothing was
    priced."""
    path = f"/api/suite-runs/{run_id}"
    empty = tester_client.get(path).json()["run"]["cost"]
    assert (empty["amount"], empty["turns"], empty["cases_without_cost"]) == (None, 0, 0)
    older = tester_client.post(f"{path}/cases", case_body(case="older")).json()["case"]
    assert older["cost"] is None
    assert tester_client.get(path).json()["run"]["cost"]["amount"] is None
    case = tester_client.post(f"{path}/cases", case_body(cost=CASE_COST)).json()["case"]
    assert case["cost"] == CASE_COST
    read = tester_client.get(path).json()
    assert read["run"]["cost"] == {**CASE_COST, "cases_without_cost": 1}
    assert [found["cost"] for found in read["cases"]] == [None, CASE_COST]
    [listed] = tester_client.get("/api/suite-runs").json()["runs"]
    assert listed["cost"] == read["run"]["cost"]


@pytest.mark.parametrize("body", [{"reason": ""}, {"reason": 5}, {"reason": "x" * 2001}], ids=repr)
def test_suite_run_end_with_a_bad_reason_is_invalid(
    tester_client: ListenerClient, run_id: int, body: Any
) -> None:
    assert refusal(tester_client.post(f"/api/suite-runs/{run_id}/end", body), 400) == "invalid"
    assert SuiteRun.objects.get(pk=run_id).state == "running"


@pytest.mark.parametrize(
    "body",
    [
        b'{"suites": ["smoke"], "alpha": 1e400}',
        b'{"suites": ["smoke"], "alpha": NaN}',
        b'{"suites": ["smoke"], "compare": 1e400}',
        b'{"suites": ["smoke"], "compare": NaN}',
        b'{"suites": ["\\ud800"]}',
        b'{"suites": ' + b"[" * 40 + b"]" * 40 + b"}",
    ],
)
def test_suite_run_hostile_json_is_invalid_never_500(
    tester_client: ListenerClient, body: bytes
) -> None:
    response = tester_client.request("POST", "/api/suite-runs", content=body)
    assert refusal(response, 400) == "invalid"
    assert stored() == (0, 0)


def test_suite_run_read_pages_cases_each_answer_about_a_megabyte_at_most(
    tester_client: ListenerClient, run_id: int
) -> None:
    """Cases whose records are near CASE_RECORD_MAX each: a read answers the cases whose
    records fit RUN_PAGE_SIZE_MAX together, under 1 MB with the repeats under both their
    names, and says `more` until the last; `after` and `limit` page them."""
    repeats = [{"text": "x" * 190_000}]
    for number in range(5):
        body = case_body(case=f"big {number}", instance="", repeats=repeats)
        assert tester_client.post(f"/api/suite-runs/{run_id}/cases", body).status_code == 201
    seen: list[int] = []
    sizes: list[int] = []
    after = ""
    while True:
        read = tester_client.get(f"/api/suite-runs/{run_id}?limit=500{after}")
        assert read.status_code == 200, read.text
        sizes.append(len(read.content))
        seen += [case["id"] for case in read.json()["cases"]]
        if not read.json()["more"]:
            break
        after = f"&after={seen[-1]}"
    assert len(sizes) == 3 and max(sizes) <= 1_000_000, sizes
    assert seen == sorted(SuiteCase.objects.values_list("pk", flat=True))
    one = tester_client.get(f"/api/suite-runs/{run_id}?limit=1&after={seen[1]}").json()
    assert ([case["id"] for case in one["cases"]], one["more"]) == ([seen[2]], True)


def test_suite_run_case_too_large_together_is_invalid(
    tester_client: ListenerClient, run_id: int
) -> None:
    """Failures and repeats each within their limits, over CASE_RECORD_MAX together."""
    failure = {"repeat": 1, "turn": 1, "sent": None, "expected": "e", "actual": "x" * 30_000}
    body = case_body(instance="", failures=[failure] * 6, repeats=[{"text": "x" * 30_000}])
    response = tester_client.post(f"/api/suite-runs/{run_id}/cases", body)
    assert refusal(response, 400) == "invalid"
    assert stored() == (1, 0)


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "before=1", "after=-1", "limit=x"])
def test_suite_run_read_bad_query_is_invalid(
    tester_client: ListenerClient, run_id: int, query: str
) -> None:
    assert refusal(tester_client.get(f"/api/suite-runs/{run_id}?{query}"), 400) == "invalid"


@pytest.mark.parametrize("query", ["limit=0", "limit=501", "after=1", "before=-1", "limit=x"])
def test_suite_run_list_bad_query_is_invalid(tester_client: ListenerClient, query: str) -> None:
    assert refusal(tester_client.get(f"/api/suite-runs?{query}"), 400) == "invalid"
