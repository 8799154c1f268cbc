"""A turn's and a conversation's expectations (`tester.suites.expectations`), over stand-in
replies and a stand-in judge (pure: no server, no model)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from tester.suites.client import Outcome
from tester.suites.costs import Price, Spend, TurnCost
from tester.suites.expectation_keys import ConversationExpect, Expect
from tester.suites.expectations import (
    Checked,
    Failure,
    check_conversation,
    check_turn,
    first_failure,
)
from tester.suites.judge import JudgeError, Vote
from tests.support.stand_ins import StandInJudge, answered, as_judge, unanswered

FENCED = 'Here it is:\n```json\n{"name": "Ada", "age": 36}\n```\nAnything else?'
TWO_FENCED = '```json\n{"a": 1}\n```\nor\n```json\n{"a": 2}\n```'
SCHEMA = {
    "type": "object",
    "required": ["name", "age"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
}
NO_JSON = "the reply is JSON, or its only fenced code block is"


@pytest.mark.parametrize(
    ("expect", "came", "failure"),
    [
        # contains / not_contains / matches, as before
        (Expect(), answered("hi"), None),
        (Expect(contains=("a", "b")), answered("a b"), None),
        (Expect(contains=("a", "z")), answered("a b"), Failure("the reply contains 'z'", "a b")),
        (
            Expect(not_contains=("b",)),
            answered("a b"),
            Failure("the reply does not contain 'b'", "a b"),
        ),
        (Expect(matches=re.compile("^a")), answered("a b"), None),
        (
            Expect(matches=re.compile("^b")),
            answered("a b"),
            Failure("the reply matches '^b'", "a b"),
        ),
        # icontains
        (Expect(icontains=("HELLO", "ada")), answered("Hello, Ada"), None),
        (
            Expect(icontains=("hello", "bob")),
            answered("Hello, Ada"),
            Failure("the reply contains 'bob', in any case", "Hello, Ada"),
        ),
        # equals: the reply's surrounding whitespace does not count
        (Expect(equals="42"), answered(" 42\n"), None),
        (Expect(equals=" 42 "), answered("42"), None),
        (Expect(equals="42"), answered("42."), Failure("the reply is '42'", "42.")),
        # not_matches
        (Expect(not_matches=re.compile("(?i)sorry")), answered("Done."), None),
        (
            Expect(not_matches=re.compile("(?i)sorry")),
            answered("Sorry, no."),
            Failure("the reply does not match '(?i)sorry'", "Sorry, no."),
        ),
        # json: the whole reply, or its one fenced code block
        (Expect(json=True), answered('{"a": 1}'), None),
        (Expect(json=True), answered(FENCED), None),
        (
            Expect(json=True),
            answered("no json here"),
            Failure(
                NO_JSON,
                "not JSON (Expecting value), and 0 fenced code blocks, not one: no json here",
            ),
        ),
        (
            Expect(json=True),
            answered(TWO_FENCED),
            Failure(
                NO_JSON,
                f"not JSON (Expecting value), and 2 fenced code blocks, not one: {TWO_FENCED}",
            ),
        ),
        (
            Expect(json=True),
            answered("```\n{nope}\n```"),
            Failure(
                NO_JSON,
                "its fenced code block is not JSON (Expecting property name enclosed in double "
                "quotes): ```\n{nope}\n```",
            ),
        ),
        # json_schema: implies json
        (Expect(json_schema=SCHEMA), answered(FENCED), None),
        (
            Expect(json_schema=SCHEMA),
            answered('{"name": "Ada", "age": "36"}'),
            Failure(
                "the reply's JSON matches its json_schema", "at age: '36' is not of type 'integer'"
            ),
        ),
        (
            Expect(json_schema=SCHEMA),
            answered('{"name": "Ada"}'),
            Failure(
                "the reply's JSON matches its json_schema",
                "at the top: 'age' is a required property",
            ),
        ),
        (
            Expect(json_schema=SCHEMA),
            answered("Ada, 36"),
            Failure(
                NO_JSON,
                "not JSON (Expecting value), and 0 fenced code blocks, not one: Ada, 36",
            ),
        ),
        # timings
        (Expect(max_seconds=2), answered("hi", seconds=2.0), None),
        (
            Expect(max_seconds=2),
            answered("hi", seconds=2.5),
            Failure("the whole reply within 2 s", "it took 2.50 s"),
        ),
        (Expect(max_first_token_seconds=0.5), answered("hi", first_token=0.5), None),
        (
            Expect(max_first_token_seconds=0.5),
            answered("hi", first_token=1.25),
            Failure("the first token within 0.5 s", "the first token came after 1.25 s"),
        ),
        # what the backend recorded: tokens, model, finish reason
        (
            Expect(max_completion_tokens=5),
            answered("hi", usage={"prompt_tokens": 9, "completion_tokens": 5}),
            None,
        ),
        (
            Expect(max_completion_tokens=5),
            answered("hi", usage={"prompt_tokens": 9, "completion_tokens": 6}),
            Failure("at most 5 completion tokens", "6 completion tokens"),
        ),
        (
            Expect(max_completion_tokens=5),
            answered("hi"),
            Failure("at most 5 completion tokens", "the backend recorded no token usage"),
        ),
        (
            Expect(max_completion_tokens=5),
            answered("hi", usage={"prompt_tokens": 9}),
            Failure("at most 5 completion tokens", "the backend recorded no token usage"),
        ),
        (Expect(model="qwen"), answered("hi", model="qwen"), None),
        (
            Expect(model="qwen"),
            answered("hi", model="llama"),
            Failure("model 'qwen'", "model 'llama'"),
        ),
        (
            Expect(model="qwen"),
            answered("hi"),
            Failure("model 'qwen'", "the backend recorded no model"),
        ),
        (Expect(finish_reason="stop"), answered("hi", finish_reason="stop"), None),
        (
            Expect(finish_reason="stop"),
            answered("hi", finish_reason="length"),
            Failure("finish_reason 'stop'", "finish_reason 'length'"),
        ),
        (
            Expect(finish_reason="stop"),
            answered("hi"),
            Failure("finish_reason 'stop'", "the backend recorded no finish_reason"),
        ),
        # no reply, and reply = false
        (
            Expect(within=2),
            unanswered("pending"),
            Failure("a reply within 2 s", "no reply within 2 s (the turn is pending)"),
        ),
        (
            Expect(),
            unanswered("failed", "the model server refused the key"),
            Failure("a reply within 30 s", "the turn failed: the model server refused the key"),
        ),
        (Expect(), unanswered("stopped"), Failure("a reply within 30 s", "the turn was stopped")),
        (Expect(reply=False), unanswered("working"), None),
        (Expect(reply=False), unanswered("stopped"), None),
        (Expect(reply=False), unanswered("failed", "x"), None),
        (Expect(reply=False, within=5), answered("hi"), Failure("no reply within 5 s", "hi")),
    ],
)
def test_check_turn_names_the_first_unmet_expectation(
    expect: Expect, came: Outcome, failure: Failure | None
) -> None:
    assert check_turn(expect, came) == Checked(failure)


def test_first_failure_checks_in_the_files_order() -> None:
    """Text before JSON before timings before what was recorded: the first in that order is
    the one reported."""
    expect = Expect(icontains=("ada",), json=True, max_seconds=1, model="qwen", not_contains=("{",))
    reply = answered('{"x": 1}', seconds=5).reply
    assert reply is not None
    assert first_failure(expect, reply) == Failure("the reply does not contain '{'", '{"x": 1}')
    assert first_failure(Expect(json=True, max_seconds=1, model="q"), reply) == Failure(
        "the whole reply within 1 s", "it took 5.00 s"
    )


TRANSCRIPT = [("user", "hi"), ("assistant", "Hello, Ada.")]


def test_check_turn_asks_the_judge_last_and_passes_with_its_votes() -> None:
    judge = StandInJudge(grades=[True])
    checked = check_turn(
        Expect(contains=("Ada",), judge="Greets by name."),
        answered("Hello, Ada."),
        transcript=TRANSCRIPT,
        judge=as_judge(judge),
    )
    assert checked == Checked(None, (Vote(True, "reply last"),))
    assert judge.asked == [("grade_reply", ("Greets by name.", TRANSCRIPT))]


def test_check_turn_judge_failing_says_why_and_keeps_the_reply() -> None:
    judge = StandInJudge(grades=[False])
    checked = check_turn(
        Expect(judge="Greets by name."),
        answered("Hello."),
        transcript=TRANSCRIPT,
        judge=as_judge(judge),
    )
    assert checked == Checked(
        Failure(
            "the judge passes it (Greets by name.)",
            "the judge failed it: reply last — the reply: Hello.",
        ),
        (Vote(False, "reply last"),),
    )


@pytest.mark.parametrize(
    ("expect", "came"),
    [
        (Expect(contains=("Bob",), judge="Greets by name."), answered("Hello, Ada.")),
        (Expect(max_seconds=1, judge="Greets by name."), answered("Hello, Ada.", seconds=3)),
        (Expect(judge="Greets by name."), unanswered("stopped")),
    ],
)
def test_check_turn_failed_before_the_judge_does_not_ask_it(expect: Expect, came: Outcome) -> None:
    """The judge is the slow, costly check: never asked about a reply already failed."""
    judge = StandInJudge(grades=[True])
    checked = check_turn(expect, came, transcript=TRANSCRIPT, judge=as_judge(judge))
    assert (checked.failure is not None, checked.votes, judge.asked) == (True, (), [])


def test_check_turn_judge_error_is_raised() -> None:
    judge = StandInJudge(grades=[JudgeError("the judge at x answered 500")])
    with pytest.raises(JudgeError, match="answered 500"):
        check_turn(Expect(judge="r"), answered("hi"), transcript=TRANSCRIPT, judge=as_judge(judge))


@pytest.mark.parametrize(
    ("expect", "seconds", "grades", "checked"),
    [
        (ConversationExpect(), [9.0], [], Checked(None)),
        (ConversationExpect(max_turn_seconds=2), [1.0, 2.0], [], Checked(None)),
        (
            ConversationExpect(max_turn_seconds=2),
            [1.0, 2.5, 9.0],
            [],
            Checked(Failure("every reply within 2 s", "turn 2 took 2.50 s")),
        ),
        (
            ConversationExpect(judge="Polite."),
            [1.0],
            [True],
            Checked(None, (Vote(True, "conversation"),)),
        ),
        (
            ConversationExpect(judge="Polite."),
            [1.0],
            [False],
            Checked(
                Failure(
                    "the judge passes the conversation (Polite.)",
                    "the judge failed it: conversation",
                ),
                (Vote(False, "conversation"),),
            ),
        ),
        # A turn too slow: the judge is not asked (its one scripted verdict is left over).
        (
            ConversationExpect(judge="Polite.", max_turn_seconds=1),
            [3.0],
            [True],
            Checked(Failure("every reply within 1 s", "turn 1 took 3.00 s")),
        ),
    ],
)
def test_check_conversation_checks_each_turns_time_then_asks_the_judge(
    expect: ConversationExpect, seconds: list[float], grades: list[bool], checked: Checked
) -> None:
    judge = StandInJudge(grades=grades)
    found = check_conversation(
        expect, transcript=TRANSCRIPT, seconds=seconds, judge=as_judge(judge)
    )
    assert found == checked
    assert len(judge.asked) == (1 if checked.votes else 0)


# --- max_cost -----------------------------------------------------------------------------------

GPT = Price(input=2.5, output=10.0)
# 1,000 tokens in and 200 out at GPT's prices cost $0.0045.
USED = {"usage": {"prompt_tokens": 1000, "completion_tokens": 200}, "model": "gpt-x"}
COST = "a cost of at most $0.005"


@pytest.mark.parametrize(
    ("limit", "came", "price", "failure"),
    [
        (0.005, answered("hi", **USED), GPT, None),
        (0.0045, answered("hi", **USED), GPT, None),
        (
            0.004,
            answered("hi", **USED),
            GPT,
            Failure("a cost of at most $0.004", "it cost $0.0045 (1,000 tokens in, 200 out)"),
        ),
        # A cost that cannot be known is no pass.
        (
            0.005,
            answered("hi", model="gpt-x"),
            GPT,
            Failure(COST, "the cost is unknown: the backend recorded no token usage"),
        ),
        (
            0.005,
            answered("hi", **USED),
            None,
            Failure(
                COST,
                "the cost is unknown: no price for model 'gpt-x' in the suite file's [pricing], "
                "nor for its instance in the business file",
            ),
        ),
    ],
)
def test_check_turn_max_cost_passes_fails_or_is_unknown(
    limit: float, came: Outcome, price: Price | None, failure: Failure | None
) -> None:
    assert check_turn(Expect(max_cost=limit), came, price=price) == Checked(failure)


def test_check_turn_max_cost_is_checked_after_what_was_recorded_before_the_judge() -> None:
    judge = StandInJudge(grades=[True])
    came = answered("hi", **USED)
    expect = Expect(max_cost=0.001, finish_reason="stop", judge="Greets.")
    checked = check_turn(expect, came, price=GPT, judge=as_judge(judge))
    assert checked.failure == Failure(
        "finish_reason 'stop'", "the backend recorded no finish_reason"
    )
    checked = check_turn(
        replace(expect, finish_reason=None), came, price=GPT, judge=as_judge(judge)
    )
    assert checked.failure is not None and checked.failure.expected == "a cost of at most $0.001"
    assert judge.asked == []


@pytest.mark.parametrize(
    ("costs", "failure"),
    [
        ([TurnCost(1000, 200, 0.0045), TurnCost(0, 0, 0.0)], None),
        (
            [TurnCost(1000, 200, 0.0045), TurnCost(1000, 200, 0.0045)],
            Failure("the conversation to cost at most $0.005", "it cost $0.009"),
        ),
        (
            [TurnCost(1000, 200, 0.0045), TurnCost(), TurnCost(5, 5, None, "other")],
            Failure(
                "the conversation to cost at most $0.005",
                "the cost is unknown: 1 turn without usage, 1 without a price, of its 3 turns",
            ),
        ),
    ],
)
def test_check_conversation_max_cost_sums_its_turns_and_an_unknown_one_fails(
    costs: list[TurnCost], failure: Failure | None
) -> None:
    judge = StandInJudge(grades=[True])
    found = check_conversation(
        ConversationExpect(max_cost=0.005, judge="Polite."),
        transcript=TRANSCRIPT,
        seconds=[1.0] * len(costs),
        judge=as_judge(judge),
        spend=Spend.of(costs),
    )
    assert found.failure == failure
    # Over or unknown, the judge is not asked.
    assert len(judge.asked) == (0 if failure else 1)
