"""A chat completions request read as a conversation (SPEC §6.1), without a server."""

from __future__ import annotations

import pytest

from tester.openai.inputs import NAMED_MAX, Unreadable, read_request

USER = {"role": "user", "content": "hello"}


def test_text_parts_are_joined_and_null_keys_of_a_sent_back_reply_are_no_field() -> None:
    """A client that sends back the reply object it got (`refusal`, `tool_calls` … null) sends
    nothing the endpoint ignores; text parts read as one text."""
    asked = read_request(
        {
            "model": "assistant",
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
                {
                    "role": "assistant",
                    "content": "c",
                    "refusal": None,
                    "tool_calls": None,
                    "audio": None,
                },
                USER,
            ],
        }
    )
    assert asked.history == (("user", "a\nb"), ("assistant", "c"))
    assert (asked.turn, asked.stream, asked.ignored) == ("hello", False, ())


def test_fields_outside_the_conversation_are_ignored_known_or_not() -> None:
    asked = read_request(
        {
            "model": "m",
            "messages": [USER],
            "seed": 1,
            "frequency_penalty": 0,
            "top_k": 40,
            "tools": [],
        }
    )
    assert asked.ignored == ("frequency_penalty", "seed", "top_k")


def test_the_ignored_fields_header_names_at_most_so_many() -> None:
    body = {"model": "m", "messages": [USER], **{f"f{number:03d}": 1 for number in range(40)}}
    header = read_request(body).ignored_header
    assert header.count(",") == NAMED_MAX and header.endswith(", …")


@pytest.mark.parametrize(
    "content", [None, 3, [], [{"type": "text"}], [{"type": "text", "text": 1}], {"text": "x"}]
)
def test_content_that_is_no_text_is_unreadable(content: object) -> None:
    with pytest.raises(Unreadable) as unreadable:
        read_request({"model": "m", "messages": [{"role": "user", "content": content}]})
    assert unreadable.value.param == "messages[0].content"


@pytest.mark.parametrize("choice", ["none", "auto", None])
def test_a_tool_choice_that_asks_for_no_call_is_ignored(choice: object) -> None:
    body = {"model": "m", "messages": [USER], "tool_choice": choice}
    assert read_request(body).ignored == (("tool_choice",) if choice is not None else ())
