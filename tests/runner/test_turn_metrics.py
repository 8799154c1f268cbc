"""Each attempt at a turn moves the metrics, through the broker's `turn_ended`."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import REGISTRY

from broker import actions
from broker.actors import Actor
from runner.backends import Draft, Reply, TurnTools
from runner.turns import Turn
from tests.broker import factories
from tests.support.runners import LEASE
from tests.support.waits import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels or {}) or 0.0


class MeteredBackend:
    """Answers at once, reporting its model, its tokens and its first token's time."""

    name = "metered"

    def reply(
        self, turn: Turn, *, tools: TurnTools, cancel: threading.Event, draft: Draft
    ) -> Reply:
        return Reply(
            text="metered answer",
            model="tiny-model",
            prompt_tokens=30,
            completion_tokens=7,
            first_token_ms=250,
        )


def test_answered_turn_moves_turns_tokens_and_reply_times(human: Actor, start_runner) -> None:
    answered = sample("mosaic_turns_total", {"state": "answered"})
    completion = {"instance": "assistant", "model": "tiny-model", "kind": "completion"}
    prompt = {**completion, "kind": "prompt"}
    tokens = (sample("mosaic_tokens_total", prompt), sample("mosaic_tokens_total", completion))
    first_tokens = sample("mosaic_reply_first_token_seconds_count")
    first_token_sum = sample("mosaic_reply_first_token_seconds_sum")
    durations = sample("mosaic_reply_duration_seconds_count")

    thread = factories.thread(human, factories.project(human), "work")
    actions.send_to_thread(human, thread_id=thread.pk, body="hello")
    start_runner(backend=MeteredBackend())
    wait_for(lambda: sample("mosaic_turns_total", {"state": "answered"}) == answered + 1)

    assert (
        sample("mosaic_tokens_total", prompt),
        sample("mosaic_tokens_total", completion),
    ) == (tokens[0] + 30, tokens[1] + 7)
    assert sample("mosaic_reply_first_token_seconds_count") == first_tokens + 1
    assert sample("mosaic_reply_first_token_seconds_sum") == pytest.approx(first_token_sum + 0.25)
    assert sample("mosaic_reply_duration_seconds_count") == durations + 1


def test_stopped_turn_counts_stopped_and_no_reply(human: Actor, start_runner, gated) -> None:
    stopped = sample("mosaic_turns_total", {"state": "stopped"})
    durations = sample("mosaic_reply_duration_seconds_count")
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="hi").message
    start_runner(backend=gated)
    wait_for(lambda: turn.pk in gated.started)

    actions.stop_assistant(human)

    wait_for(
        lambda: sample("mosaic_turns_total", {"state": "stopped"}) == stopped + 1, timeout=LEASE * 5
    )
    assert sample("mosaic_reply_duration_seconds_count") == durations
