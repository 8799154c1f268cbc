"""A stand-in listener and a stand-in judge, as the conversation-test client's runner sees
them, for its pure tests (no server, no model): what a turn gets, and a case run over them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from tester.suites.client import Outcome, Reply, TesterClient
from tester.suites.files import Suite, load_suite
from tester.suites.isolation import ThreadsHeard
from tester.suites.judge import Judge, JudgeError, Verdict, Vote
from tester.suites.runner import CaseReport, Judges, plans, run_plan


def answered(
    body: str, *, seconds: float = 1.0, first_token: float = 0.5, **recorded: Any
) -> Outcome:
    reply = Reply(
        body=body,
        message={"id": 2, "body": body, **recorded},
        seconds=seconds,
        first_token_seconds=first_token,
    )
    return Outcome(turn={"id": 1}, reply=reply, state="answered", failure=None, seconds=seconds)


def unanswered(state: str, failure: str | None = None) -> Outcome:
    return Outcome(turn={"id": 1}, reply=None, state=state, failure=failure, seconds=2.0)


class StandInJudge:
    """The judge as the runner sees it: each call takes the next scripted verdict (or raises the
    next scripted `JudgeError`); `asked` records every call."""

    def __init__(
        self,
        *,
        grades: Sequence[bool | JudgeError] = (),
        goals: Sequence[bool | JudgeError] = (),
        turns: Sequence[str | JudgeError] = (),
    ) -> None:
        self.grades = list(grades)
        self.goals = list(goals)
        self.turns = list(turns)
        self.asked: list[tuple[str, Any]] = []

    @staticmethod
    def verdict(scripted: bool | JudgeError, reason: str) -> Verdict:
        if isinstance(scripted, JudgeError):
            raise scripted
        return Verdict(scripted, (Vote(scripted, reason),))

    def grade_reply(self, rubric: str, transcript: Any) -> Verdict:
        self.asked.append(("grade_reply", (rubric, list(transcript))))
        return self.verdict(self.grades.pop(0), f"reply {'good' if self.grades else 'last'}")

    def grade_conversation(self, rubric: str, transcript: Any) -> Verdict:
        self.asked.append(("grade_conversation", (rubric, list(transcript))))
        return self.verdict(self.grades.pop(0), "conversation")

    def goal_met(self, *, persona: str, goal: str, transcript: Any) -> Verdict:
        self.asked.append(("goal_met", len(transcript)))
        return self.verdict(self.goals.pop(0), f"goal after {len(transcript) // 2} turns")

    def user_turn(self, *, persona: str, goal: str, transcript: Any) -> str:
        self.asked.append(("user_turn", len(transcript)))
        said = self.turns.pop(0) if self.turns else f"user turn {len(transcript) // 2 + 1}"
        if isinstance(said, JudgeError):
            raise said
        return said


def as_judge(judge: StandInJudge) -> Judge:
    return cast(Judge, judge)


class StandInThread:
    def __init__(self, client: StandIn, name: str, instance: str | None, number: int) -> None:
        self.client = client
        self.name = name
        self.id = number
        self.instance = instance or "assistant"
        # What the stand-in listener told of other threads: nothing, unless a test says so.
        self.heard = ThreadsHeard(number)

    def __enter__(self) -> StandInThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        pass

    def ask(self, body: str, *, within: float) -> Outcome:
        with self.client.lock:
            self.client.sent.append((self.id, body))
        return self.client.answer(self, body)


class StandIn:
    """The listener as the runner sees it; `answer` says what each turn gets."""

    def __init__(self, answer: Callable[[StandInThread, str], Outcome]) -> None:
        self.answer = answer
        self.threads: list[tuple[str, str | None]] = []
        self.sent: list[tuple[int, str]] = []
        self.projects: list[str] = []
        self.lock = threading.Lock()

    def project_id(self, name: str) -> int:
        self.projects.append(name)
        return 1

    def new_thread(self, *, project: int, name: str, instance: str | None) -> StandInThread:
        with self.lock:
            self.threads.append((name, instance))
            return StandInThread(self, name, instance, len(self.threads))


def client_of(stand_in: StandIn) -> TesterClient:
    return cast(TesterClient, stand_in)


def write_suite(tmp_path: Path, text: str) -> Suite:
    path = tmp_path / "s.suite.toml"
    path.write_text(text, encoding="utf-8")
    return load_suite(path, environ={})


class StandInJudges:
    """`Judges` handing out one stand-in judge."""

    def __init__(self, judge: StandInJudge) -> None:
        self.judge = judge

    def of(self, suite: Suite) -> Judge:
        return as_judge(self.judge)


def run_one(stand_in: StandIn, suite: Suite, judge: StandInJudge) -> CaseReport:
    [plan] = plans([suite])
    judges = cast(Judges, StandInJudges(judge))
    return run_plan(client_of(stand_in), plan, project=1, judges=judges)
