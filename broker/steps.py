"""A run's tool calls, each a step of the turn it answers (SPEC §7.2).

A call runs through the broker's own verb as the run that holds the claim (`actions`), so every
rule applies as it does anywhere else and lives in one place. The step is stored in the same
transaction as what the call did: a call is executed at most once per (turn, call id), and a
turn retried after a crash finds its earlier calls stored and is told their results instead of
running them again. What the call did, refused or got wrong is the step's outcome, never an
exception: the model is told and goes on.

A `send_message` to another instance is a consultation (R23): the step stores the question, a
turn of that instance's, and the run waits for its answer (`runner.run`); what the model
is told of the step is then the answer (`model_result`), read from the stored RESULT, so a
retried turn is told it again without asking twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from broker import actions, refusals, replies, tools
from broker.access import access_claim, verb
from broker.actors import Actor, ActorKind
from broker.models import (
    HUMAN,
    OWED,
    TESTER,
    Message,
    MessageClass,
    ReplyState,
    Step,
    StepOutcome,
    ThreadClaim,
    TrailKind,
    TurnProgress,
)
from broker.refusals import Refusal
from broker.tools import BadCall, Toolbox

logger = logging.getLogger("mosaic.runner")


@dataclass(frozen=True)
class ToolCall:
    """A call as the model asked for it: its id, the round (the turn's model request) that
    asked, the tool's name and the arguments' JSON text."""

    call_id: str
    round: int
    name: str
    arguments: str


def _working_turn(claim: ThreadClaim, turn_id: int) -> Message:
    """The claim's thread's turn the run is answering now; else `invalid`."""
    turn = (
        Message.objects.filter(
            pk=turn_id, thread_id=claim.thread_id, progress__state=ReplyState.WORKING
        )
        .select_related("progress")
        .first()
    )
    if turn is None:
        raise Refusal(refusals.INVALID, "No turn of this thread is being answered by that id.")
    return turn


@verb("step.begin", ActorKind.RUN)
def begin_step(actor: Actor, *, claim_id: int, turn_id: int, call: ToolCall) -> Step | None:
    """The run is about to make `call` in its working turn: shown live on the thread's sockets
    (never a record). Returns the step when this call was made already (a retried turn), whose
    result stands; None when it is to be made now."""
    with transaction.atomic():
        claim = access_claim(actor, claim_id=claim_id)
        turn = _working_turn(claim, turn_id)
        done = Step.objects.filter(turn=turn, call_id=call.call_id).first()
        if done is not None:
            return done
        calling = {
            "call_id": call.call_id,
            "round": call.round,
            "tool": call.name,
            "arguments": tools.stored_arguments(call.arguments),
            "started_at": timezone.now().isoformat(),
        }
        TurnProgress.objects.filter(message=turn).update(calling=calling)
        replies.nudge_turn(claim.thread_id, turn.pk)
        return None


@verb("step.call", ActorKind.RUN)
def call_tool(
    actor: Actor, *, claim_id: int, turn_id: int, call: ToolCall, toolbox: Toolbox
) -> Step:
    """Make `call` as the run, through the broker verb its tool names, and store it as a step
    of the working turn with its outcome, in one transaction; a call made already is not made
    again (its step is returned). Refuses only what ends the run (`claim-ended`)."""
    started_at = timezone.now()
    with actions.appending(actor.business_id):
        claim = access_claim(actor, claim_id=claim_id)
        turn = _working_turn(claim, turn_id)
        done = Step.objects.filter(turn=turn, call_id=call.call_id).first()
        if done is not None:
            return done
        progress = turn.progress
        if progress.calling and progress.calling.get("call_id") == call.call_id:
            started_at = datetime.fromisoformat(progress.calling["started_at"])
        outcome, code, result = _outcome(actor, claim=claim, turn=turn, call=call, toolbox=toolbox)
        step = Step.objects.create(
            business_id=actor.business_id,
            thread_id=claim.thread_id,
            turn=turn,
            claim=claim,
            run=actor.run,
            call_id=call.call_id[:100],
            round=call.round,
            tool=call.name[:64],
            arguments=tools.stored_arguments(call.arguments),
            outcome=outcome,
            code=code,
            result=tools.bounded(result),
            started_at=started_at,
            ended_at=timezone.now(),
        )
        TurnProgress.objects.filter(message=turn).update(steps=F("steps") + 1, calling=None)
        actions.do_record_trail(
            actor,
            business_id=actor.business_id,
            thread=claim.thread,
            message=turn,
            to_role=TESTER if claim.thread.owner == TESTER else HUMAN,
            text=summary(step),
            kind=TrailKind.STEP,
        )
        replies.nudge_turn(claim.thread_id, turn.pk)
        return step


def _outcome(
    actor: Actor, *, claim: ThreadClaim, turn: Message, call: ToolCall, toolbox: Toolbox
) -> tuple[StepOutcome, str, dict[str, Any]]:
    """Run the call's verb in a savepoint (a refusal stores nothing of it): the outcome, its
    code, and the result the model is told."""
    try:
        tool, arguments = tools.checked_arguments(toolbox, call.name, call.arguments)
    except BadCall as bad:
        return StepOutcome.ERROR, bad.code, {"error": bad.code, "detail": bad.detail}
    try:
        with transaction.atomic():
            result = _run(actor, claim=claim, turn=turn, tool=tool.name, arguments=arguments)
    except Refusal as refusal:
        if refusal.code == refusals.CLAIM_ENDED:
            raise
        return StepOutcome.REFUSED, refusal.code, {"error": refusal.code, "detail": refusal.detail}
    return StepOutcome.OK, "", result


def _run(
    actor: Actor, *, claim: ThreadClaim, turn: Message, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    """The broker verb behind `tool`, called as the run with the claim it holds."""
    if tool == tools.CREATE_TASK:
        task = actions.create_task(
            actor, claim_id=claim.pk, request_id=turn.request_id, title=arguments["title"]
        )
        return {"task": task.pk, "title": task.title}
    if tool == tools.SEND_MESSAGE and arguments["to"] not in (HUMAN, TESTER):
        question = actions.consult(
            actor, claim_id=claim.pk, turn_id=turn.pk, to=arguments["to"], body=arguments["body"]
        )
        return {"message": question.pk, "to": question.to_role}
    if tool == tools.SEND_MESSAGE:
        message = actions.send_message(
            actor, to=arguments["to"], body=arguments["body"], claim_id=claim.pk
        )
        return {"message": message.pk, "to": message.to_role}
    if tool == tools.ASK_HUMAN:
        decision = actions.create_decision(actor, claim_id=claim.pk, body=arguments["question"])
        return {"decision": decision.pk}
    raise BadCall(tools.UNKNOWN_TOOL, f"There is no tool named {tool!r}.")


def summary(step: Step) -> str:
    """The step on one line, for the trail and admin: `create_task(title="…") ok: task #12`."""
    shown = json.dumps(step.arguments, ensure_ascii=False)
    if len(shown) > 120:
        shown = shown[:119] + "…"
    result = step.result if isinstance(step.result, dict) else {}
    if step.outcome == StepOutcome.OK:
        what = ", ".join(f"{key} {value}" for key, value in result.items())
    else:
        what = f"{step.code}: {result.get('detail', '')}"
    return f"{step.tool} {shown} {step.outcome}, {what}"


@dataclass(frozen=True)
class Consultation:
    """Where the turn a consultation (R23) put to another instance stands: its reply state,
    and the answer once it came or the sentence saying why none will."""

    turn_id: int
    state: ReplyState
    answer: str | None = None
    failure: str = ""

    @property
    def waiting(self) -> bool:
        return self.state in OWED


def consulted_turn(step: Step) -> int | None:
    """The turn a `send_message` step put to another instance (R23), or None for any other."""
    result = step.result if isinstance(step.result, dict) else {}
    if step.tool != tools.SEND_MESSAGE or step.outcome != StepOutcome.OK:
        return None
    if result.get("to") in (HUMAN, TESTER) or not isinstance(result.get("message"), int):
        return None
    return int(result["message"])


def consultation(turn_id: int) -> Consultation:
    """The consulted turn's state and answer: one query. Reads for the run that asked."""
    return consultations([turn_id])[turn_id]


def consultations(turn_ids: Iterable[int]) -> dict[int, Consultation]:
    """`consultation` of each of the turns, by id, in one query."""
    turns = (
        Message.objects.filter(pk__in=list(turn_ids))
        .select_related("progress")
        .annotate(
            answer=Subquery(
                Message.objects.filter(
                    in_reply_to=OuterRef("pk"), message_class=MessageClass.RESULT
                ).values("body")[:1]
            )
        )
    )
    found = {}
    for turn in turns:
        progress = turn.progress_or_none
        found[turn.pk] = Consultation(
            turn_id=turn.pk,
            state=ReplyState(progress.state if progress is not None else ReplyState.PENDING),
            answer=turn.answer,
            failure=progress.failure if progress is not None else "",
        )
    return found


def model_result(step: Step, consulted: Consultation | None = None) -> str:
    """What the model is told of a step: its outcome and result, as JSON text; for a
    consultation, the answer too, or why there is none."""
    told: dict[str, Any] = {"outcome": step.outcome, **step.result}
    if consulted is not None and consulted.answer is not None:
        told["answer"] = consulted.answer
    elif consulted is not None:
        told["answer_state"] = str(consulted.state)
        if consulted.failure:
            told["failure"] = consulted.failure
    return json.dumps(told, ensure_ascii=False)
