"""R24 on the command line: `thread edit`, `thread regenerate` and `thread branch`."""

from __future__ import annotations

import json

from broker import actions, refusals
from broker.actors import Actor
from broker.models import Message, Thread, Via
from tests.broker import factories
from tests.chat.test_cli import human_thread, product, refused, run, tester_thread

__all__ = ["human_thread", "product", "tester_thread"]


def answered(actor: Actor, run_actor: Actor, thread: Thread, body: str) -> Message:
    turn = actions.send_to_thread(actor, thread_id=thread.pk, body=body).message
    factories.reply(run_actor, turn, body=f"re: {body}")
    return turn


def test_thread_edit_makes_a_version_in_place_and_prints_it(
    human: Actor, assistant_run: Actor, human_thread: Thread
) -> None:
    turn = answered(human, assistant_run, human_thread, "one")
    lines = run("thread", "edit", str(human_thread.pk), str(turn.pk), "--body", "uno")
    version = Message.objects.get(version_of=turn)
    assert lines.splitlines() == [
        f"#{human_thread.pk} human work (project product, assistant, owner ada)",
        f"#{version.pk} human → assistant: uno",
    ]
    assert version.via == Via.CLI


def test_thread_regenerate_tester_json_names_the_branch(
    tester: Actor, assistant_run: Actor, tester_thread: Thread
) -> None:
    """With --json, the API's shape: the new turn, no request for the tester (R7), its thread."""
    one = answered(tester, assistant_run, tester_thread, "one")
    answered(tester, assistant_run, tester_thread, "two")
    out = json.loads(
        run("thread", "regenerate", str(tester_thread.pk), str(one.pk), "--tester", "--json")
    )
    assert (out["request"], out["message"]["body"], out["message"]["from_role"]) == (
        None,
        "one",
        "tester",
    )
    assert out["thread"]["branched_from"] == {
        "thread": tester_thread.pk,
        "name": "tester check",
        "message": None,
    }


def test_thread_branch_names_it_and_refuses_the_other_side(
    human: Actor, assistant_run: Actor, human_thread: Thread
) -> None:
    turn = answered(human, assistant_run, human_thread, "one")
    out = json.loads(
        run("thread", "branch", str(human_thread.pk), str(turn.pk), "--name", "side", "--json")
    )
    assert (out["thread"]["name"], out["thread"]["branched_from"]["message"]) == (
        "side",
        turn.pk,
    )
    assert refused("thread", "branch", str(human_thread.pk), str(turn.pk), "--tester") == (
        2,
        refusals.THREAD_NOT_OWNED,
    )


def test_thread_edit_while_the_reply_is_owed_refuses_turn_in_progress(
    human: Actor, human_thread: Thread
) -> None:
    turn = actions.send_to_thread(human, thread_id=human_thread.pk, body="one").message
    code = refused("thread", "edit", str(human_thread.pk), str(turn.pk), "--body", "x")
    assert code[1] == refusals.TURN_IN_PROGRESS
