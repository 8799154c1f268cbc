"""The JSON of a reply (`tester.suites.matchers`): the whole reply, or its one fenced block."""

from __future__ import annotations

from typing import Any

import pytest

from tester.suites.matchers import NoJson, json_of

TWO_FENCED = '```json\n{"a": 1}\n```\nor\n```json\n{"a": 2}\n```'


@pytest.mark.parametrize(
    ("body", "data"),
    [
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ("  [1, 2]\n", [1, 2]),
        ("Sure:\n```json\n[1, 2]\n```", [1, 2]),
        ('Sure:\n```\n"text"\n```\nDone.', "text"),
    ],
)
def test_json_of_reads_the_reply_or_its_lone_fenced_block(body: str, data: Any) -> None:
    assert json_of(body) == data


@pytest.mark.parametrize("body", ["Ada", TWO_FENCED, "```json\n{'a': 1}\n```", "```json {} ```"])
def test_json_of_without_json_raises_no_json(body: str) -> None:
    with pytest.raises(NoJson):
        json_of(body)
