"""`manage.py runassistant` as its own process (SPEC §7): start, crash, race, shut down.

Killing a runner mid-turn and racing two runners prove their point only on PostgreSQL
(real row locks, several processes on one database); they carry the `postgres` mark.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from broker import actions
from broker.actors import Actor
from broker.models import Business, Message, RoleDefinition, Step, Task, ThreadClaim
from runner.backends.chat_completions import ChatCompletionsBackend
from tests.broker import factories
from tests.support.runners import LEASE, wait_until_looked_again
from tests.support.waits import wait_for


def database_url() -> str:
    """The test database as a `DATABASE_URL` another process can open."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    password = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    host = db["HOST"] or "127.0.0.1"
    port = db["PORT"] or 5432
    return f"postgres://{quote(db['USER'], safe='')}{password}@{host}:{port}/{db['NAME']}"


@dataclass
class RunnerProcess:
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 20.0) -> str:
        """Wait for the start line and return the runner's name (its runs' id prefix)."""
        found = wait_for(
            lambda: (
                re.search(r"runassistant: (run-[0-9a-f]+) ", self.output())
                or self.popen.poll() is not None
            ),
            timeout=timeout,
            every=0.05,
        )
        assert found is not True, f"runner exited early:\n{self.output()}"
        return found.group(1)


@pytest.fixture
def runner_process(tmp_path: Path) -> Iterator[Callable[..., RunnerProcess]]:
    """Start `manage.py runassistant` processes on the test database; killed at teardown."""
    started: list[RunnerProcess] = []

    def start(*args: str, **env: str) -> RunnerProcess:
        log = tmp_path / f"runner-{len(started)}.log"
        environment = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "MOSAIC_CLAIM_LEASE_SECONDS": str(LEASE),
            "MOSAIC_ASSISTANT_BACKEND": "offline",
            **env,
        }
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, str(settings.BASE_DIR / "manage.py"), "runassistant", *args],
                cwd=settings.BASE_DIR,
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        process = RunnerProcess(popen=popen, log=log)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.popen.poll() is None:
            process.popen.kill()
        process.popen.wait(10)


def results() -> list[Message]:
    return list(Message.objects.filter(message_class="RESULT").order_by("pk"))


# --- the command ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_runassistant_unknown_business_is_refused(business: Business) -> None:
    with pytest.raises(CommandError, match="No business"):
        call_command("runassistant", business="nope")


@pytest.mark.django_db
def test_runassistant_refused_business_stored_refuses_to_start(business: Business) -> None:
    """R5, as for every listener: no run starts while a stored business is refused."""
    RoleDefinition.objects.filter(business=business).update(receive_from=["human", "tester"])
    with pytest.raises(ImproperlyConfigured, match=r"mosaic\.E002"):
        call_command("runassistant")


def test_runassistant_settles_its_start_up_before_the_runner_starts(
    business: Business, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`started` (the start-up's objects out of the collector's reach) runs once the command
    has checked everything, before the runner takes its first turn."""
    calls: list[str] = []
    command = "runner.management.commands.runassistant"
    monkeypatch.setattr(f"{command}.started", lambda: calls.append("started"))

    class Runner:
        def __init__(self, **kwargs: object) -> None:
            pass

        def start(self) -> None:
            calls.append("runner started")
            raise ImproperlyConfigured("stops the command here")

    monkeypatch.setattr(f"{command}.Runner", Runner)
    # The command's own SIGINT and SIGTERM handlers must not outlive it in this process.
    monkeypatch.setattr(f"{command}.signal.signal", lambda *args: None)
    with pytest.raises(CommandError, match="stops the command here"):
        call_command("runassistant")
    assert calls == ["started", "runner started"]
    # Nor its checkpoint thread: left running, it would checkpoint on into later tests.
    assert "mosaic-wal-checkpoints" not in [thread.name for thread in threading.enumerate()]


@pytest.mark.django_db(transaction=True)
def test_runassistant_process_answers_then_sigterm_exits_cleanly(
    human: Actor, tester: Actor, runner_process
) -> None:
    """SPEC §7: the runner as its own process answers per R12, and stops on SIGTERM."""
    project = factories.project(human)
    turns = [
        actions.send_to_thread(
            actor, thread_id=factories.thread(actor, project, name).pk, body="hi"
        )
        for actor, name in ((human, "work"), (tester, "check"))
    ]
    process = runner_process("--business", "demo", "--concurrency", "2")
    name = process.wait_ready()
    wait_for(lambda: len(results()) == 2, timeout=20)
    assert {(r.in_reply_to_id, r.to_role) for r in results()} == {
        (turns[0].message.pk, "human"),
        (turns[1].message.pk, "tester"),
    }
    assert all(r.from_run.startswith(f"{name}-") for r in results())
    process.popen.send_signal(signal.SIGTERM)
    assert process.popen.wait(10) == 0
    assert "runassistant: stopped" in process.output()


# --- crash and race (PostgreSQL) ---------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_runassistant_killed_mid_turn_reply_lands_once_from_another_runner_after_lease(
    human: Actor, runner_process, start_runner, fake_model
) -> None:
    """SPEC §7: a runner process killed (SIGKILL) mid-turn: its lease runs out, another
    runner picks the message up, and exactly one reply lands."""
    fake_model.delay = 60  # the first runner's model call never finishes
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="crash me").message
    doomed = runner_process(
        MOSAIC_ASSISTANT_BACKEND="openai",
        MOSAIC_ASSISTANT_BASE_URL=fake_model.url,
        MOSAIC_ASSISTANT_MODEL="slow",
    )
    doomed_name = doomed.wait_ready()
    assert fake_model.arrived.wait(20), doomed.output()
    dead_claim = ThreadClaim.objects.get(thread=thread, ended_at__isnull=True)
    assert dead_claim.run.startswith(f"{doomed_name}-")

    doomed.popen.send_signal(signal.SIGKILL)
    doomed.popen.wait(10)
    killed_at = time.monotonic()
    fake_model.delay = 0
    successor = start_runner(
        backend=ChatCompletionsBackend(base_url=fake_model.url, model="fast", idle_timeout=10)
    )
    reply = wait_for(lambda: Message.objects.filter(in_reply_to=turn).first(), timeout=5 * LEASE)
    picked_up_after = time.monotonic() - killed_at

    dead_claim.refresh_from_db()
    assert (dead_claim.end_reason, dead_claim.ended_by) == ("lease-expired", "system")
    assert reply.created_at >= dead_claim.lease_expires_at
    assert not reply.from_run.startswith(f"{doomed_name}-")
    wait_until_looked_again(successor)
    assert [r.in_reply_to_id for r in results()] == [turn.pk]
    assert len(fake_model.requests) == 2
    print(f"crash: reply landed {picked_up_after:.2f}s after SIGKILL (lease {LEASE}s)")


@pytest.mark.django_db(transaction=True)
def test_runassistant_killed_between_a_call_and_the_answer_makes_the_call_once(
    human: Actor, runner_process, start_runner, fake_model
) -> None:
    """SPEC §7.2: a runner process killed (SIGKILL) after the model's tool call ran and before
    the model answered: the turn is taken up again, is shown the call and its result, makes no
    call of its own, and answers; one task, one step."""
    requests_with_results = []

    def script(body: dict) -> list[dict[str, str]]:
        if not any(message["role"] == "tool" for message in body["messages"]):
            return [{"id": "call_book", "name": "create_task", "arguments": '{"title": "book"}'}]
        requests_with_results.append(body)
        # The first runner's answer after the call never finishes; the next one's does.
        fake_model.hold_after = 1 if len(requests_with_results) == 1 else None
        return []

    fake_model.tool_calls = script
    fake_model.content = "Booked."
    fake_model.models = ["m"]
    thread = factories.thread(human, factories.project(human), "work")
    turn = actions.send_to_thread(human, thread_id=thread.pk, body="book it").message
    doomed = runner_process(
        MOSAIC_ASSISTANT_BACKEND="openai",
        MOSAIC_ASSISTANT_BASE_URL=fake_model.url,
        MOSAIC_ASSISTANT_MODEL="m",
    )
    doomed.wait_ready()
    assert fake_model.holding.wait(20), doomed.output()
    assert Step.objects.filter(turn=turn, outcome="ok").count() == 1
    doomed.popen.send_signal(signal.SIGKILL)
    doomed.popen.wait(10)
    start_runner(backend=ChatCompletionsBackend(base_url=fake_model.url, model="m"))
    reply = wait_for(lambda: Message.objects.filter(in_reply_to=turn).first(), timeout=10 * LEASE)
    assert reply.body == "Booked."
    assert Task.objects.count() == 1 and Step.objects.count() == 1
    replayed = requests_with_results[-1]["messages"]
    assert [m["role"] for m in replayed[-2:]] == ["assistant", "tool"]
    assert replayed[-2]["tool_calls"][0]["id"] == "call_book"
    assert len(fake_model.requests) == 3


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_runassistant_two_processes_race_200_pending_reply_once_each_in_order(
    human: Actor, tester: Actor, runner_process
) -> None:
    """SPEC §7: two runner processes against 200 pending messages in 50 threads: 200 replies,
    no duplicate, and within each thread in the order of the turns."""
    processes = [runner_process("--concurrency", "8") for _ in range(2)]
    names = [process.wait_ready() for process in processes]
    project = factories.project(human)
    with transaction.atomic():  # every turn appears to both runners at once
        for index in range(50):
            actor = human if index % 2 else tester
            thread = factories.thread(actor, project, f"thread {index}")
            for turn in range(4):
                actions.send_to_thread(actor, thread_id=thread.pk, body=f"turn {turn}")
    started = time.monotonic()
    wait_for(lambda: Message.objects.filter(message_class="RESULT").count() >= 200, timeout=60)
    elapsed = time.monotonic() - started
    for process in processes:
        process.popen.send_signal(signal.SIGTERM)
    assert [process.popen.wait(15) for process in processes] == [0, 0]

    replies = results()
    answered = [r.in_reply_to_id for r in replies]
    assert len(replies) == 200
    assert len(set(answered)) == 200
    turns = Message.objects.filter(message_class="REQUEST")
    assert set(answered) == set(turns.values_list("pk", flat=True))
    by_thread: dict[int, list[int]] = defaultdict(list)
    for reply in replies:
        assert reply.thread_id is not None
        by_thread[reply.thread_id].append(reply.in_reply_to_id or 0)
    assert all(ids == sorted(ids) for ids in by_thread.values())
    share = Counter(next(n for n in names if r.from_run.startswith(f"{n}-")) for r in replies)
    print(f"race: 200 replies in {elapsed:.2f}s, by runner {dict(share)}")
