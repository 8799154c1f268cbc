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


def test_recovery_seconds_ends_with_the_last_window_over_the_limit() -> None:
    windows = [(0.0, 3.0), (1.0, 0.05), (2.0, 0.4), (3.0, 0.05)]
    assert overload.recovery_seconds(windows, 0.1, 1.0) == 3.0


def test_recovery_seconds_is_zero_when_never_over() -> None:
    assert overload.recovery_seconds([(0.0, 0.05), (1.0, 0.05)], 0.1, 1.0) == 0.0


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
        selection("P9")
