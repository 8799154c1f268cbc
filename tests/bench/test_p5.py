"""P5's runner concurrency: the turns queued outlast the window (bench.scenarios.p5_replies)."""

from __future__ import annotations

import pytest

from bench.plans import FULL, QUICK, Plan
from bench.scenarios import p5_replies


@pytest.mark.parametrize("plan", [QUICK, FULL], ids=["quick", "full"])
@pytest.mark.parametrize("runners", [1, 2])
def test_p5_turns_each_outlast_the_window_at_the_runners_fastest(plan: Plan, runners: int) -> None:
    """Every slot of every runner busy on the model for the settling time and the whole
    window still leaves each of the 50 threads a turn."""
    fastest = runners * p5_replies.P5_RUNNER_CONCURRENCY / p5_replies.P5_MODEL_SECONDS
    answered = fastest * (p5_replies.P5_SETTLE + plan.p5_window)
    assert p5_replies.p5_turns_each(plan, 50, runners) * 50 > answered + 50 - 1


def test_p5_runner_concurrency_is_the_runners_default() -> None:
    from runner.service import DEFAULT_CONCURRENCY

    assert p5_replies.P5_RUNNER_CONCURRENCY == DEFAULT_CONCURRENCY
