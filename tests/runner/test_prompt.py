"""The prompt of a turn (SPEC §7): within the model's context, with roles that alternate."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.prompt import (
    NO_REPLY,
    STOPPED_NOTE,
    estimate_prompt_tokens,
    estimate_tokens,
    prompt_messages,
    trimmed,
)
from runner.turns import TESTER_LINE, Entry, Turn

OMISSION = re.compile(r"\[… ([\d,]+) characters of this message are left out here")


class Transcript:
    """Builds a thread's history as `read_turn` orders it: each reply right after its turn."""

    def __init__(self, *, tester: bool = False) -> None:
        self.sender = "tester" if tester else "human"
        self.entries: list[Entry] = []

    def _add(self, from_role: str, to_role: str, message_class: str, body: str) -> Transcript:
        entry = Entry(len(self.entries) + 1, from_role, to_role, message_class, body)
        self.entries.append(entry)
        return self

    def turn(self, body: str) -> Transcript:
        return self._add(self.sender, "assistant", "REQUEST", body)

    def reply(self, body: str) -> Transcript:
        return self._add("assistant", self.sender, "RESULT", body)

    def notice(self, body: str) -> Transcript:
        return self._add("assistant", self.sender, "NOTICE", body)

    def message(self, body: str) -> Transcript:
        return self._add("assistant", "reviewer", "MESSAGE", body)

    def answered(self, *bodies: str) -> Transcript:
        for body in bodies:
            self.turn(body).reply(f"re: {body}")
        return self

    def now(self, body: str, *, turns_before: int | None = None) -> Turn:
        """The turn being answered; `turns_before` counts earlier turns the reader cut off too."""
        in_history = sum(entry.message_class == "REQUEST" for entry in self.entries)
        return Turn(
            message_id=1000,
            thread_id=7,
            thread_name="launch",
            instance="assistant",
            from_role=self.sender,
            body=body,
            request_id=None if self.sender == "tester" else 55,
            number=(turns_before if turns_before is not None else in_history) + 1,
            history=tuple(self.entries),
        )


def roles(messages: list) -> list[str]:
    return [message["role"] for message in messages]


def conversation(messages: list) -> list[tuple[str, str]]:
    return [(message["role"], message["content"]) for message in messages[1:]]


def budget_of(context: int, reply: int | None) -> int:
    reserved = context // 4 if reply is None else max(reply, 0)
    return context - min(reserved, context // 2)


# --- roles that alternate ----------------------------------------------------------------------


def test_prompt_answered_history_alternates_and_ends_with_turn() -> None:
    turn = Transcript().answered("first", "second").now("third")
    assert conversation(prompt_messages(turn)) == [
        ("user", "first"),
        ("assistant", "re: first"),
        ("user", "second"),
        ("assistant", "re: second"),
        ("user", "third"),
    ]


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_prompt_unanswered_turn_gets_placeholder_reply(where: str) -> None:
    """A stopped or failed turn (a REQUEST with no RESULT after it) is followed by a
    placeholder reply, never by a second user message."""
    transcript = Transcript()
    bodies = ["one", "two", "three"]
    unanswered = {"first": "one", "middle": "two", "last": "three"}[where]
    for body in bodies:
        transcript.turn(body)
        if body != unanswered:
            transcript.reply(f"re: {body}")
    messages = prompt_messages(transcript.now("four"))
    assert roles(messages) == ["system", *["user", "assistant"] * 3, "user"]
    replies = {body: messages[2 + 2 * index]["content"] for index, body in enumerate(bodies)}
    assert replies[unanswered] == NO_REPLY
    assert all(reply == f"re: {body}" for body, reply in replies.items() if body != unanswered)


def test_prompt_turns_with_no_reply_in_a_row_each_get_placeholder() -> None:
    turn = Transcript().turn("a").turn("b").turn("c").now("d")
    assert conversation(prompt_messages(turn)) == [
        ("user", "a"),
        ("assistant", NO_REPLY),
        ("user", "b"),
        ("assistant", NO_REPLY),
        ("user", "c"),
        ("assistant", NO_REPLY),
        ("user", "d"),
    ]


def test_prompt_turn_stopped_mid_reply_carries_its_partial_reply_marked_stopped() -> None:
    """SPEC §7.1, docs/decisions/prompts.md: a stopped turn's partial reply is the next prompt's
    assistant message, marked as stopped there, so "go on" can continue it; a turn stopped
    before any text keeps the placeholder."""
    transcript = Transcript().turn("tell a story")
    transcript.entries[-1] = Entry(1, "human", "assistant", "REQUEST", "tell a story", "Once upon")
    transcript.turn("never mind")
    messages = prompt_messages(transcript.now("go on"))
    assert conversation(messages) == [
        ("user", "tell a story"),
        ("assistant", f"Once upon\n\n{STOPPED_NOTE}"),
        ("user", "never mind"),
        ("assistant", NO_REPLY),
        ("user", "go on"),
    ]


def test_prompt_reply_whose_turn_fell_out_of_window_is_left_out_and_noted() -> None:
    """The reader's window can start with a reply whose turn it cut: no assistant message
    comes first, and the system prompt counts the turn as left out."""
    turn = Transcript().reply("orphan reply").answered("kept").now("now", turns_before=2)
    messages = prompt_messages(turn)
    assert conversation(messages) == [("user", "kept"), ("assistant", "re: kept"), ("user", "now")]
    assert "the thread's first turn and its reply" in messages[0]["content"]


def test_prompt_notice_is_listed_in_system_prompt_not_a_later_system_message() -> None:
    turn = (
        Transcript()
        .answered("hello")
        .notice("Maintenance at 18:00 UTC.")
        .turn("stopped one")
        .notice("Service restored.")
        .now("and now?")
    )
    messages = prompt_messages(turn)
    assert roles(messages).count("system") == 1
    system = messages[0]["content"]
    assert "- Maintenance at 18:00 UTC.\n- Service restored." in system
    assert "not the user's words" in system
    assert all("Maintenance" not in content for _, content in conversation(messages))


def test_prompt_bus_messages_are_left_out() -> None:
    """MESSAGE entries are bus traffic between roles, not the conversation with the owner."""
    turn = Transcript().turn("q").message("to the reviewer").reply("a").now("next")
    messages = prompt_messages(turn)
    assert conversation(messages) == [("user", "q"), ("assistant", "a"), ("user", "next")]
    assert "reviewer" not in messages[0]["content"]


# --- the tester line and the system text (SPEC §7) -----------------------------------------------


@pytest.mark.parametrize("system", [None, "You are the launch planner."])
def test_prompt_tester_turn_begins_with_tester_line(system: str | None) -> None:
    turn = Transcript(tester=True).answered("earlier").now("now")
    content = prompt_messages(turn, system=system)[0]["content"]
    assert content.split("\n")[0] == TESTER_LINE


@pytest.mark.parametrize("system", [None, "You are the launch planner."])
def test_prompt_human_turn_has_no_tester_line(system: str | None) -> None:
    turn = Transcript().answered("earlier").now("now")
    assert TESTER_LINE not in prompt_messages(turn, system=system)[0]["content"]


def test_prompt_system_text_replaces_default() -> None:
    turn = Transcript(tester=True).now("hi")
    content = prompt_messages(turn, system="You are the launch planner.")[0]["content"]
    assert content == f"{TESTER_LINE}\nYou are the launch planner."


def test_prompt_default_system_text_names_instance_and_thread() -> None:
    content = prompt_messages(Transcript().now("hi"))[0]["content"]
    assert content.startswith("You are assistant,") and "“launch”" in content


# --- the budget ----------------------------------------------------------------------------------


def test_prompt_history_that_fits_is_sent_whole_without_note() -> None:
    turn = Transcript().answered("one", "two").now("three")
    messages = prompt_messages(turn, context_tokens=4096)
    assert len(messages) == 6
    assert "Left out" not in messages[0]["content"]


def test_prompt_budget_drops_oldest_turns_first_and_notes_it() -> None:
    bodies = [f"turn {index}: " + "plan the launch checklist " * 10 for index in range(30)]
    turn = Transcript().answered(*bodies).now("what is left?")
    messages = prompt_messages(turn, context_tokens=2048, reply_tokens=512)

    sent_turns = [content for role, content in conversation(messages)[:-1] if role == "user"]
    assert 0 < len(sent_turns) < len(bodies)
    assert sent_turns == bodies[-len(sent_turns) :]  # the newest, in order
    left_out = len(bodies) - len(sent_turns)
    assert f"the thread's first {left_out} turns and their replies" in messages[0]["content"]
    assert estimate_prompt_tokens(messages) <= 2048 - 512


def test_prompt_budget_does_not_skip_a_big_exchange_to_keep_older_ones() -> None:
    """What is sent is the thread's latest stretch without gaps."""
    turn = Transcript().answered("small old one", "x" * 6000, "small recent one").now("now")
    messages = prompt_messages(turn, context_tokens=2048, reply_tokens=512)
    assert [content for role, content in conversation(messages) if role == "user"] == [
        "small recent one",
        "now",
    ]
    assert "the thread's first 2 turns and" in messages[0]["content"]


def test_prompt_more_reply_room_keeps_less_history() -> None:
    turn = Transcript().answered(*[f"turn {index} " * 40 for index in range(40)]).now("now")
    roomy = prompt_messages(turn, context_tokens=4096, reply_tokens=256)
    tight = prompt_messages(turn, context_tokens=4096, reply_tokens=1800)
    assert len(tight) < len(roomy)
    assert estimate_prompt_tokens(tight) <= 4096 - 1800


def test_prompt_reply_room_never_takes_more_than_half_the_context() -> None:
    turn = Transcript().answered("one", "two").now("three")
    messages = prompt_messages(turn, context_tokens=2048, reply_tokens=100_000)
    assert len(messages) == 6
    assert estimate_prompt_tokens(messages) <= 1024


def test_prompt_context_defaults_to_setting(settings) -> None:
    turn = Transcript().answered(*[f"turn {index} " * 40 for index in range(40)]).now("now")
    settings.MOSAIC_ASSISTANT_CONTEXT_TOKENS = 1024
    small = prompt_messages(turn)
    settings.MOSAIC_ASSISTANT_CONTEXT_TOKENS = 8192
    large = prompt_messages(turn)
    assert len(small) < len(large)
    assert estimate_prompt_tokens(small) <= 1024 - 1024 // 4


def test_prompt_huge_turn_is_trimmed_in_the_middle_and_fits() -> None:
    """A 13 kB paste against a 2,048-token model keeps its beginning and end, says how much
    is missing, and is sent, never refused."""
    paste = "BEGIN " + "".join(f"line {index}: the quarterly numbers\n" for index in range(420))
    paste += "What stands out? END"
    assert len(paste) > 13_000
    turn = Transcript().answered("earlier").now(paste)
    messages = prompt_messages(turn, context_tokens=2048, reply_tokens=512)

    sent = messages[-1]
    assert sent["role"] == "user"
    content = sent["content"]
    assert content.startswith("BEGIN line 0") and content.endswith("What stands out? END")
    match = OMISSION.search(content)
    assert match is not None
    head, _, tail = content.partition("\n\n[…")
    tail = tail.split("…]\n\n", 1)[1]
    assert paste.startswith(head) and paste.endswith(tail)
    assert len(head) + int(match.group(1).replace(",", "")) + len(tail) == len(paste)
    assert estimate_prompt_tokens(messages) <= 2048 - 512


def test_prompt_turn_that_fits_is_sent_exactly() -> None:
    body = "a long but fitting question " * 50
    assert prompt_messages(Transcript().now(body), context_tokens=4096)[-1]["content"] == body


def test_trimmed_text_within_limit_is_unchanged() -> None:
    assert trimmed("short", max_tokens=10) == "short"


# --- the estimate --------------------------------------------------------------------------------


def test_estimate_counts_digits_and_symbols_a_token_each() -> None:
    assert estimate_tokens("1234567890") == 10
    assert estimate_tokens('{"":[]}') == 7
    assert estimate_tokens("abc") == 1


def test_estimate_counts_bytes_past_the_first_of_non_ascii_characters() -> None:
    assert estimate_tokens("日本語") == 1 + 2 * 3
    assert estimate_tokens("é") == 1 + 1


def test_estimate_of_code_is_above_three_characters_a_token() -> None:
    code = 'def reply(self, turn: Turn) -> Reply:\n    return Reply(text=f"{turn.body}")\n'
    assert estimate_tokens(code) > len(code) / 3


def test_estimate_of_prompt_counts_each_message_markers() -> None:
    """Templates wrap every message in role markers, so even an empty message costs tokens."""
    one = estimate_prompt_tokens([{"role": "user", "content": ""}])
    two = estimate_prompt_tokens(
        [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}]
    )
    assert one > 0 and two > one


@given(st.text(), st.text())
def test_estimate_never_below_a_token_per_three_characters_and_subadditive(a: str, b: str) -> None:
    assert estimate_tokens(a) >= len(a) / 3
    assert estimate_tokens(a) <= estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)


# --- any history ---------------------------------------------------------------------------------

bodies = st.text(min_size=1, max_size=300)
events = st.lists(
    st.one_of(
        st.tuples(st.just("answered"), bodies, bodies),
        st.tuples(st.just("unanswered"), bodies, st.just("")),
        st.tuples(st.just("notice"), bodies, st.just("")),
        st.tuples(st.just("message"), bodies, st.just("")),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    events=events,
    orphan_reply=st.booleans(),
    cut_turns=st.integers(min_value=0, max_value=3),
    tester=st.booleans(),
    body=st.tuples(st.text(min_size=1, max_size=200), st.integers(1, 120)),
    context=st.integers(min_value=1024, max_value=8192),
    reply=st.none() | st.integers(min_value=0, max_value=10_000),
)
def test_prompt_for_any_history_alternates_and_fits(
    events: list[tuple[str, str, str]],
    orphan_reply: bool,
    cut_turns: int,
    tester: bool,
    body: tuple[str, int],
    context: int,
    reply: int | None,
) -> None:
    """Whatever the history (stopped and failed turns anywhere, notices, bus messages, a window
    that starts with a reply): one system message first, then user and assistant in turn,
    the current turn last, the newest turns kept, the whole within the budget."""
    transcript = Transcript(tester=tester)
    if orphan_reply:
        transcript.reply("reply to a turn the window cut")
    turn_bodies = []
    for kind, first, second in events:
        if kind == "answered":
            transcript.turn(first).reply(second)
        elif kind == "unanswered":
            transcript.turn(first)
        elif kind == "notice":
            transcript.notice(first)
        else:
            transcript.message(first)
        if kind in ("answered", "unanswered"):
            turn_bodies.append(first)
    text = body[0] * body[1]
    turn = transcript.now(text, turns_before=len(turn_bodies) + cut_turns + orphan_reply)

    messages = prompt_messages(turn, context_tokens=context, reply_tokens=reply)

    assert roles(messages) == ["system"] + ["user", "assistant"] * ((len(messages) - 2) // 2) + [
        "user"
    ]
    assert (messages[0]["content"].split("\n")[0] == TESTER_LINE) is tester
    sent_turns = [content for role, content in conversation(messages)[:-1] if role == "user"]
    assert sent_turns == turn_bodies[len(turn_bodies) - len(sent_turns) :]
    if OMISSION.search(messages[-1]["content"]) is None:
        assert messages[-1]["content"] == text
    assert estimate_prompt_tokens(messages) <= budget_of(context, reply)
