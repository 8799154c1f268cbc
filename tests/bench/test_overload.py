"""P7's verdict figures from per-send records (bench.overload)."""

from __future__ import annotations

import math

import pytest

from bench import overload


def sent(due: float, latency: float | None, status: int = 201, arrives: float | None = 0.01):
    done = None if latency is None else due + latency
    retry = status == 503
    error = "unavailable" if status == 503 else None
    arrived = None if arrives is None or status != 201 else due + arrives
    return (due, done, status, retry, error, arrived)


def test_acceptable_503_unavailable_with_retry_after_counts_as_answered() -> None:
    assert overload.acceptable(sent(0.0, 0.5, 503), 5.0)


def test_acceptable_503_without_retry_after_fails() -> None:
    assert not overload.acceptable((0.0, 0.5, 503, False, "unavailable", None), 5.0)


def test_acceptable_answer_after_the_deadline_fails() -> None:
    assert not overload.acceptable(sent(0.0, 5.5), 5.0)


def test_acceptable_no_answer_fails() -> None:
    assert not overload.acceptable(sent(0.0, None, -2), 5.0)


def test_acceptable_other_error_fails() -> None:
    assert not overload.acceptable((0.0, 0.1, 500, False, "internal", None), 5.0)


def test_delivery_of_a_refused_send_is_infinite() -> None:
    assert overload.delivery(sent(0.0, 0.1, 503)) == math.inf


def test_window_p99s_buckets_by_due_time() -> None:
    records = [sent(10.2, 0.01, arrives=0.05), sent(10.7, 0.01, arrives=0.5), sent(11.5, 0.01)]
    windows = overload.window_p99s(records, 10.0, 12.0, 1.0)
    assert windows == [(0.0, pytest.approx(0.5)), (1.0, pytest.approx(0.01))]


def test_nominal_p99_is_of_the_sends_due_before_the_overload() -> None:
    calm = [sent(i / 100, 0.01, arrives=0.02) for i in range(100)]
    overloaded = [sent(1.0 + i / 100, 0.5) for i in range(100)]  # refused: never delivered
    assert overload.nominal_p99(calm + overloaded, 1.0) == pytest.approx(0.02)


def test_recovery_seconds_is_when_the_p99_of_the_sends_after_it_is_within_the_limit() -> None:
    queued = [sent(10.0 + i / 100, 0.01, arrives=1.0 - i / 200) for i in range(200)]  # draining
    served = [sent(12.0 + i / 100, 0.01, arrives=0.02) for i in range(800)]
    assert overload.recovery_seconds(queued + served, 10.0, 20.0, 0.05) == 2.0


def test_recovery_seconds_ignores_a_lone_late_stall() -> None:
    """One slow send among a thousand is not a server that has yet to recover."""
    served = [sent(10.0 + i / 100, 0.01, arrives=0.02) for i in range(1000)]
    served[900] = sent(19.0, 0.01, arrives=0.5)
    assert overload.recovery_seconds(served, 10.0, 20.0, 0.05) == 0.0


def test_recovery_seconds_counts_a_refused_send_as_never_delivered() -> None:
    refused = [sent(10.0 + i / 100, 0.01, 503) for i in range(100)]
    served = [sent(11.0 + i / 100, 0.01, arrives=0.02) for i in range(900)]
    assert overload.recovery_seconds(refused + served, 10.0, 20.0, 0.05) == 1.0


def test_recovery_seconds_never_back_is_the_whole_phase() -> None:
    slow = [sent(10.0 + i / 100, 0.01, arrives=0.5) for i in range(1000)]
    assert overload.recovery_seconds(slow, 10.0, 20.0, 0.05) == 10.0


def test_figures_count_lost_rows_and_unacceptable_answers() -> None:
    records = [
        sent(0.0, 0.1),
        sent(0.5, 0.1, arrives=None),  # 2xx whose row never came
        sent(1.0, 1.0, 503),
        sent(1.5, None, -2),  # no answer in time
        sent(2.5, 0.1),
    ]
    result = overload.figures(records, drop_at=2.0, end=3.0, nominal_p99=0.02)
    assert result["lost"] == 1
    assert result["unacceptable"] == 1
    assert result["kinds"] == {"2xx": 3, "503 unavailable": 1, "no answer in time": 1}
    assert result["recovery"] == 0.0


def test_selection_parses_scenario_ids() -> None:
    from bench.run import selection

    assert selection("p1c, P7") == {"P1c", "P7"}
    assert selection(None) is None


def test_selection_unknown_id_exits() -> None:
    from bench.run import selection

    with pytest.raises(SystemExit):
        selection("P99")


def test_goodput_is_2xx_sends_per_second_of_the_phase_over_capacity() -> None:
    """P7: 2 s at 200 sends/s onto a server of capacity 100; 180 served, the rest refused."""
    records = [sent(1.0 + i / 200, 0.01, 201 if i % 20 < 9 else 503) for i in range(400)]
    before = [sent(0.5, 0.01)]  # due before the phase: not counted
    assert overload.goodput(before + records, 1.0, 3.0, 100.0) == pytest.approx(0.9)


def test_refusal_latencies_are_of_the_503_answers_alone() -> None:
    refused = [sent(i, 0.01 * (i + 1), 503) for i in range(100)]
    served = [sent(i, 3.0) for i in range(100)]
    p50, p99 = overload.refusal_latencies(refused + served)
    assert p50 == pytest.approx(0.5)
    assert p99 == pytest.approx(1.0)  # nearest rank of 100: the slowest
