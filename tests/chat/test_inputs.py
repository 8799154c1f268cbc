"""Ids and numbers in paths and queries are ASCII digits, on both listeners (SPEC §6)."""

from __future__ import annotations

import pytest

from tests.support.listeners import HUMAN, ListenerClient

# What `str.isdigit()` or `int()` would take and no id is: superscript two, Arabic-Indic
# three, fullwidth one, an underscore, a sign, spaces, a decimal point, a newline, 19 digits.
NOT_IDS = ["%C2%B2", "%D9%A3", "%EF%BC%91", "1_0", "+1", "%201", "1.0", "1%0A", "9" * 19]

LISTS = [
    ("/api/trail", "after"),
    ("/api/trail", "before"),
    ("/api/messages", "limit"),
    ("/api/chat/projects", "after"),
    ("/api/chat/threads", "project"),
    ("/api/chat/threads/{thread}/messages", "before"),
]


@pytest.mark.parametrize("listener", [HUMAN, "tester"])
def test_list_query_number_not_ascii_digits_is_invalid(
    listener: str, human_client: ListenerClient, human_thread_id: int, tester_thread_id: int
) -> None:
    """DRF's integer field once took "٣" as 3 and "1_0" as 10; every non-id is `invalid`."""
    client = human_client if listener == HUMAN else ListenerClient(listener)
    thread = human_thread_id if listener == HUMAN else tester_thread_id
    answers = {
        (path, name, value): client.get(f"{path.format(thread=thread)}?{name}={value}")
        for path, name in LISTS
        for value in NOT_IDS
    }
    assert {asked: (r.status_code, r.json()["error"]) for asked, r in answers.items()} == (
        dict.fromkeys(answers, (400, "invalid"))
    )
