"""P9: the runner's CPU per tool step — what one `create_task` call costs the process that answers.

A `manage.py runassistant` process (the `openai` backend, default concurrency) on a fresh copy of
the migrated SQLite database, pinned to the servers' CPU, answers the demo human's turns from
`bench.fakemodel`, which answers at once: either in words (no call a turn), or with one
`create_task` call a request for CALLS requests and then in words. Each call is a step (SPEC
§7.2): a `step.begin` and a `step.call` transaction through the broker, the task made, the model
asked again with the result. The human is a process of its own on the load generators' CPU
(`python -m bench.scenarios.p9_tool_steps THREADS TURNS`, through the broker's `thread.send`, so
every `create_task` is allowed): it opens THREADS threads, warms the runner up with one turn in
each, then sends TURNS turns round the threads and waits until each is answered. The figure is the
runner's process CPU (`bench.cpu`, user + system) over that window divided by TURNS; a step is
(a turn with CALLS calls − a turn with none) ÷ CALLS, from the medians of the repeats. The window
includes the runner's idle polls while the first turns arrive, the same in both setups. A turn
that did not end answered, or a call whose step is not `ok`, fails the scenario: its CPU would
not be a step's.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import processes as proc
from bench import report
from bench.cpu import tree_cpu_seconds
from bench.harness import Harness

CALLS = 3
THREADS = 20
HUMAN = "ada"  # the demo business's human (`setupdemo`)
POLL = 0.02
# The longest the human waits for its turns to be answered, in seconds.
DEADLINE = 300.0


class Humans:
    """The human's process: `ready` once its threads exist and the warm-up turns are answered,
    then `send` starts the measured turns and returns once every one has ended."""

    def __init__(self, workdir: Path, database: str, threads: int, turns: int) -> None:
        env = proc.base_environment(database, None)
        env["DJANGO_SETTINGS_MODULE"] = "mosaic.settings"
        argv = [sys.executable, "-m", "bench.scenarios.p9_tool_steps", str(threads), str(turns)]
        with (workdir / "p9-humans.log").open("ab") as log:
            self.popen = subprocess.Popen(
                proc.pinned(argv, proc.LOAD_CPUS),
                cwd=proc.ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )

    def line(self) -> dict[str, Any]:
        assert self.popen.stdout is not None
        text = self.popen.stdout.readline()
        if not text:
            raise RuntimeError("the human's process ended early (see p9-humans.log)")
        said: dict[str, Any] = json.loads(text)
        return said

    def ready(self) -> None:
        self.line()

    def send(self) -> dict[str, Any]:
        assert self.popen.stdin is not None
        self.popen.stdin.write("\n")
        self.popen.stdin.flush()
        result: dict[str, Any] = self.line()["result"]
        return result

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait()


def model_server(workdir: Path, calls: int) -> proc.Process:
    """The fake model answering at once, `calls` calls a turn, on the load generators' CPU."""
    model = proc.fake_model(workdir, 0.0)
    model.argv = proc.pinned([*model.argv, str(calls)], proc.LOAD_CPUS)
    return model


def turn_cpu(
    harness: Harness, template: Path, calls: int, turns: int, threads: int = THREADS
) -> float:
    """Runner CPU seconds a turn, with the model calling `calls` times a turn."""
    database = harness.sqlite_copy(template, f"p9-{calls}")
    model = model_server(harness.workdir, calls)
    backend = {
        "MOSAIC_ASSISTANT_BACKEND": "openai",
        "MOSAIC_ASSISTANT_BASE_URL": model.url,  # type: ignore[attr-defined]
        "MOSAIC_ASSISTANT_MODEL": "bench",
    }
    runner = proc.runner_process(
        harness.workdir, database, backend, label=f"runner-p9-{harness.tag()}"
    )
    runner.argv = proc.pinned(runner.argv, proc.SERVER_CPUS)
    with harness.running(model, runner):
        runner.wait_for_line("runassistant: run-")
        humans = Humans(harness.workdir, database, threads, turns)
        try:
            humans.ready()
            before = tree_cpu_seconds(runner.pid)
            result = humans.send()
            spent = tree_cpu_seconds(runner.pid) - before
        finally:
            humans.stop()
    harness.log(
        f"P9 {calls} calls a turn: {turns} turns sent in {result['sending_seconds']:.1f} s, "
        f"all answered in {result['seconds']:.1f} s"
    )
    if result["answered"] != turns or result["steps"] != ({"ok": turns * calls} if calls else {}):
        raise RuntimeError(f"P9: not every turn answered with {calls} ok steps: {result}")
    return spent / turns


def p9(harness: Harness, template: Path) -> None:
    """P9's section: each setup `repeats` times, alternating which goes first."""
    turns = harness.plan.p9_turns
    per_turn: dict[int, list[float]] = {0: [], CALLS: []}
    for repeat in range(harness.plan.repeats):
        for calls in harness.order(repeat, [0, CALLS]):
            per_turn[calls].append(turn_cpu(harness, template, calls, turns))
            harness.log(
                f"P9 {calls} calls a turn: {per_turn[calls][-1] * 1000:.1f} ms of CPU a turn"
            )
    none, some = (statistics.median(per_turn[calls]) * 1000 for calls in (0, CALLS))
    step = (some - none) / CALLS
    paired = [(b - a) * 1000 / CALLS for a, b in zip(per_turn[0], per_turn[CALLS], strict=True)]

    def listed(values: list[float]) -> str:
        return ", ".join(f"{value:.1f}" for value in values)

    section = harness.section(
        "P9",
        "P9 — runner CPU per tool step (SQLite, `runassistant`, a model answering at once)",
        "none; recorded",
        rows=[
            {
                "setup": "a turn, no call",
                "figure": f"{none:.1f} ms ({listed([s * 1000 for s in per_turn[0]])})",
            },
            {
                "setup": f"a turn, {CALLS} `create_task` calls",
                "figure": f"{some:.1f} ms ({listed([s * 1000 for s in per_turn[CALLS]])})",
            },
            {
                "setup": f"a step: ({CALLS} calls − none) ÷ {CALLS}",
                "figure": f"{step:.1f} ms (by repeat: {listed(paired)})",
            },
        ],
    )
    section["verdicts"] = [
        report.recorded(
            f"runner CPU per tool step (ms) = {step:.3g}; per turn with no call {none:.3g}"
        )
    ]
    section["note"] = (
        f"Runner process CPU (user + system) while it answers {turns} turns of the demo's human "
        f"in {THREADS} threads, divided by the turns; a fresh database and runner for each "
        "figure, the setups alternating which goes first. The model answers at once, so the "
        "runner is busy throughout, and each call is a step: `step.begin`, then the task and "
        "the step in `step.call`'s transaction, then one more model request carrying the result."
    )
    harness.raw["P9"] = {"turns": turns, "threads": THREADS, "cpu_seconds_a_turn": per_turn}


# --- the human's process ------------------------------------------------------------------


def humans(threads: int, turns: int) -> None:
    """Open `threads` threads as the demo's human, warm the runner up with a turn in each, say
    so; at a line on stdin send `turns` turns round the threads, wait for all, say how they
    ended."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mosaic.settings")
    django.setup()
    from django.db.models import Count

    from broker import actions
    from broker.access import access_human_actor
    from broker.models import ReplyState, Step, TurnProgress

    human = access_human_actor(username=HUMAN)
    project = actions.create_project(human, name="bench tool steps")
    ids = [
        actions.create_thread(human, project_id=project.pk, name=f"t{i}").pk for i in range(threads)
    ]

    def send(count: int) -> list[int]:
        return [
            actions.send_to_thread(
                human, thread_id=ids[i % threads], body=f"Turn {i}: please do the bench task."
            ).message.pk
            for i in range(count)
        ]

    def ended(turn_ids: list[int]) -> dict[str, int]:
        """How the turns ended, by state, once all have; a deadline passed raises."""
        deadline = time.monotonic() + DEADLINE
        final = (ReplyState.ANSWERED, ReplyState.FAILED, ReplyState.STOPPED)
        progress = TurnProgress.objects.filter(message_id__in=turn_ids, state__in=final)
        while progress.count() < len(turn_ids):
            if time.monotonic() > deadline:
                raise SystemExit(f"turns not answered within {DEADLINE:g} s")
            time.sleep(POLL)
        return dict(progress.values_list("state").annotate(n=Count("pk")))

    ended(send(threads))
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()
    began = time.monotonic()
    measured = send(turns)
    sent = time.monotonic()
    states = ended(measured)
    steps = Step.objects.filter(turn_id__in=measured).values_list("outcome").annotate(n=Count("pk"))
    result = {
        "answered": states.get(ReplyState.ANSWERED, 0),
        "states": states,
        "steps": dict(steps),
        "sending_seconds": sent - began,
        "seconds": time.monotonic() - began,
    }
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    humans(int(sys.argv[1]), int(sys.argv[2]))
