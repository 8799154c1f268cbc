"""A model that grades replies and plays a user: any OpenAI-compatible chat completions server.

The judge is asked at temperature 0 for `{"pass": true|false, "reason": "..."}`, in JSON mode
(`response_format`) until the server refuses that parameter, after which this judge asks without
it. The first verdict object in its answer counts, fenced or not, prose around it or not
(`read_vote`). An answer with none is asked again once, reminded of the form; a second such
answer is an invalid vote, which keeps what the judge said. With `votes` above one the majority
of the valid votes decides; when no vote is valid, or the server cannot be asked, the judge
raises `JudgeError` (the case is then `error`, never a pass), carrying the votes it has. The
same server writes a simulated user's turns. The judge reads the tool calls the assistant made
(its steps) beside its replies; a simulated user reads only the replies, as a person would
(`heard`).
"""

from __future__ import annotations

import json
import os
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
# How much of a judge's answer, or of a reply, an error message quotes.
QUOTED = 200
# How much of a judge's answer is searched for its verdict: far more than the one sentence it
# is asked for, and a bound on the work a hostile answer (one quoting a reply) can cause.
READ = 20_000
# JSON mode, asked of every grading request while the server takes it.
JSON_MODE = {"type": "json_object"}
# A 4xx refusing JSON mode names the parameter or says it is not supported; 401, 403, 404 and
# 429 say something else (a key, a model, a rate), which asking without it would not mend.
JSON_MODE_WORDS = ("response_format", "json_object", "unsupported", "not supported")
NOT_ABOUT_PARAMETERS = frozenset({401, 403, 404, 429})

GRADER = (
    "You grade an AI assistant's work in a conversation against a rubric. Answer with only a "
    'JSON object, {"pass": true, "reason": "…"} or {"pass": false, "reason": "…"}, where the '
    "reason is one sentence saying why. Write nothing else. Lines headed ASSISTANT'S TOOL "
    "CALLS list the actions the assistant took while answering and how each ended; the user "
    "does not see them."
)
# Asked once, after an answer that held no verdict, with that answer before it.
REMINDER = (
    'That is not the JSON object asked for. Answer again with only {"pass": true, "reason": '
    '"…"} or {"pass": false, "reason": "…"}.'
)
USER_PLAYER = (
    "You play the user in a conversation with an AI assistant, to test the assistant. Stay in "
    "the persona and work towards the goal. Write only the user's next message: no quotation "
    "marks, no labels, nothing else."
)


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
    """One answer of the judge: a verdict (`passed` true or false) and its reason, or an invalid
    vote (`passed` None) whose reason is what the judge said instead."""

    passed: bool | None
    reason: str

    @property
    def valid(self) -> bool:
        return self.passed is not None

    @property
    def label(self) -> str:
        """`pass`, `fail` or `invalid`, as the reports write it."""
        return "invalid" if self.passed is None else ("pass" if self.passed else "fail")

    def as_json(self) -> dict[str, Any]:
        return {"pass": self.passed, "reason": self.reason, "valid": self.valid}


@dataclass(frozen=True)
class Verdict:
    """The majority of the valid votes (a tie is no majority for a pass), and every vote."""

    passed: bool
    votes: tuple[Vote, ...]

    @property
    def reasons(self) -> list[str]:
        """The reasons of the votes that decided: the valid ones."""
        return [vote.reason for vote in self.votes if vote.valid]


class JudgeError(Exception):
    """The judge could not be asked, or gave no valid vote; `votes` are those it gave."""

    def __init__(self, message: str, votes: tuple[Vote, ...] = ()) -> None:
        super().__init__(message)
        self.votes = votes


class JsonModeRefused(Exception):
    """The server refused `response_format`: ask again without it."""


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


def quoted(text: str, limit: int = QUOTED) -> str:
    """`text` on one line, at most `limit` characters, in quotation marks."""
    line = " ".join(text.split())
    return f"“{line[: limit - 1]}…”" if len(line) > limit else f"“{line}”"


def is_verdict(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("pass"), bool)
        and isinstance(value.get("reason"), str)
    )


def verdicts_in(value: object) -> list[Vote]:
    """The verdicts in a decoded JSON value, in order: the value itself, else those nested in
    it (a verdict's own contents are not searched)."""
    found: list[Vote] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if is_verdict(item):
            assert isinstance(item, dict)
            found.append(Vote(item["pass"], item["reason"]))
        elif isinstance(item, dict | list):
            children = list(item.values()) if isinstance(item, dict) else item
            pending += reversed(children)
    return found


def read_vote(content: str) -> Vote | None:
    """The first verdict in the judge's answer: a JSON object with a boolean `pass` and a text
    `reason`, decoded from each `{` in turn (the first `READ` characters), so prose and fences
    around it do not matter, and one nested in another object is found too. None when there is
    none, or when the answer holds verdicts that disagree (it has then not decided)."""
    decoder = json.JSONDecoder()
    text = content[:READ]
    found: list[Vote] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            start = text.find("{", start + 1)
            continue
        found += verdicts_in(value)
        start = text.find("{", end)
    if not found or any(vote.passed != found[0].passed for vote in found):
        return None
    return found[0]


def error_body(error: urllib.error.HTTPError) -> str:
    """The first 4 kB of an error answer's body, as text (its reason when it cannot be read)."""
    try:
        return error.read(4096).decode("utf-8", "replace")
    except OSError:
        return error.reason if isinstance(error.reason, str) else ""


def message_of(body: str) -> str:
    """What an OpenAI-compatible server says in its error body, on one short line."""
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body
    return " ".join(str(message).split())[:QUOTED] or "no reason given"


def refuses_json_mode(status: int, body: str) -> bool:
    """Whether an error answer to a request in JSON mode refuses JSON mode: a 4xx about the
    request's parameters that names `response_format` or `json_object`, or says unsupported."""
    if not 400 <= status < 500 or status in NOT_ABOUT_PARAMETERS:
        return False
    said = body.lower()
    return any(word in said for word in JSON_MODE_WORDS)


class Judge:
    """One judge server. Safe to share between threads: each call opens its own connection.
    `takes_json_mode` turns off, for good, the first time the server refuses JSON mode."""

    def __init__(self, config: JudgeConfig, environ: Mapping[str, str] = os.environ) -> None:
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.api_key = config.api_key(environ)
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.takes_json_mode = True

    @property
    def named(self) -> str:
        """The judge as a message names it: its model and where it is."""
        return f"{self.config.model} at {self.url}"

    def complete(self, system: str, prompt: str) -> str:
        """The model's answer to one system and one user message, at temperature 0."""
        return self.chat(
            [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        )

    def chat(self, messages: Sequence[Mapping[str, str]], *, json_mode: bool = False) -> str:
        """The model's answer to `messages`, at temperature 0; in JSON mode when asked and the
        server has not refused it, asked again at once without it when the server does."""
        body: dict[str, Any] = {"model": self.config.model, "temperature": 0, "messages": messages}
        if json_mode and self.takes_json_mode:
            try:
                return self.post({**body, "response_format": JSON_MODE})
            except JsonModeRefused:
                # Remembered: every later request of this judge goes without it.
                self.takes_json_mode = False
        return self.post(body)

    def post(self, body: Mapping[str, Any]) -> str:
        """One chat completion request; its answer's text."""
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
            said = error_body(error)
            if "response_format" in body and refuses_json_mode(error.code, said):
                raise JsonModeRefused from None
            raise JudgeError(
                f"the judge {self.named} answered {error.code}: {message_of(said)}"
            ) from None
        except (OSError, ValueError) as error:
            raise JudgeError(f"the judge {self.named} did not answer ({error})") from None
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise JudgeError(f"the judge {self.named} answered no message")
        return content

    def vote(self, prompt: str) -> Vote:
        """One vote on `prompt`. An answer with no verdict is asked again once, the answer and
        a reminder of the form after it (asked the same at temperature 0, most models would
        say the same); a second one is an invalid vote keeping what the judge said."""
        messages = [{"role": "system", "content": GRADER}, {"role": "user", "content": prompt}]
        answer = self.chat(messages, json_mode=True)
        found = read_vote(answer)
        if found is not None:
            return found
        messages += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": REMINDER},
        ]
        again = self.chat(messages, json_mode=True)
        return read_vote(again) or Vote(None, again.strip())

    def decide(self, prompt: str) -> Verdict:
        """Ask `votes` times; the majority of the valid votes decides. `JudgeError`, with the
        votes so far, when a request fails or no vote is valid."""
        votes: list[Vote] = []
        for _ in range(self.config.votes):
            try:
                votes.append(self.vote(prompt))
            except JudgeError as error:
                raise JudgeError(str(error), tuple(votes)) from None
        valid = [vote for vote in votes if vote.valid]
        if not valid:
            of = f" in any of its {len(votes)} votes" if len(votes) > 1 else ""
            raise JudgeError(
                f'the judge {self.named} did not answer {{"pass": true|false, "reason": "…"}}'
                f"{of}: it said {quoted(votes[0].reason)}",
                tuple(votes),
            )
        passed = sum(bool(vote.passed) for vote in valid) * 2 > len(valid)
        return Verdict(passed, tuple(votes))

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
            raise JudgeError(f"the judge {self.named} wrote an empty user turn")
        return text
