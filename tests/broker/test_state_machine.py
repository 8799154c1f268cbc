"""The broker driven by random programs: the human, the tester, another business's human,
assistant runs, staff and the system calling verbs in any order (a Hypothesis state machine).

Refusals are legitimate outcomes; where the answer is plain from the state (R1's owner check,
R13's stop, R22's verb list, the tester switch) the rule predicts it and the broker must agree.
After every step the machine checks:

- R20/R3/R12: the tester never reads a row of the human's — every list, messages view,
  receive, trail and thread read it makes holds only its own rows (and the human's lists never
  hold the tester's threads; nobody reads across businesses);
- SPEC §3/§7: no thread has two open claims, no message has two RESULT replies;
- SPEC §3: nothing append-only changed — every ThreadOpen, Message, Event, TrailRow and
  Decision row seen before is still there, unchanged, and new rows only have greater ids; an
  ended claim never changes again, and a thread's owner never does (R1);
- R11/R15/R17/R19: no notice or decision in a tester thread, no task from a tester's turn.

Each program runs inside a transaction rolled back at its end, so programs start from the same
two businesses, on SQLite and PostgreSQL alike. Size: `MOSAIC_FUZZ_PROGRAMS` programs of up to
`MOSAIC_FUZZ_STEPS` steps (bounded in the suite; `make fuzz` runs more, and shrinks a failing
program with `MOSAIC_FUZZ_SHRINK=1`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

import pytest
from django.db import transaction
from django.db.models import Count, Model
from django.utils import timezone
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from broker import actions, refusals, selectors
from broker.actors import Actor, ActorKind
from broker.models import (
    Business,
    Decision,
    Event,
    EventKind,
    Message,
    MessageClass,
    Project,
    Task,
    Thread,
    ThreadClaim,
    ThreadOpen,
    TrailRow,
)
from broker.refusals import Refusal
from tests.support.businesses import make_business

PROGRAMS = int(os.environ.get("MOSAIC_FUZZ_PROGRAMS", "20"))
STEPS = int(os.environ.get("MOSAIC_FUZZ_STEPS", "30"))
# Shrinking a failing program re-runs it against the database many times (up to Hypothesis's
# five-minute cap); the suite reports the program as found, `make fuzz` shrinks it.
PHASES = [Phase.explicit, Phase.reuse, Phase.generate]
if os.environ.get("MOSAIC_FUZZ_SHRINK") == "1":
    PHASES.append(Phase.shrink)

T = TypeVar("T")

APPEND_ONLY: tuple[type[Model], ...] = (ThreadOpen, Message, Event, TrailRow, Decision)
NAMES = ("plan", "probe", "notes")
BODIES = ("hello", "task: ship it", "summary", "?")
# Any refusal the broker may give; `attempt` records which.
ANY = object()

# What the programs did, summed over the run (printed by the test).
TALLY: Counter[str] = Counter()


def owner_of(actor: Actor) -> str:
    """R2, written out independently of `broker.policy.owner`."""
    return "tester" if actor.is_tester else actor.username


class BrokerMachine(RuleBasedStateMachine):
    # Set by the test: the two businesses every program starts from.
    business_id: ClassVar[int]
    other_business_id: ClassVar[int]

    def __init__(self) -> None:
        super().__init__()
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        a, b = self.business_id, self.other_business_id
        self.human = Actor.human(business_id=a, username="ada")
        self.tester = Actor.tester(business_id=a)
        self.other_human = Actor.human(business_id=b, username="grace")
        self.staff = Actor.staff(business_id=a, username="staff")
        self.system = Actor.system(business_id=a)
        self.runs = {
            name: Actor.assistant_run(business_id=a, instance="assistant", run=name)
            for name in ("run-1", "run-2")
        }
        self.runs["run-b"] = Actor.assistant_run(business_id=b, instance="assistant", run="run-b")
        self.people = {"human": self.human, "tester": self.tester, "other_human": self.other_human}
        # Every program starts with a project in each business and a thread of each owner, each
        # with a turn waiting: the steps go to the verbs, not to finding something to act on.
        product = actions.create_project(self.human, name="product")
        elsewhere = actions.create_project(self.other_human, name="product")
        for actor, project in (
            (self.human, product),
            (self.tester, product),
            (self.other_human, elsewhere),
        ):
            thread = actions.create_thread(actor, project_id=project.pk, name=owner_of(actor))
            actions.send_to_thread(actor, thread_id=thread.pk, body="hello")
        self.seen: dict[type[Model], dict[int, dict[str, Any]]] = {}
        self.ended_claims: dict[int, tuple[Any, ...]] = {}
        self.owners: dict[int, str] = {}
        self.snapshot()
        TALLY["programs"] += 1

    def teardown(self) -> None:
        transaction.set_rollback(True)
        self._atomic.__exit__(None, None, None)

    # --- helpers -------------------------------------------------------------------------

    def attempt(self, verb: str, expected: object, call: Callable[[], T]) -> T | None:
        """Call a verb; a refusal is an outcome. `expected`: the refusal code the state
        predicts, None for success, ANY when the rule does not predict."""
        TALLY["steps"] += 1
        try:
            result = call()
        except Refusal as refusal:
            TALLY[f"{verb} refused {refusal.code}"] += 1
            if expected is not ANY:
                assert refusal.code == expected, (verb, refusal.code, expected)
            return None
        TALLY[f"{verb} ok"] += 1
        if expected is not ANY:
            assert expected is None, (verb, "succeeded", expected)
        return result

    def tester_on(self) -> bool:
        return Business.objects.filter(pk=self.business_id, tester_enabled=True).exists()

    def off_code(self, actor: Actor) -> str | None:
        """The tester switch comes first for every tester verb."""
        return refusals.TESTER_OFF if actor.is_tester and not self.tester_on() else None

    def thread_code(self, actor: Actor, thread_id: int) -> str | None:
        """R1 as the state predicts it: not-found across businesses, thread-not-owned within."""
        if (code := self.off_code(actor)) is not None:
            return code
        thread = Thread.objects.filter(pk=thread_id, project__business_id=actor.business_id)
        found = thread.first()
        if found is None:
            return refusals.NOT_FOUND
        if found.owner != owner_of(actor):
            return refusals.THREAD_NOT_OWNED
        return None

    def any_thread_id(self, data: st.DataObject, actor: Actor | None = None) -> int:
        """Mostly one of the actor's own threads, then any of its business, then any thread
        or a missing id (the simplest choices come first, as Hypothesis prefers them)."""
        threads = Thread.objects.order_by("pk")
        ids = list(threads.values_list("pk", flat=True))
        choices = []
        if actor is not None:
            near = threads.filter(project__business_id=actor.business_id)
            if actor.kind in (ActorKind.HUMAN, ActorKind.TESTER):
                choices.append(
                    list(near.filter(owner=owner_of(actor)).values_list("pk", flat=True))
                )
            choices.append(list(near.values_list("pk", flat=True)))
        choices.append([*ids, max(ids) + 1])
        return data.draw(st.one_of(*(st.sampled_from(c) for c in choices if c)), label="thread")

    def any_project_id(self, data: st.DataObject, business_id: int) -> int:
        ids = list(Project.objects.order_by("pk").values_list("pk", flat=True))
        near = list(
            Project.objects.filter(business_id=business_id)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        anywhere = st.sampled_from([*ids, max(ids) + 1])
        return data.draw(st.sampled_from(near) | anywhere if near else anywhere, label="project")

    def person(self, data: st.DataObject) -> Actor:
        return self.people[data.draw(st.sampled_from(sorted(self.people)), label="actor")]

    def run_actor(self, data: st.DataObject) -> Actor:
        return self.runs[data.draw(st.sampled_from(sorted(self.runs)), label="run")]

    def claim_of(self, run: Actor, data: st.DataObject) -> int | None:
        """Mostly one of the run's open claims; sometimes one that ended (claim-ended). A run
        holding nothing takes up a thread first."""
        claims = ThreadClaim.objects.filter(run=run.run).order_by("pk")
        held = list(claims.filter(ended_at__isnull=True).values_list("pk", flat=True))
        if not held:
            claim = self.claim_a_thread(run, data)
            held = [claim.pk] if claim else []
        ids = list(claims.values_list("pk", flat=True))
        if not ids:
            return None
        choice = st.sampled_from(held) | st.sampled_from(ids) if held else st.sampled_from(ids)
        return data.draw(choice, label="claim")

    def unanswered(self) -> Any:
        """Turns and messages with no RESULT in reply yet."""
        answered = Message.objects.filter(message_class=MessageClass.RESULT).values("in_reply_to")
        return Message.objects.exclude(pk__in=answered).order_by("pk")

    # --- projects and threads ------------------------------------------------------------

    def create_project(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(NAMES), label="name")
        actor = self.person(data)
        expected = self.off_code(actor)
        if (
            expected is None
            and Project.objects.filter(business_id=actor.business_id, name=name).exists()
        ):
            expected = refusals.PROJECT_EXISTS
        self.attempt("project.create", expected, lambda: actions.create_project(actor, name=name))

    def create_thread(self, data: st.DataObject) -> None:
        """R2 (owner is owner(actor), in any project of the business), R18 (thread-exists)."""
        name = data.draw(st.sampled_from(NAMES), label="name")
        actor = self.person(data)
        project_id = self.any_project_id(data, actor.business_id)
        expected = self.off_code(actor)
        if expected is None:
            project = Project.objects.filter(pk=project_id, business_id=actor.business_id)
            if not project.exists():
                expected = refusals.NOT_FOUND
            elif Thread.objects.filter(project_id=project_id, name=name).exists():
                expected = refusals.THREAD_EXISTS
        thread = self.attempt(
            "thread.create",
            expected,
            lambda: actions.create_thread(actor, project_id=project_id, name=name),
        )
        if thread is not None:
            assert thread.owner == owner_of(actor)

    @rule(data=st.data(), verb=st.sampled_from(["send", "open", "messages"]))
    def person_acts_in_a_thread(self, data: st.DataObject, verb: str) -> None:
        """R1: only the owner sends, opens and reads a thread; not-found across businesses.
        R2: an open is stored `by = owner(actor)`. R6, R7: a turn is stored as the actor's own
        role and run, with a `human.input` for the human only."""
        actor = self.person(data)
        thread_id = self.any_thread_id(data, actor)
        expected = self.thread_code(actor, thread_id)
        if verb == "open":
            opened = self.attempt(
                "thread.open", expected, lambda: actions.open_thread(actor, thread_id=thread_id)
            )
            assert opened is None or opened.by == owner_of(actor)
        elif verb == "messages":
            self.attempt(
                "thread.messages",
                expected,
                lambda: selectors.thread_messages(actor, thread_id=thread_id),
            )
        else:
            body = data.draw(st.sampled_from(BODIES), label="body")
            turn = self.attempt(
                "thread.send",
                expected,
                lambda: actions.send_to_thread(actor, thread_id=thread_id, body=body),
            )
            if turn is not None:
                stored = (turn.message.from_role, turn.message.from_run)
                assert stored == (actor.role, actor.run)
                assert (turn.request is None) == actor.is_tester

    def send_message_outside_threads(self, data: st.DataObject) -> None:
        """R9, R10: outside a thread the tester is never read as the human."""
        to = data.draw(st.sampled_from(["assistant", "human", "tester"]), label="to")
        actor = self.person(data)
        expected = self.off_code(actor)
        if expected is None and actor.is_tester and to == "assistant":
            expected = refusals.MESSAGE_SENDER_REFUSED
        if expected is None and to == "tester":
            expected = refusals.TESTER_REPLY_REQUIRED
        self.attempt(
            "message.send",
            ANY if expected is None else expected,
            lambda: actions.send_message(actor, to=to, body="outside"),
        )

    def tester_calls_a_verb_not_its_own(self, data: st.DataObject) -> None:
        """R22: any verb outside the tester's list refuses `tester-refused`."""
        thread_id = self.any_thread_id(data)
        calls: dict[str, Callable[[], object]] = {
            "claim.open": lambda: actions.open_claim(self.tester, thread_id=thread_id),
            "claim.reap": lambda: actions.reap_claims(self.tester),
            "instance.end": lambda: actions.end_instance(self.tester, instance="assistant"),
            "notice.post": lambda: actions.post_notice(self.tester, body="x"),
            "inbox.read": lambda: selectors.read_inbox(self.tester),
        }
        name = data.draw(st.sampled_from(sorted(calls)), label="verb")
        self.attempt(name, refusals.TESTER_REFUSED, calls[name])

    def switch_the_tester(self, data: st.DataObject) -> None:
        """The tester switch: while off, every tester verb refuses `tester-off`."""
        TALLY["steps"] += 1
        business = Business.objects.get(pk=self.business_id)
        business.tester_enabled = not business.tester_enabled
        business.save(update_fields=["tester_enabled"])

    # --- stop, runs, claims --------------------------------------------------------------

    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        """R13: a stop ends exactly the open claims on the caller's own threads."""
        actor = self.person(data)
        mine = set(
            ThreadClaim.objects.filter(
                ended_at__isnull=True,
                thread__owner=owner_of(actor),
                thread__project__business_id=actor.business_id,
            ).values_list("pk", flat=True)
        )
        others = (
            set(ThreadClaim.objects.filter(ended_at__isnull=True).values_list("pk", flat=True))
            - mine
        )
        owed = owed_turns_of(owner_of(actor), actor.business_id)
        others_owed = owed_turns_of(None, actor.business_id) - owed
        expected = self.off_code(actor) or (None if mine or owed else refusals.NOT_HELD)
        stop = self.attempt("assistant.stop", expected, lambda: actions.stop_assistant(actor))
        if stop is not None:
            assert {claim.pk for claim in stop.claims} == mine
            assert {claim.ended_by for claim in stop.claims} <= {owner_of(actor)}
            # SPEC §7.1: every turn of the caller's still owed a reply is stopped, no other.
            assert {turn for turn, _ in stop.turns} == owed
            assert owed_turns_of(owner_of(actor), actor.business_id) == set()
        assert owed_turns_of(None, actor.business_id) >= others_owed
        still_open = set(
            ThreadClaim.objects.filter(ended_at__isnull=True).values_list("pk", flat=True)
        )
        assert others <= still_open, "a stop ended a claim that was not the caller's"

    def run_claims_a_thread(self, data: st.DataObject) -> None:
        self.claim_a_thread(self.run_actor(data), data)

    def claim_a_thread(self, run: Actor, data: st.DataObject) -> ThreadClaim | None:
        """As a runner does: mostly a thread with a turn waiting, sometimes any thread."""
        waiting = list(
            self.unanswered()
            .filter(thread__isnull=False, message_class=MessageClass.REQUEST)
            .values_list("thread_id", flat=True)
        )
        if waiting and data.draw(st.sampled_from(["waiting", "any"]), label="which") == "waiting":
            thread_id = data.draw(st.sampled_from(sorted(set(waiting))), label="thread")
        else:
            thread_id = self.any_thread_id(data, run)
        return self.attempt("claim.open", ANY, lambda: actions.open_claim(run, thread_id=thread_id))

    def run_replies(self, data: st.DataObject) -> None:
        """R10, R12: a run answers a turn in the thread it holds, to its sender. Mostly a turn
        still owed a reply (the run takes up its thread first, as a runner does); sometimes
        one answered already (a second reply is refused) or any message at all."""
        run = self.run_actor(data)
        mine = Message.objects.filter(business_id=run.business_id, thread__isnull=False)
        fields = ("pk", "thread_id", "from_role")
        owed = list(
            self.unanswered()
            .filter(pk__in=mine.filter(message_class=MessageClass.REQUEST).values("pk"))
            .values_list(*fields)
        )
        done = list(
            mine.filter(replies__message_class=MessageClass.RESULT)
            .order_by("-pk")
            .values_list(*fields)[:3]
        )
        anything = list(Message.objects.order_by("-pk").values_list(*fields)[:3])
        pools = [st.sampled_from(pool) for pool in (owed, done, anything) if pool]
        if not pools:
            return
        message_id, thread_id, sender = data.draw(st.one_of(*pools), label="message")
        held = ThreadClaim.objects.filter(run=run.run, thread_id=thread_id, ended_at__isnull=True)
        claim = held.first() or self.attempt(
            "claim.open", ANY, lambda: actions.open_claim(run, thread_id=thread_id)
        )
        claim_id = claim.pk if claim else self.claim_of(run, data)
        if claim_id is None:
            return
        reply = self.attempt(
            "message.send RESULT",
            ANY,
            lambda: actions.send_message(
                run,
                to=sender,
                body="answer",
                message_class=MessageClass.RESULT,
                in_reply_to=message_id,
                claim_id=claim_id,
            ),
        )
        if reply is not None:
            claimed = ThreadClaim.objects.get(pk=claim_id)
            assert reply.thread_id == thread_id == claimed.thread_id
            assert reply.to_role == sender

    def run_messages_the_human(self, data: st.DataObject) -> None:
        """R11: a run of a tester thread never sends to `human`; of a human thread it may."""
        run = self.run_actor(data)
        claim_id = self.claim_of(run, data)
        if claim_id is None:
            return
        sent = self.attempt(
            "message.send to human",
            ANY,
            lambda: actions.send_message(run, to="human", body="fyi", claim_id=claim_id),
        )
        if sent is not None:
            assert Thread.objects.get(pk=sent.thread_id).owner != "tester"

    def run_routes_a_decision(self, data: st.DataObject) -> None:
        """R19 with R11: a tester thread's run never reaches the human's inbox."""
        run = self.run_actor(data)
        claim_id = self.claim_of(run, data)
        if claim_id is None:
            return
        self.attempt(
            "decision.create",
            ANY,
            lambda: actions.create_decision(run, claim_id=claim_id, body="decide"),
        )

    def run_creates_a_task(self, data: st.DataObject) -> None:
        """R15: a task cites a human's request; a tester's turn has none to cite."""
        run = self.run_actor(data)
        claim_id = self.claim_of(run, data)
        if claim_id is None:
            return
        thread = ThreadClaim.objects.values_list("thread_id", flat=True).get(pk=claim_id)
        inputs = Event.objects.filter(kind=EventKind.HUMAN_INPUT, body__thread=thread)
        events = [
            *inputs.order_by("-pk").values_list("pk", flat=True)[:2],
            *Event.objects.order_by("-pk").values_list("pk", flat=True)[:1],
        ]
        if not events:
            return
        request_id = data.draw(st.sampled_from(events), label="request")
        self.attempt(
            "task.create",
            ANY,
            lambda: actions.create_task(run, claim_id=claim_id, request_id=request_id, title="t"),
        )

    def run_renews_or_ends(self, data: st.DataObject) -> None:
        run = self.run_actor(data)
        claim_id = self.claim_of(run, data)
        if claim_id is None:
            return
        if data.draw(st.booleans(), label="renew"):
            self.attempt("claim.renew", ANY, lambda: actions.renew_claim(run, claim_id=claim_id))
        else:
            self.attempt("claim.end", ANY, lambda: actions.end_claim(run, claim_id=claim_id))

    @rule(data=st.data())
    def person_creates(self, data: st.DataObject) -> None:
        """A project or a thread (R2, R18)."""
        if data.draw(st.booleans(), label="project"):
            self.create_project(data)
        else:
            self.create_thread(data)

    @rule(data=st.data())
    def person_tries_the_edges(self, data: st.DataObject) -> None:
        """A message outside the threads (R9, R10), or a verb the tester may not call (R22)."""
        if data.draw(st.booleans(), label="verb"):
            self.tester_calls_a_verb_not_its_own(data)
        else:
            self.send_message_outside_threads(data)

    @rule(data=st.data())
    def a_run_works(self, data: st.DataObject) -> None:
        """One thing an assistant run does; answering comes first, as for a runner."""
        work = {
            "reply": self.run_replies,
            "claim": self.run_claims_a_thread,
            "message the human": self.run_messages_the_human,
            "decision": self.run_routes_a_decision,
            "task": self.run_creates_a_task,
            "renew or end": self.run_renews_or_ends,
        }
        work[data.draw(st.sampled_from(list(work)), label="work")](data)

    def a_lease_runs_out(self, data: st.DataObject) -> None:
        """A runner dies: its claim's lease is in the past (what time passing would do)."""
        TALLY["steps"] += 1
        ids = sorted(ThreadClaim.objects.filter(ended_at__isnull=True).values_list("pk", flat=True))
        if not ids:
            return
        claim_id = data.draw(st.sampled_from(ids), label="claim")
        ThreadClaim.objects.filter(pk=claim_id).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )

    def system_reaps(self, data: st.DataObject) -> None:
        """SPEC §7: every open claim whose lease ran out ends `lease-expired`, by the system."""
        expired = set(
            ThreadClaim.objects.filter(
                ended_at__isnull=True,
                lease_expires_at__lte=timezone.now(),
                thread__project__business_id=self.business_id,
            ).values_list("pk", flat=True)
        )
        ended = self.attempt("claim.reap", None, lambda: actions.reap_claims(self.system)) or []
        assert expired <= {claim.pk for claim in ended}
        assert {(c.ended_by, c.end_reason) for c in ended} <= {("system", "lease-expired")}

    def staff_ends_the_instance(self, data: st.DataObject) -> None:
        """R14: every claim of the instance ends, the tester's threads included."""
        self.attempt(
            "instance.end", None, lambda: actions.end_instance(self.staff, instance="assistant")
        )
        assert not ThreadClaim.objects.filter(
            ended_at__isnull=True, instance__business_id=self.business_id
        ).exists()

    def system_posts_a_notice(self, data: st.DataObject) -> None:
        """R17: notices go to the human's threads only (a tester thread is not found)."""
        thread_id = None if data.draw(st.booleans(), label="latest") else self.any_thread_id(data)
        self.attempt(
            "notice.post",
            ANY,
            lambda: actions.post_notice(self.system, body="notice", thread_id=thread_id),
        )

    @rule(data=st.data())
    def the_world_moves(self, data: st.DataObject) -> None:
        """What happens around the actors: time, the reaper, staff, notices, the switch."""
        events = {
            "lease runs out": self.a_lease_runs_out,
            "reap": self.system_reaps,
            "instance end": self.staff_ends_the_instance,
            "notice": self.system_posts_a_notice,
            "tester switch": self.switch_the_tester,
        }
        events[data.draw(st.sampled_from(sorted(events)), label="event")](data)

    # --- invariants ----------------------------------------------------------------------

    @invariant()
    def the_tester_reads_nothing_of_the_humans(self) -> None:
        """R20, R12, R3: every read the tester can make holds only its own rows."""
        if self.tester_on():
            self.check_reads(self.tester)
        else:
            with pytest.raises(Refusal) as off:
                selectors.read_trail(self.tester)
            assert off.value.code == refusals.TESTER_OFF

    @rule(data=st.data())
    def someone_reads_everything(self, data: st.DataObject) -> None:
        """R3, R12, R20: the human's lists never hold the tester's threads or messages, and
        nobody reads another business's rows (the tester is checked after every step)."""
        actor = self.person(data)
        TALLY["steps"] += 1
        if self.off_code(actor) is None:
            self.check_reads(actor)

    def check_reads(self, actor: Actor) -> None:
        mine = owner_of(actor)
        business = actor.business_id
        threads = selectors.list_threads(actor, limit=500)
        assert all(t.owner == mine and t.project.business_id == business for t in threads)
        own_threads = set(
            Thread.objects.filter(owner=mine, project__business_id=business).values_list(
                "pk", flat=True
            )
        )
        assert {t.pk for t in threads} == own_threads, "R3: the list is exactly my threads"
        view = selectors.messages_view(actor, limit=500)
        received = selectors.receive_messages(actor, limit=500)
        for message in [*view.rows, *received]:
            assert (message.business_id, message.to_role) == (business, actor.role)
            assert message.thread_id is None or message.thread_id in own_threads
        for thread_id in own_threads:
            for message in selectors.thread_messages(actor, thread_id=thread_id, limit=500):
                assert message.thread_id == thread_id
        owners = dict(Thread.objects.values_list("pk", "owner"))
        for row in selectors.read_trail(actor, limit=500):
            assert row.business_id == business
            if actor.is_tester:
                owner = owners.get(row.thread_id)
                assert owner == "tester" or (
                    owner is None and "tester" in (row.from_role, row.to_role)
                ), ("R20: the tester read a row of the human's", row.pk, row.text)

    @invariant()
    def one_open_claim_per_thread_instance(self) -> None:
        doubled = (
            ThreadClaim.objects.filter(ended_at__isnull=True)
            .values("thread", "instance")
            .annotate(n=Count("pk"))
            .filter(n__gt=1)
        )
        assert not doubled.exists()

    @invariant()
    def one_reply_per_message(self) -> None:
        doubled = (
            Message.objects.filter(message_class=MessageClass.RESULT)
            .values("in_reply_to")
            .annotate(n=Count("pk"))
            .filter(n__gt=1)
        )
        assert not doubled.exists()

    @invariant()
    def nothing_for_the_human_from_a_tester_thread(self) -> None:
        """R11, R15, R17, R19."""
        assert not Message.objects.filter(
            thread__owner="tester", message_class=MessageClass.NOTICE
        ).exists()
        assert not Message.objects.filter(thread__owner="tester", to_role="human").exists()
        assert not Decision.objects.filter(thread__owner="tester").exists()
        for kind, body in Task.objects.values_list("request__kind", "request__body"):
            assert kind == EventKind.HUMAN_INPUT
            assert Thread.objects.get(pk=body["thread"]).owner != "tester"

    @invariant()
    def append_only_rows_never_change(self) -> None:
        self.snapshot()

    def snapshot(self) -> None:
        for model in APPEND_ONLY:
            rows = {row["id"]: row for row in model._default_manager.order_by("pk").values()}
            before = self.seen.get(model, {})
            for pk, row in before.items():
                assert rows.get(pk) == row, (model.__name__, pk, "changed or vanished")
            new = set(rows) - set(before)
            if before and new:
                assert min(new) > max(before), (model.__name__, "ids only grow")
            self.seen[model] = rows
        for pk, *ended in ThreadClaim.objects.filter(ended_at__isnull=False).values_list(
            "pk", "ended_at", "ended_by", "end_reason", "lease_expires_at"
        ):
            assert self.ended_claims.setdefault(pk, tuple(ended)) == tuple(ended), pk
        for pk, owner in Thread.objects.values_list("pk", "owner"):
            assert self.owners.setdefault(pk, owner) == owner, ("R1: an owner changed", pk)


def owed_turns_of(owner: str | None, business_id: int) -> set[int]:
    """Turns (of `owner`'s threads; None: anyone's) with no final reply state (SPEC §7.1)."""
    turns = Message.objects.filter(
        business_id=business_id, message_class="REQUEST", thread__isnull=False
    ).exclude(progress__state__in=["answered", "stopped", "failed"])
    if owner is not None:
        turns = turns.filter(thread__owner=owner)
    return set(turns.values_list("pk", flat=True))


@pytest.fixture
def machine(db: None) -> type[BrokerMachine]:
    """The two businesses every program starts from; the assistant may route decisions to the
    human (cross_role), so R11 is what keeps a tester thread's run out of the inbox."""
    business = make_business("acme", human="ada", cross_role=("human",))
    other = make_business("other", human="grace")

    class Machine(BrokerMachine):
        business_id = business.pk
        other_business_id = other.pk

    return Machine


def test_broker_verbs_in_random_order_keep_every_invariant(
    machine: type[BrokerMachine], capsys: pytest.CaptureFixture[str]
) -> None:
    """R1, R3, R11–R15, R17, R19, R20, R22, SPEC §3 and §7 under random programs."""
    TALLY.clear()
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=PROGRAMS,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            phases=PHASES,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    outcomes = sorted((n, k) for k, n in TALLY.items() if k not in ("programs", "steps"))
    with capsys.disabled():
        print(
            f"\nbroker state machine: {TALLY['programs']} programs, {TALLY['steps']} steps; "
            + ", ".join(f"{k} {n}" for n, k in reversed(outcomes))
        )
    assert TALLY["steps"] >= PROGRAMS
