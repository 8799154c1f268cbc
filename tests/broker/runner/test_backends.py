"""Reply backends (SPEC §7): the offline default and the OpenAI-compatible chat completions one."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from django.core.exceptions import ImproperlyConfigured

from broker import refusals
from broker.refusals import Refusal
from broker.runner.backends import ReplyFailed, TurnCancelled, backend_from_settings, no_drafts
from broker.runner.backends.chat_completions import ChatCompletionsBackend
from broker.runner.backends.offline import OfflineBackend
from broker.runner.turns import TESTER_LINE, Entry, Turn

TESTER_LINE_IN_SPEC = "This message is from a tester running a product test; it authorizes nothing."


@dataclass
class Tools:
    """Records task requests; refuses, as the broker does, when the turn has no request (R15)."""

    request_id: int | None
    titles: list[str] = field(default_factory=list)

    def create_task(self, title: str) -> int:
        if self.request_id is None:
            raise Refusal(refusals.INVALID, "no human request")
        self.titles.append(title)
        return 41 + len(self.titles)


def make_turn(body: str, *earlier: str, tester: bool = False, replies: bool = True) -> Turn:
    """A turn after `earlier` turns (each answered, unless `replies` is false)."""
    sender = "tester" if tester else "human"
    history: list[Entry] = []
    for index, text in enumerate(earlier):
        history.append(Entry(index * 2 + 1, sender, "assistant", "REQUEST", text))
        if replies:
            history.append(Entry(index * 2 + 2, "assistant", sender, "RESULT", f"reply {index}"))
    return Turn(
        message_id=100,
        thread_id=7,
        thread_name="launch",
        instance="assistant",
        from_role=sender,
        body=body,
        request_id=None if tester else 55,
        number=len(earlier) + 1,
        history=tuple(history),
    )


def offline(turn: Turn, tools: Tools | None = None) -> str:
    tools = tools or Tools(request_id=turn.request_id)
    reply = OfflineBackend().reply(turn, tools=tools, cancel=threading.Event(), draft=no_drafts)
    return reply.text


def test_tester_line_is_spec_line() -> None:
    """SPEC §7: the one constant both backends use is the spec's line, exactly."""
    assert TESTER_LINE == TESTER_LINE_IN_SPEC


# --- offline ----------------------------------------------------------------------------


def test_offline_greeting_first_and_later_turns_differ() -> None:
    assert "Say “help”" in offline(make_turn("Hello"))
    assert "turn 3 of “launch”" in offline(make_turn("hi!", "a", "b"))


def test_offline_help_lists_what_it_can_do() -> None:
    text = offline(make_turn("help", "earlier"))
    assert "summary" in text and "task:" in text and "turn 2" in text


def test_offline_summary_counts_and_lists_earlier_turns() -> None:
    """History-aware: the summary counts turns and replies and quotes each earlier turn."""
    text = offline(make_turn("summary please", "ship on friday", "and the docs"))
    assert "2 turns before this one and 2 replies from me" in text
    assert "1. “ship on friday”" in text and "2. “and the docs”" in text


def test_offline_summary_of_first_turn_says_nothing_yet() -> None:
    assert "Nothing to summarise yet" in offline(make_turn("summary"))


def test_offline_question_points_to_earlier_turn_sharing_words() -> None:
    """History-aware: a question is tied to the earlier turn that speaks of the same thing."""
    turn = make_turn("When is the invoice due?", "the invoice is due on the 3rd", "lunch at one")
    text = offline(turn)
    assert "In turn 1 of this thread you wrote “the invoice is due on the 3rd”" in text


def test_offline_question_with_nothing_related_says_so_plainly() -> None:
    text = offline(make_turn("What is the capital of Peru?", "lunch at one"))
    assert "Nothing earlier in this thread bears on it" in text


def test_offline_statement_acknowledged_with_previous_turn() -> None:
    assert offline(make_turn("we ship friday", "draft ready")) == (
        "Noted (turn 2): “we ship friday”. Before this you wrote “draft ready”."
    )


def test_offline_reply_is_deterministic() -> None:
    turn = make_turn("What about the invoice?", "the invoice is late")
    assert offline(turn) == offline(turn)


def test_offline_human_task_turn_creates_task_and_says_so() -> None:
    """R15: a human's `task:` turn creates a task from its request; the reply names it."""
    tools = Tools(request_id=55)
    text = offline(make_turn("task: write the launch note"), tools)
    assert tools.titles == ["write the launch note"]
    assert text.startswith("Created task #42: “write the launch note”")


def test_offline_tester_task_turn_is_refused_and_reply_says_so() -> None:
    """R15: a tester turn authorizes nothing; no task is created and the reply says so."""
    tools = Tools(request_id=None)
    text = offline(make_turn("task: wipe the database", tester=True), tools)
    assert tools.titles == []
    assert text == f"No task was created. {TESTER_LINE}"


def test_offline_task_without_title_asks_for_one() -> None:
    tools = Tools(request_id=55)
    assert "needs a title" in offline(make_turn("task:"), tools)
    assert tools.titles == []


def test_offline_cancelled_turn_raises() -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(TurnCancelled):
        OfflineBackend().reply(make_turn("hi"), tools=Tools(None), cancel=cancel, draft=no_drafts)


# --- OpenAI-compatible chat completions (through a fake server on loopback) -----------------


def chat_backend(fake_model, *, timeout: float = 5.0, key: str = "") -> ChatCompletionsBackend:
    return ChatCompletionsBackend(
        base_url=fake_model.url, model="local-model", api_key=key, timeout=timeout
    )


def test_chat_completions_tester_turn_prompt_begins_with_tester_line(fake_model) -> None:
    """SPEC §7: a tester turn's prompt begins with the tester line; history becomes messages."""
    turn = make_turn("and now?", "first question", tester=True)
    text = (
        chat_backend(fake_model, key="sk-test")
        .reply(turn, tools=Tools(None), cancel=threading.Event(), draft=no_drafts)
        .text
    )
    assert text == "model reply"
    (request,) = fake_model.requests
    assert request["model"] == "local-model"
    messages = request["messages"]
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].split("\n")[0] == TESTER_LINE
    assert [(m["role"], m["content"]) for m in messages[1:]] == [
        ("user", "first question"),
        ("assistant", "reply 0"),
        ("user", "and now?"),
    ]
    assert fake_model.headers[0]["authorization"] == "Bearer sk-test"


def test_chat_completions_human_turn_prompt_has_no_tester_line(fake_model) -> None:
    chat_backend(fake_model).reply(
        make_turn("hello"), tools=Tools(55), cancel=threading.Event(), draft=no_drafts
    )
    prompt = fake_model.requests[0]["messages"]
    assert TESTER_LINE not in prompt[0]["content"]
    assert prompt[-1] == {"role": "user", "content": "hello"}


def test_chat_completions_server_error_raises_reply_failed(fake_model) -> None:
    """Decision (Runs): a backend error answers nothing; the run names the error."""
    fake_model.status = 500
    with pytest.raises(ReplyFailed, match="InternalServerError"):
        chat_backend(fake_model).reply(
            make_turn("hi"), tools=Tools(55), cancel=threading.Event(), draft=no_drafts
        )
    assert len(fake_model.requests) == 1  # one attempt: retries are the runner's


def test_chat_completions_timeout_raises_reply_failed(fake_model) -> None:
    fake_model.delay = 5
    with pytest.raises(ReplyFailed, match="Timeout"):
        chat_backend(fake_model, timeout=0.3).reply(
            make_turn("hi"), tools=Tools(55), cancel=threading.Event(), draft=no_drafts
        )


def test_chat_completions_empty_answer_raises_reply_failed(fake_model) -> None:
    fake_model.content = ""
    with pytest.raises(ReplyFailed, match="no text"):
        chat_backend(fake_model).reply(
            make_turn("hi"), tools=Tools(55), cancel=threading.Event(), draft=no_drafts
        )


def test_chat_completions_cancel_mid_request_abandons_it_promptly(fake_model) -> None:
    """SPEC §7: stop means stop — a cancelled turn does not wait for the model."""
    fake_model.delay = 30
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(TurnCancelled):
        chat_backend(fake_model).reply(
            make_turn("hi"), tools=Tools(55), cancel=cancel, draft=no_drafts
        )
    assert time.monotonic() - started < 1.0


def test_chat_completions_unreachable_server_raises_reply_failed() -> None:
    backend = ChatCompletionsBackend(
        base_url="http://127.0.0.1:9/v1", model="m", api_key="", timeout=2
    )
    with pytest.raises(ReplyFailed, match="APIConnectionError"):
        backend.reply(make_turn("hi"), tools=Tools(55), cancel=threading.Event(), draft=no_drafts)


# --- choosing a backend -------------------------------------------------------------------


def test_backend_from_settings_default_is_offline(settings) -> None:
    assert backend_from_settings().name == "offline"


def test_backend_from_settings_openai_reads_url_model_key(settings) -> None:
    settings.MOSAIC_ASSISTANT_BACKEND = "openai"
    settings.MOSAIC_ASSISTANT_BASE_URL = "http://127.0.0.1:8080/v1"
    settings.MOSAIC_ASSISTANT_MODEL = "llama"
    settings.MOSAIC_ASSISTANT_API_KEY = "k"
    backend = backend_from_settings()
    assert isinstance(backend, ChatCompletionsBackend)
    assert (backend.base_url, backend.model, backend.api_key) == (
        "http://127.0.0.1:8080/v1",
        "llama",
        "k",
    )


@pytest.mark.parametrize(
    ("name", "model"),
    [("openai", ""), ("gpt", "m"), ("", "m")],
    ids=["no-model", "unknown", "empty"],
)
def test_backend_from_settings_misconfigured_fails_closed(settings, name: str, model: str) -> None:
    settings.MOSAIC_ASSISTANT_BACKEND = name
    settings.MOSAIC_ASSISTANT_MODEL = model
    with pytest.raises(ImproperlyConfigured):
        backend_from_settings()
