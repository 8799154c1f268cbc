"""A model that grades replies and plays a user: any OpenAI-compatible chat completions server.

The judge is asked at temperature 0 for nothing but `{"pass": true|false, "reason": "..."}`;
anything else it answers, and a server that cannot be reached, is a `JudgeError`, which makes
the case an `error`, never a pass. With `votes` above one it is asked that many times and the
majority decides; every vote's reason is kept. The same server writes a simulated user's turns.
The judge reads the tool calls the assistant made (its steps) beside its replies; a simulated
user reads only the replies, as a person would (`heard`).
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .steps import Step, describe_steps

# The variables that fill in what a suite file's `[judge]` table leaves out.
BASE_URL_VARIABLE = "MOSAIC_JUDGE_BASE_URL"
MODEL_VARIABLE = "MOSAIC_JUDGE_MODEL"
API_KEY_VARIABLE = "MOSAIC_JUDGE_API_KEY"
REQUEST_SECONDS = 120.0
# A fenced block around the answer (```json … ```), which small models add unasked.
_FENCED = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)

GRADER = (
    "You grade an AI assistant's work in a conversation against a rubric. Answer with only a "
    'JSON object, {"pass": true, "reason": "…"} or {"pass": false, "reason": "…"}, where the '
    "reason is one sentence saying why. Write nothing else. Lines headed ASSISTANT'S TOOL "
    "CALLS list the actions the assistant took while answering and how each ended; the user "
    "does not see them."
)
USER_PLAYER = (
    "You play the user in a conversation with an AI assistant, to test the assistant. Stay in "
    "the persona and work towards the goal. Write only the user's next message: no quotation "
    "marks, no labels, nothing else."
)


class JudgeError(Exception):
    """The judge could not be asked, or answered something that is not a verdict."""


@dataclass(frozen=True)
class JudgeConfig:
    """Where the judge is: `base_url` (ending in `/v1` for most servers), the model, and the
    NAME of the variable holding its key (None: `MOSAIC_JUDGE_API_KEY`, when set)."""

    base_url: str
    model: str
    api_key_env: str | None = None
    votes: int = 1

    def api_key(self, environ: Mapping[str, str] = os.environ) -> str | None:
        return environ.get(self.api_key_env or API_KEY_VARIABLE) or None


@dataclass(frozen=True)
class Vote:
    passed: bool
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {"pass": self.passed, "reason": self.reason}


@dataclass(frozen=True)
class Verdict:
    """The majority of the votes, and every vote."""

    passed: bool
    votes: tuple[Vote, ...]

    @property
    def reasons(self) -> list[str]:
        return [vote.reason for vote in self.votes]


# (speaker, text): `user` for the tester's turns, `steps` for the tool calls the assistant
# made answering one, `assistant` for the replies.
Transcript = Sequence[tuple[str, str]]
USER = "user"
STEPS = "steps"
ASSISTANT = "assistant"
_HEADINGS = {STEPS: "ASSISTANT'S TOOL CALLS"}


def transcript_text(transcript: Transcript) -> str:
    return "\n\n".join(
        f"{_HEADINGS.get(speaker, speaker.upper())}: {text}" for speaker, text in transcript
    )


def turn_transcript(sent: str, *, steps: Sequence[Step], reply: str | None) -> Transcript:
    """One turn as the judge reads it: what was sent, the calls made answering it (each with
    what it answered), and the reply when one came."""
    said = [(USER, sent)]
    if steps:
        said.append((STEPS, describe_steps(steps, with_result=True)))
    if reply is not None:
        said.append((ASSISTANT, reply))
    return said


def heard(transcript: Transcript) -> Transcript:
    """What a person in the conversation sees of it: the turns and replies, no steps."""
    return [(speaker, text) for speaker, text in transcript if speaker != STEPS]


def parse_vote(content: str) -> Vote:
    """A verdict object from the judge's answer (a lone fenced block is unwrapped), else
    `JudgeError` quoting what came."""
    text = content.strip()
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    if (
        not isinstance(answer, dict)
        or not isinstance(answer.get("pass"), bool)
        or not isinstance(answer.get("reason"), str)
    ):
        shown = " ".join(content.split())[:200]
        raise JudgeError(
            f'the judge did not answer {{"pass": true|false, "reason": "…"}}: it said “{shown}”'
        )
    return Vote(answer["pass"], answer["reason"])


def error_message(error: urllib.error.HTTPError) -> str:
    """What an OpenAI-compatible server says in its error body, on one short line."""
    try:
        body = error.read(4096).decode("utf-8", "replace")
    except OSError:
        return error.reason if isinstance(error.reason, str) else "no reason given"
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body
    return " ".join(str(message).split())[:200] or "no reason given"


class Judge:
    """One judge server. Safe to share between threads: each call opens its own connection."""

    def __init__(self, config: JudgeConfig, environ: Mapping[str, str] = os.environ) -> None:
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.api_key = config.api_key(environ)
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def complete(self, system: str, prompt: str) -> str:
        """The model's answer to one system and one user message, at temperature 0."""
        body = {
            "model": self.config.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": prompt},
            ],
        }
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            request = urllib.request.Request(
                self.url, data=json.dumps(body).encode(), method="POST", headers=headers
            )
            with self.opener.open(request, timeout=REQUEST_SECONDS) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:
            raise JudgeError(
                f"the judge at {self.url} answered {error.code}: {error_message(error)}"
            ) from None
        except (OSError, ValueError) as error:
            raise JudgeError(f"the judge at {self.url} did not answer ({error})") from None
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise JudgeError(f"the judge at {self.url} answered no message")
        return content

    def decide(self, prompt: str) -> Verdict:
        """Ask `votes` times; the majority decides."""
        votes = tuple(parse_vote(self.complete(GRADER, prompt)) for _ in range(self.config.votes))
        passed = sum(vote.passed for vote in votes) * 2 > len(votes)
        return Verdict(passed, votes)

    def grade_reply(self, rubric: str, transcript: Transcript) -> Verdict:
        """Grade the last reply of `transcript` against `rubric`; the turns before it are its
        context."""
        return self.decide(
            f"Rubric:\n{rubric}\n\nConversation:\n{transcript_text(transcript)}\n\n"
            "Grade only the assistant's last message, with the conversation as its context."
        )

    def grade_conversation(self, rubric: str, transcript: Transcript) -> Verdict:
        return self.decide(
            f"Rubric:\n{rubric}\n\nConversation:\n{transcript_text(transcript)}\n\n"
            "Grade the assistant's part in the whole conversation."
        )

    def goal_met(self, *, persona: str, goal: str, transcript: Transcript) -> Verdict:
        return self.decide(
            f"A user ({persona}) talks to an AI assistant with this goal: {goal}\n\n"
            f"Conversation:\n{transcript_text(transcript)}\n\n"
            "Pass if the assistant has met the user's goal by now, fail if not yet."
        )

    def user_turn(self, *, persona: str, goal: str, transcript: Transcript) -> str:
        """The simulated user's next message."""
        so_far = transcript_text(transcript) if transcript else "(nothing yet: you speak first)"
        text = self.complete(
            USER_PLAYER,
            f"Persona: {persona}\nGoal: {goal}\n\nConversation so far:\n{so_far}\n\n"
            "Your next message:",
        ).strip()
        if not text:
            raise JudgeError("the judge wrote an empty user turn")
        return text
