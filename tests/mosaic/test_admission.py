"""The admission policy of the HTTP workers (mosaic.edge.admission), step by step on a given
clock."""

from __future__ import annotations

import pytest

from mosaic.edge.admission import AdmissionPolicy


def serve(policy: AdmissionPolicy, *, at: float, service: float) -> None:
    """One request arriving at `at`, admitted, started at once and done `service` later."""
    assert policy.admit(at)
    assert policy.start(now=at, admitted_at=at)
    policy.finish(now=at + service, started_at=at)


def primed(*, workers: int = 2, budget: float = 1.0, service: float = 0.01) -> AdmissionPolicy:
    """A policy that has served a few requests of `service` seconds each."""
    policy = AdmissionPolicy(workers=workers, budget=budget)
    for i in range(8):
        serve(policy, at=i * 0.1, service=service)
    return policy


def test_admit_with_a_worker_free_admits() -> None:
    policy = AdmissionPolicy(workers=2, budget=1.0)
    assert policy.admit(0.0)
    assert policy.admit(0.0)
    assert policy.queued == 2


def test_admit_before_any_service_time_admits_a_queue() -> None:
    """Nothing to judge by yet: the queue is bounded by the late refusal alone."""
    policy = AdmissionPolicy(workers=1, budget=1.0)
    assert all(policy.admit(0.0) for _ in range(50))


def test_admit_refuses_at_once_when_the_queue_cannot_drain_within_the_budget() -> None:
    """Two workers at 10 ms a request drain 200 a second: the 201st queued would wait past
    a one-second budget, and is refused as it arrives."""
    policy = primed()
    now = 10.0
    for _ in range(2):
        assert policy.admit(now)
        assert policy.start(now=now, admitted_at=now)
    admitted = 0
    while policy.admit(now):
        admitted += 1
    assert admitted == 200
    assert policy.expected_wait(now) > 1.0


def test_admit_one_slow_request_does_not_move_the_service_time() -> None:
    policy = primed()
    serve(policy, at=5.0, service=3.0)
    assert policy.service_time() == pytest.approx(0.01)


def test_admit_through_a_stall_shorter_than_the_budget_refuses_no_one() -> None:
    """Busy workers alone are a stall, not an overload (a slow commit at half capacity)."""
    policy = primed(workers=1)
    assert policy.admit(10.0) and policy.start(now=10.0, admitted_at=10.0)
    # 30 arrivals over 0.6 s of the stall: 0.6 s + 30 queued at 10 ms is still within 1 s.
    assert all(policy.admit(10.0 + i / 50) for i in range(30))


def test_admit_when_every_worker_has_been_held_past_the_budget_refuses_at_once() -> None:
    """A worker busy for longer than the budget is not expected back within it: the arrival
    is refused then and there, not after waiting the budget out."""
    policy = primed(workers=1)
    assert policy.admit(10.0) and policy.start(now=10.0, admitted_at=10.0)
    assert not policy.admit(11.5)
    assert policy.queued == 0
    assert policy.overloaded


def test_start_after_waiting_past_the_budget_is_refused_late() -> None:
    """The bound on every answer: a job that waited longer than the budget does not run."""
    policy = AdmissionPolicy(workers=1, budget=1.0)
    assert policy.admit(0.0)
    assert not policy.start(now=1.5, admitted_at=0.0)
    assert policy.queued == 0 and policy.started == []
    assert policy.overloaded  # from then on


def overload(
    policy: AdmissionPolicy,
    *,
    until: float,
    rate: float,
    service: float,
    clients: int | None = None,
) -> list[bool]:
    """Arrivals at `rate` per second from t=10 to `until` (with `clients`, only while fewer
    than that many are queued or running: a closed loop), onto workers that each take
    `service` per job; returns each arrival's admission. Jobs start in order as workers free."""
    answers: list[bool] = []
    queue: list[float] = []
    running: list[tuple[float, float]] = []  # (ends at, started at)
    now, step = 10.0, 1 / rate
    while now < until:
        for ends, began in sorted(running):
            if ends <= now:
                running.remove((ends, began))
                policy.finish(now=ends, started_at=began)
        while queue and len(running) < policy.workers:
            admitted_at = queue.pop(0)
            if policy.start(now=now, admitted_at=admitted_at):
                running.append((now + service, now))
        if clients is None or len(queue) + len(running) < clients:
            admitted = policy.admit(now)
            answers.append(admitted)
            if admitted:
                queue.append(now)
        now += step
    return answers


def test_admit_in_a_sustained_overload_keeps_only_the_floor_queued() -> None:
    """At twice what the workers serve the queue grows until the budget refuses; from then on
    only the floor stays queued and the rest are refused at once — about half the arrivals,
    the workers still busy throughout."""
    policy = primed()
    answers = overload(policy, until=14.0, rate=400, service=0.01)
    assert policy.overloaded
    assert policy.queued <= policy.floor_per_worker * policy.workers
    late = answers[len(answers) // 2 :]
    # (Jobs start on the arrivals' ticks here, so the workers serve a little under 200/s.)
    assert 0.35 <= late.count(True) / len(late) <= 0.6


def test_admit_after_the_overload_finds_a_worker_free_ends_it() -> None:
    policy = primed()
    overload(policy, until=12.0, rate=400, service=0.01)
    assert policy.overloaded
    while policy.started:
        policy.finish(now=13.0, started_at=policy.started[0])
    while policy.queued:
        assert policy.start(now=12.5, admitted_at=12.49)
        policy.finish(now=12.5, started_at=12.5)
    assert policy.admit(13.0)
    assert not policy.overloaded


def test_admit_a_closed_loop_at_capacity_refuses_no_one() -> None:
    """Twenty clients each sending again as soon as answered: a standing queue of eighteen
    behind two workers, which is the clients' own and never grows (P1)."""
    policy = primed()
    answers = overload(policy, until=14.0, rate=400, service=0.01, clients=20)
    assert all(answers)
    assert not policy.overloaded


def test_withdraw_a_queued_job_leaves_the_queue() -> None:
    policy = AdmissionPolicy(workers=1, budget=1.0)
    assert policy.admit(0.0) and policy.admit(0.0)
    policy.withdraw()
    assert policy.queued == 1
