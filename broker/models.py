"""The bus's records. The database carries the invariants (SPEC §3).

Message, Event, ThreadOpen, TrailRow, Decision and Step are append-only: triggers installed by
migration 0002 refuse UPDATE and DELETE (and TRUNCATE on PostgreSQL), so no code path — ORM,
bulk or raw SQL — can rewrite the record. Threads and tasks change but are never deleted
(migration 0016), a tester's thread but by the purge. A Task's request must be a `human.input`
event (R15), refused by the database too.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from broker import fields, suite_fields

# Addresses on the bus that are never an instance's name.
HUMAN = "human"
TESTER = "tester"
RESERVED_ADDRESSES = (HUMAN, TESTER)


class Creator(models.TextChoices):
    """Which side created a project: both sides see every project, and the human's list says
    which ones the tester made (a `created_by` of `tester`), so tester projects never pass as
    the human's own."""

    HUMAN = HUMAN
    TESTER = TESTER


class EventKind(models.TextChoices):
    HUMAN_INPUT = "human.input"
    TASK_CREATED = "task.created"
    CLAIM_OPENED = "claim.opened"
    CLAIM_ENDED = "claim.ended"
    INSTANCE_ENDED = "instance.ended"
    DECISION_CREATED = "decision.created"


class ClaimEnd(models.TextChoices):
    """How a claim ended: what other code decides on. `end_reason` is the sentence for people."""

    DONE = "done"  # the run released it, nothing left to answer
    STOPPED = "stopped"  # assistant.stop (R13)
    INSTANCE_ENDED = "instance-ended"  # instance.end (R14)
    LEASE_EXPIRED = "lease-expired"  # the run stopped renewing (SPEC §7)
    FAILED = "failed"  # the backend failed or the reply was refused; retried after a back-off
    SHUT_DOWN = "shut-down"  # the runner is stopping; the rest stays pending


class ReplyState(models.TextChoices):
    """How the reply to a turn is going (SPEC §7.1): `reply_state` in the message shape."""

    PENDING = "pending"  # waiting for a run
    WORKING = "working"  # a run holds it and is writing
    ANSWERED = "answered"  # its RESULT exists
    STOPPED = "stopped"  # a stop ended it; no reply will ever land
    RETRYING = "retrying"  # the last attempt failed transiently; `retry_at` says when next
    FAILED = "failed"  # given up; `failure` says why


# The states that are pending work; the others are final and never change again.
OWED = (ReplyState.PENDING, ReplyState.WORKING, ReplyState.RETRYING)


class StepOutcome(models.TextChoices):
    """How a tool call ended (SPEC §7.2): what suites and Consoles decide on."""

    OK = "ok"  # the broker's verb ran and stored what it stores
    REFUSED = "refused"  # the broker refused it; `code` is the refusal's
    ERROR = "error"  # never reached the broker: an unknown tool, or arguments that do not fit


class Via(models.TextChoices):
    """The channel a human's or tester's message came through; the stored `from_run` stays as
    R6 says whichever it was. Null for everything a run or the system writes."""

    CONSOLE = "console"  # the Console page (`X-Mosaic-Via: console`)
    API = "api"  # any other client of the chat API
    CLI = "cli"  # the management commands


class TrailKind(models.TextChoices):
    """What a trail row records: what a Console decides on, never on the row's text."""

    MESSAGE = "message"
    CLAIM_ENDED = "claim.ended"
    INSTANCE_ENDED = "instance.ended"
    DECISION = "decision"
    THREAD_RENAMED = "thread.renamed"
    THREAD_ARCHIVED = "thread.archived"
    THREAD_UNARCHIVED = "thread.unarchived"
    THREAD_PINNED = "thread.pinned"
    THREAD_UNPINNED = "thread.unpinned"
    TESTER_PURGED = "tester.purged"  # old tester data deleted (`broker.actions.tester_purge`)
    STEP = "step"  # a tool call a run made while answering a turn (SPEC §7.2)
    TURN_EDITED = "turn.edited"  # a new version of an owner's turn, with new text (R24)
    TURN_REGENERATED = "turn.regenerated"  # the same turn asked again (R24)
    THREAD_BRANCHED = "thread.branched"  # a branch made from the thread (R24)


class MessageClass(models.TextChoices):
    REQUEST = "REQUEST"  # a human's or tester's turn
    RESULT = "RESULT"  # a run's reply
    NOTICE = "NOTICE"
    MESSAGE = "MESSAGE"


class SuiteVerdict(models.TextChoices):
    """A conversation-test case's verdict over its repeats, as the runner judged it."""

    PASS = "pass"
    FLAKY = "flaky"  # passed in some repeats, not all
    FAIL = "fail"
    ERROR = "error"  # could not be judged (no answer from the listener, a refusal)


# Verdicts that pass a case, and verdicts that fail it, as a baseline comparison reads them.
PASSING_VERDICTS = (SuiteVerdict.PASS, SuiteVerdict.FLAKY)
FAILING_VERDICTS = (SuiteVerdict.FAIL, SuiteVerdict.ERROR)


class SuiteChange(models.TextChoices):
    """How a case's verdict compares with the same case in its run's baseline (the broker's)."""

    REGRESSED = "regressed"  # worked there, broken now
    FIXED = "fixed"  # broken there, works now
    SAME = "same"  # no significant change (a move within noise included)
    NEW = "new"  # no such case there, or no baseline
    CHANGED = "changed"  # its definition (turns, expectations, judge) changed since there


class SuiteRunEnd(models.TextChoices):
    """How a suite run ended (blank while it runs)."""

    FINISHED = "finished"  # its client ended it after its last case: a baseline for "last"
    HALTED = "halted"  # refused, interrupted, or silent too long: its reason says which


class Business(models.Model):
    slug = models.SlugField(max_length=100, unique=True)
    # Username of the business's one human; one business per human.
    human = models.CharField(max_length=150, unique=True)
    tester_enabled = models.BooleanField(default=True)
    # Instance a new thread talks to when the caller names none.
    default_instance = models.CharField(max_length=100, default="assistant")

    class Meta:
        verbose_name_plural = "businesses"
        constraints = [
            # R4: the human and the tester must never share an owner.
            models.CheckConstraint(condition=~Q(human=TESTER), name="business_human_not_tester"),
            models.CheckConstraint(condition=~Q(human=""), name="business_human_not_empty"),
        ]

    def __str__(self) -> str:
        return self.slug


class RoleDefinition(models.Model):
    """A role's messaging lists. No list names `tester` (R5): loader, check and boot refuse it."""

    business = models.ForeignKey(Business, on_delete=models.CASCADE, related_name="roles")
    name = models.CharField(max_length=100)
    receive_from = models.JSONField(default=list)
    send_to = models.JSONField(default=list)
    cross_role = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["business", "name"], name="role_unique_per_business"),
        ]

    def __str__(self) -> str:
        return self.name


class Instance(models.Model):
    business = models.ForeignKey(Business, on_delete=models.CASCADE, related_name="instances")
    name = models.CharField(max_length=100)
    role = models.ForeignKey(RoleDefinition, on_delete=models.PROTECT, related_name="instances")
    # How its replies are made (the business file's `[instances.NAME.reply]`): backend, model,
    # system prompt, limits; each key left out falls back to the MOSAIC_ASSISTANT_* settings.
    # Never a key itself: `api_key_env` names the environment variable that holds it. Null
    # when the file sets none (nullable so the column is added in place: rebuilding this table
    # on SQLite would trip over the guards that read it).
    reply = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["business", "name"], name="instance_unique_per_business"
            ),
            # An instance's name is its address on the bus: never `human` or `tester`.
            models.CheckConstraint(
                condition=~Q(name__in=RESERVED_ADDRESSES) & ~Q(name=""),
                name="instance_name_not_reserved",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="projects")
    name = models.CharField(max_length=200)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["business", "name"], name="project_unique_per_business"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def creator(self) -> Creator:
        return Creator.TESTER if self.created_by == TESTER else Creator.HUMAN


class Thread(models.Model):
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="threads")
    name = models.CharField(max_length=200)
    # `tester` or the human's username (R2).
    owner = models.CharField(max_length=150)
    instance = models.ForeignKey(Instance, on_delete=models.PROTECT, related_name="threads")
    created_at = models.DateTimeField(auto_now_add=True)
    # When its owner archived it (null: not archived); lists leave archived threads out.
    # Nullable columns are added in place: rebuilding this table on SQLite would trip over the
    # guards of the tables that read it.
    archived_at = models.DateTimeField(null=True, blank=True)
    # The owner's read mark: the newest message of the thread the owner has opened (one owner,
    # so one mark, the same on every device). Only moves forward.
    read_up_to = models.BigIntegerField(null=True, blank=True)
    # Its last activity, what the inbox orders by: the time of its newest message, or of its
    # creation while it has none. Written where a thread is made and where every message is
    # stored (`broker.actions.streams.do_record_message`), never anywhere else. Null only for
    # a row made outside the broker; migration 0016 filled in the threads stored before it.
    active_at = models.DateTimeField(null=True, blank=True)
    # When its owner pinned it (null: not pinned); the inbox lists pinned threads first.
    pinned_at = models.DateTimeField(null=True, blank=True)
    # R24: the owner's thread this one was branched from, and the last message of that
    # thread's conversation it carries (null: none, as a branch of a first turn). Both set at
    # creation and never changed (the guards refuse it); nullable, so added in place.
    branched_from = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="branches"
    )
    branched_at = models.ForeignKey(
        "Message", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )

    # The inbox's reading of a thread, annotated by the thread list (`selectors.with_inbox`);
    # these class values are an empty thread's, true of a thread just created.
    last_message_at: datetime | None = None
    last_body: str | None = None
    unread: int = 0

    class Meta:
        constraints = [
            # R18: unique per project, not per owner — the accepted leak.
            models.UniqueConstraint(fields=["project", "name"], name="thread_unique_per_project"),
            models.CheckConstraint(condition=~Q(owner=""), name="thread_owner_not_empty"),
        ]
        indexes = [
            # The thread list (R3): one owner's threads of a project, newest page first, read
            # in id order from the index without sorting the project's threads.
            models.Index(fields=["owner", "project", "id"], name="thread_owner_project_id"),
            # The inbox's order (`selectors.by_activity`): the same threads by last activity,
            # read from the index, never sorted; pinned threads, few, from an index of their own.
            models.Index(
                fields=["owner", "project", "active_at", "id"], name="thread_owner_activity"
            ),
            models.Index(
                fields=["owner", "project", "active_at", "id"],
                condition=Q(pinned_at__isnull=False),
                name="thread_owner_pinned",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    @property
    def pinned(self) -> bool:
        return self.pinned_at is not None

    @property
    def preview(self) -> str | None:
        """The newest message's body on one line, cut (`fields.one_line`)."""
        return None if self.last_body is None else fields.one_line(self.last_body)


class ThreadOpen(models.Model):
    """Append-only: who opened which thread, when."""

    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="opens")
    by = models.CharField(max_length=150)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=~Q(by=""), name="thread_open_by_not_empty")]

    def __str__(self) -> str:
        return f"{self.by} opened thread {self.thread_id}"


class Event(models.Model):
    """Append-only business events; the kind is a closed set."""

    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="events")
    kind = models.CharField(max_length=40, choices=EventKind.choices)
    body = models.JSONField(default=dict)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=EventKind.values), name="event_kind_known"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"


class ThreadClaim(models.Model):
    """A run's lease on a thread for one instance. At most one open claim per thread and
    instance: the thread's own instance answers its owner, and an instance it consults answers
    it under a claim of its own (R23)."""

    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="claims")
    run = models.CharField(max_length=100)
    instance = models.ForeignKey(Instance, on_delete=models.PROTECT, related_name="claims")
    claimed_at = models.DateTimeField(auto_now_add=True)
    lease_expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.CharField(max_length=150, blank=True, default="")
    end_reason = models.CharField(max_length=200, blank=True, default="")
    # Empty while the claim is open; set, from ClaimEnd, exactly when it ends.
    ended_how = models.CharField(max_length=20, choices=ClaimEnd.choices, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "instance"],
                condition=Q(ended_at__isnull=True),
                name="one_open_claim_per_thread_instance",
            ),
            models.CheckConstraint(condition=~Q(run=""), name="claim_run_not_empty"),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True, ended_how="")
                | Q(ended_at__isnull=False, ended_how__in=ClaimEnd.values),
                name="claim_ended_how_when_ended",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run} on thread {self.thread_id}"

    @property
    def is_open(self) -> bool:
        return self.ended_at is None


class Message(models.Model):
    """Append-only. A thread's message has the thread's instance at one end (trigger)."""

    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="messages")
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, null=True, blank=True, related_name="messages"
    )
    from_role = models.CharField(max_length=100)
    from_run = models.CharField(max_length=100)
    to_role = models.CharField(max_length=100)
    message_class = models.CharField(max_length=10, choices=MessageClass.choices, db_column="class")
    body = models.TextField()
    in_reply_to = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="replies"
    )
    request = models.ForeignKey(
        Event, on_delete=models.PROTECT, null=True, blank=True, related_name="messages"
    )
    # The run that held the thread's claim when the message was routed (none: null).
    holder = models.CharField(max_length=100, blank=True, default="")
    # The claim a run's write named (R12); null for human and tester turns.
    claim = models.ForeignKey(
        ThreadClaim, on_delete=models.PROTECT, null=True, blank=True, related_name="messages"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # What the model server reported about a RESULT (SPEC §7.1); null when unknown. Nullable,
    # so the columns are added in place: rebuilding the table would drop its guard triggers.
    model = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    finish_reason = models.CharField(max_length=40, null=True, blank=True)  # noqa: DJ001
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    # From the model request to its first text, in milliseconds.
    first_token_ms = models.PositiveIntegerField(null=True, blank=True)
    # The channel a human's or tester's message came through (`Via`); null for a run's, the
    # system's, and every message stored before the field existed. Choices without a database
    # check: adding one rebuilds this table on SQLite.
    via = models.CharField(max_length=10, choices=Via.choices, null=True, blank=True)  # noqa: DJ001
    # R24: on an owner's turn that is a new version of an earlier one, the first version of
    # that turn (never a version of a version); null on first versions and every other message.
    version_of = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="versions"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(message_class__in=MessageClass.values), name="message_class_known"
            ),
            # Exactly one reply per message, whatever the runners do.
            models.UniqueConstraint(
                fields=["in_reply_to"],
                condition=Q(message_class=MessageClass.RESULT),
                name="one_result_per_message",
            ),
        ]
        indexes = [
            models.Index(fields=["business", "to_role", "id"], name="message_inbox"),
            models.Index(fields=["thread", "id"], name="message_thread"),
            # A thread's unread count (the inbox): the messages no person wrote, after the read
            # mark. Only replies and notices are in it, so counting a thread's unread reads
            # those, not every turn its owner sent.
            models.Index(
                fields=["thread", "id"],
                condition=~Q(from_role__in=RESERVED_ADDRESSES),
                name="message_unread",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.from_role} to {self.to_role} #{self.pk}"

    # A turn's stored steps when the read loaded them (`selectors.with_steps`), oldest first.
    loaded_steps: tuple[Step, ...] = ()
    # When the message a reply answers was stored, where the read annotated it
    # (`selectors.with_turn_start`); None elsewhere.
    turn_created_at: datetime | None = None

    @property
    def progress_or_none(self) -> TurnProgress | None:
        """The turn's progress row, read with the message (`select_related("progress")`)."""
        try:
            return self.progress
        except TurnProgress.DoesNotExist:
            return None

    @property
    def reply_state(self) -> str | None:
        """SPEC §7.1: a turn's state (no progress row yet: `pending`); None for other messages."""
        if self.message_class != MessageClass.REQUEST:
            return None
        progress = self.progress_or_none
        return progress.state if progress is not None else ReplyState.PENDING

    @property
    def is_cut_off(self) -> bool:
        """A reply the model stopped at its token limit."""
        return self.finish_reason == "length"


class TurnProgress(models.Model):
    """How the reply to one turn is going (SPEC §7.1); mutable, unlike the message itself.

    A turn without a row is `pending`: nothing has been tried yet, and a send stores no row.
    Runs move it through `working` and `retrying`; the RESULT, a stop or a failure ends it,
    and a final state never changes again: every write names the states it moves from.
    """

    message = models.OneToOneField(
        Message, on_delete=models.PROTECT, primary_key=True, related_name="progress"
    )
    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="turn_progress")
    state = models.CharField(max_length=10, choices=ReplyState.choices)
    # Attempts started by runs; the turn fails once MOSAIC_ASSISTANT_ATTEMPTS are used.
    attempts = models.PositiveIntegerField(default=0)
    retry_at = models.DateTimeField(null=True, blank=True)
    # Why the turn failed or is retrying, for people.
    failure = models.CharField(max_length=300, blank=True, default="")
    # The reply so far while `working`, and what it had written when a stop ended it (`stopped`:
    # the turn's `partial`). Never a record: the RESULT is.
    draft = models.TextField(blank=True, default="")
    # Tool calls of the turn stored so far (`Step`), so a read of turns without any reads no
    # step table; and the call running now, shown live and never a record (SPEC §7.2).
    steps = models.PositiveIntegerField(default=0)
    calling = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "turn progress"
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=ReplyState.values), name="turn_state_known"
            ),
            models.CheckConstraint(
                condition=Q(state=ReplyState.RETRYING, retry_at__isnull=False)
                | (~Q(state=ReplyState.RETRYING) & Q(retry_at__isnull=True)),
                name="turn_retry_at_when_retrying",
            ),
            models.CheckConstraint(
                condition=~Q(state=ReplyState.FAILED) | ~Q(failure=""),
                name="turn_failure_when_failed",
            ),
        ]
        indexes = [models.Index(fields=["thread", "state"], name="turn_progress_thread")]

    def __str__(self) -> str:
        return f"turn {self.message_id}: {self.state}"


class TrailRow(models.Model):
    """Append-only: one row per bus event a Console shows (R16 labels). Own id sequence."""

    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="trail")
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, null=True, blank=True, related_name="trail"
    )
    message = models.ForeignKey(
        Message, on_delete=models.PROTECT, null=True, blank=True, related_name="trail"
    )
    from_role = models.CharField(max_length=100)
    from_run = models.CharField(max_length=100)
    to_role = models.CharField(max_length=100)
    actor_role = models.CharField(max_length=100)
    actor_run = models.CharField(max_length=100)
    text = models.TextField()
    kind = models.CharField(max_length=20, choices=TrailKind.choices, default=TrailKind.MESSAGE)
    # The thread's name when the row was written (null: no thread).
    thread_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    # The message's channel (`Message.via`), for a human's or tester's message; else null.
    via = models.CharField(max_length=10, choices=Via.choices, null=True, blank=True)  # noqa: DJ001
    # R20: the tester's trail holds only rows of its own threads or with it at one end.
    tester_visible = models.BooleanField(default=False)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["business", "id"], name="trail_business"),
            models.Index(fields=["business", "tester_visible", "id"], name="trail_tester"),
            # A thread's rows, newest first (admin's list of one thread's trail).
            models.Index(fields=["thread", "id"], name="trail_thread"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=TrailKind.values), name="trail_kind_known"),
        ]

    def __str__(self) -> str:
        return self.text[:80]


class Step(models.Model):
    """Append-only: one tool call a run made while answering a turn (SPEC §7.2).

    Stored in the transaction of what the call did, so a call is executed at most once per
    (turn, call id): a retried turn finds its earlier calls here and is told their results.
    """

    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="steps")
    thread = models.ForeignKey(Thread, on_delete=models.PROTECT, related_name="steps")
    turn = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="steps")
    claim = models.ForeignKey(ThreadClaim, on_delete=models.PROTECT, related_name="steps")
    run = models.CharField(max_length=100)
    # The model's id for the call, and which of the turn's model requests asked for it.
    call_id = models.CharField(max_length=100)
    round = models.PositiveSmallIntegerField()
    tool = models.CharField(max_length=64)
    # As the model sent them: a JSON object, or (not one) the text itself; bounded.
    arguments = models.JSONField()
    outcome = models.CharField(max_length=10, choices=StepOutcome.choices)
    # The broker's refusal code (`refused`) or what was wrong with the call (`error`).
    code = models.CharField(max_length=40, blank=True, default="")
    result = models.JSONField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "call_id"], name="one_step_per_call"),
            models.CheckConstraint(
                condition=Q(outcome__in=StepOutcome.values), name="step_outcome_known"
            ),
        ]
        indexes = [models.Index(fields=["thread", "id"], name="step_thread")]

    def __str__(self) -> str:
        return f"{self.tool} {self.outcome} (turn {self.turn_id})"


class Task(models.Model):
    """A task a run created from a human's request (R15: the request is a `human.input`)."""

    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="tasks")
    request = models.ForeignKey(Event, on_delete=models.PROTECT, related_name="tasks")
    title = models.CharField(max_length=200)
    created_by_run = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.title


class Decision(models.Model):
    """Append-only: a decision a run routed to the human's inbox (R19)."""

    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="decisions")
    thread = models.ForeignKey(
        Thread, on_delete=models.PROTECT, null=True, blank=True, related_name="decisions"
    )
    claim = models.ForeignKey(
        ThreadClaim, on_delete=models.PROTECT, null=True, blank=True, related_name="decisions"
    )
    from_role = models.CharField(max_length=100)
    from_run = models.CharField(max_length=100)
    route_to = models.CharField(max_length=100)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.from_role} to {self.route_to} #{self.pk}"


class IdempotentWrite(models.Model):
    """R21: the first answer to a write sent with an Idempotency-Key, per owner and key."""

    business = models.ForeignKey(Business, on_delete=models.CASCADE, related_name="+")
    # `tester` or the human's username: one side's keys never meet the other's.
    owner = models.CharField(max_length=150)
    key = models.CharField(max_length=200)
    # What was asked (operation and body), so a reused key with another body is told apart.
    fingerprint = models.CharField(max_length=64)
    answer = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["business", "owner", "key"], name="idempotency_key_per_owner"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner}: {self.key}"


class SuiteRun(models.Model):
    """One run of the conversation tests, stored through the tester listener for the tester's
    own history. Not bus traffic: no trail row, no thread stream, no push."""

    business = models.ForeignKey(Business, on_delete=models.PROTECT, related_name="suite_runs")
    # The names of the suites it covers, sorted, each once.
    suites = models.JSONField()
    started_at = models.DateTimeField(auto_now_add=True)
    # Null until the runner ends it; a run that ended takes no more cases.
    ended_at = models.DateTimeField(null=True, blank=True)
    # An earlier run of the same business its cases are compared with (none: every case `new`).
    baseline = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="compared_runs"
    )
    # What the run selected, so `compare: "last"` finds a run of the same selection: the
    # instances its cases were planned on, sorted ("" is the business's default), and the
    # case selection (`-k`; "" is every case).
    instances = models.JSONField(default=list)
    keyword = models.CharField(max_length=suite_fields.KEYWORD_MAX, blank=True)
    # The significance level of its comparisons: a change is significant when p < alpha.
    alpha = models.FloatField(default=suite_fields.DEFAULT_ALPHA)
    # How it ended (blank while it runs) and, when halted, why.
    ended_how = models.CharField(max_length=10, choices=SuiteRunEnd.choices, blank=True)
    end_reason = models.TextField(blank=True)
    # Its start or its latest record: a run silent past MOSAIC_SUITE_RUN_SILENCE_SECONDS is
    # halted (`suite_runs.halt_silent_runs`).
    active_at = models.DateTimeField(default=timezone.now)

    # Its cases counted by verdict, and those that regressed, annotated by the reads
    # (`suite_runs.with_counts`); these class values are a run's with no cases.
    pass_count: int = 0
    flaky_count: int = 0
    fail_count: int = 0
    error_count: int = 0
    regressed_count: int = 0
    # Its cases' costs summed (None: no case recorded one), and how many recorded none, also
    # annotated by the reads (`SuiteRun.cost`).
    cost_turns_sum: int | None = None
    prompt_tokens_sum: int | None = None
    completion_tokens_sum: int | None = None
    cost_amount_sum: float | None = None
    turns_without_usage_sum: int | None = None
    turns_without_price_sum: int | None = None
    cases_without_cost: int = 0

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                name="suite_run_ends_after_start",
            ),
            models.CheckConstraint(
                condition=Q(alpha__gt=0, alpha__lt=1), name="suite_run_alpha_range"
            ),
            # Running: no end. Ended: finished, or halted with its reason.
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True, ended_how="", end_reason="")
                | Q(ended_at__isnull=False, ended_how=SuiteRunEnd.FINISHED, end_reason="")
                | (Q(ended_at__isnull=False, ended_how=SuiteRunEnd.HALTED) & ~Q(end_reason="")),
                name="suite_run_ended_how",
            ),
        ]
        indexes = [
            # The runs list, newest first, and `compare: "last"`: one business's runs by id.
            models.Index(fields=["business", "id"], name="suite_run_business"),
            # The runs still running, by their last activity: the silent ones are halted.
            models.Index(
                fields=["business", "active_at"],
                condition=Q(ended_at__isnull=True),
                name="suite_run_running",
            ),
        ]

    def __str__(self) -> str:
        return f"suite run {self.pk}"

    @property
    def state(self) -> str:
        """`running` until it ends, then how it ended (`finished`, `halted`)."""
        return self.ended_how or "running"

    @property
    def counts(self) -> dict[str, int]:
        """Its cases by verdict (`pass`, `flaky`, `fail`, `error`) and how many regressed."""
        counted = {verdict: getattr(self, f"{verdict}_count") for verdict in SuiteVerdict.values}
        return {**counted, SuiteChange.REGRESSED.value: self.regressed_count}

    @property
    def cost(self) -> dict[str, int | float | None]:
        """What its cases' replies used and cost, summed over the cases that recorded a cost
        (a case's cost: `SuiteCase.cost_turns` and the columns beside it), and how many cases
        recorded none. `amount` is None when no turn of any case was priced: unknown, never
        zero; it is complete only when every count of what is unknown is 0. (PostgreSQL sums
        bigints as decimals: each is made an int again.)"""
        return {
            "turns": int(self.cost_turns_sum or 0),
            "prompt_tokens": int(self.prompt_tokens_sum or 0),
            "completion_tokens": int(self.completion_tokens_sum or 0),
            "amount": None if self.cost_amount_sum is None else round(self.cost_amount_sum, 10),
            "turns_without_usage": int(self.turns_without_usage_sum or 0),
            "turns_without_price": int(self.turns_without_price_sum or 0),
            "cases_without_cost": self.cases_without_cost,
        }


# A case's cost, column by column (`SuiteCase.cost`), each summed over a run's cases by the
# reads (`SuiteRun.cost`).
CASE_COST_COLUMNS = (
    "cost_turns",
    "prompt_tokens",
    "completion_tokens",
    "cost_amount",
    "turns_without_usage",
    "turns_without_price",
)


class SuiteCase(models.Model):
    """One case's result in a suite run: its verdict over its repeats, how that compares with
    the baseline (`change`, computed by the broker), its threads, failures and attempts."""

    run = models.ForeignKey(SuiteRun, on_delete=models.PROTECT, related_name="cases")
    suite = models.CharField(max_length=suite_fields.SUITE_NAME_MAX)
    case = models.CharField(max_length=suite_fields.SUITE_NAME_MAX)
    # The instance the case's threads talked to; empty when it reached none (no thread).
    instance = models.CharField(max_length=suite_fields.INSTANCE_NAME_MAX, blank=True)
    verdict = models.CharField(max_length=10, choices=SuiteVerdict.choices)
    passed_runs = models.PositiveIntegerField()
    runs = models.PositiveIntegerField()
    change = models.CharField(max_length=10, choices=SuiteChange.choices)
    # Ids of the tester's threads the case used.
    threads = models.JSONField(default=list)
    # `{"repeat", "turn", "sent", "expected", "actual"}` for each failed expectation.
    failures = models.JSONField(default=list)
    # The runner's detail of each repeat, as it sent it (`suite_fields.clean_attempts`).
    attempts = models.JSONField(default=list)
    # The client's statistics over its repeats, checked but not recomputed (null: a record
    # from a client before them): the pass rate, its 95% Wilson interval, and pass^k.
    pass_rate = models.FloatField(null=True, blank=True)
    interval_low = models.FloatField(null=True, blank=True)
    interval_high = models.FloatField(null=True, blank=True)
    pass_hat_k = models.FloatField(null=True, blank=True)
    # The sha256 of the case's definition, as the client computed it ("": not sent).
    definition_hash = models.CharField(max_length=64, blank=True)
    # The baseline's same case's k/N, and the one-sided Fisher p-value of the change from it
    # (null: no such case, or its definition changed).
    baseline_passed_runs = models.PositiveIntegerField(null=True, blank=True)
    baseline_runs = models.PositiveIntegerField(null=True, blank=True)
    p_value = models.FloatField(null=True, blank=True)
    # What its replies used and cost, as the client counted them (`suite_fields.CaseCost`):
    # the turns, the tokens and the amount in dollars of those whose usage (and price) is
    # known, and how many turns had no usage or no price. All null: a record from a client
    # before costs; `cost_amount` alone null: no turn was priced (unknown, never zero).
    cost_turns = models.PositiveBigIntegerField(null=True, blank=True)
    prompt_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    cost_amount = models.FloatField(null=True, blank=True)
    turns_without_usage = models.PositiveBigIntegerField(null=True, blank=True)
    turns_without_price = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "suite", "case", "instance"], name="suite_case_unique_per_run"
            ),
            models.CheckConstraint(
                condition=Q(verdict__in=SuiteVerdict.values), name="suite_case_verdict_known"
            ),
            models.CheckConstraint(
                condition=Q(change__in=SuiteChange.values), name="suite_case_change_known"
            ),
            models.CheckConstraint(
                condition=Q(runs__gte=1, runs__lte=suite_fields.RUNS_MAX),
                name="suite_case_runs_range",
            ),
            models.CheckConstraint(
                condition=Q(passed_runs__lte=F("runs")), name="suite_case_passed_within_runs"
            ),
            models.CheckConstraint(
                condition=~Q(suite="") & ~Q(case=""), name="suite_case_names_not_empty"
            ),
            models.CheckConstraint(
                condition=~Q(instance="") | Q(threads=[]), name="suite_case_instance_of_threads"
            ),
            # The rate and its interval together or neither, within [0, 1], the rate inside
            # its interval; pass^k only beside them, within [0, 1].
            models.CheckConstraint(
                condition=Q(
                    pass_rate__isnull=True,
                    interval_low__isnull=True,
                    interval_high__isnull=True,
                    pass_hat_k__isnull=True,
                )
                | Q(
                    pass_rate__isnull=False,
                    interval_low__isnull=False,
                    interval_high__isnull=False,
                    interval_low__gte=0,
                    pass_rate__gte=F("interval_low"),
                    interval_high__gte=F("pass_rate"),
                    interval_high__lte=1,
                )
                & (Q(pass_hat_k__isnull=True) | Q(pass_hat_k__gte=0, pass_hat_k__lte=1)),
                name="suite_case_statistics_range",
            ),
            models.CheckConstraint(
                condition=Q(p_value__isnull=True) | Q(p_value__gte=0, p_value__lte=1),
                name="suite_case_p_value_range",
            ),
            models.CheckConstraint(
                condition=Q(baseline_passed_runs__isnull=True, baseline_runs__isnull=True)
                | Q(
                    baseline_passed_runs__isnull=False,
                    baseline_runs__gte=1,
                    baseline_passed_runs__lte=F("baseline_runs"),
                ),
                name="suite_case_baseline_tally",
            ),
            # The counts all together or none; the turns without usage or a price among the
            # turns; an amount, not negative, exactly when some turn was priced. Each branch
            # says "not null" itself: a comparison with null is unknown, which a check passes.
            models.CheckConstraint(
                condition=Q(**{f"{column}__isnull": True for column in CASE_COST_COLUMNS})
                | Q(
                    **{
                        f"{column}__isnull": False
                        for column in CASE_COST_COLUMNS
                        if column != "cost_amount"
                    },
                    cost_turns__gte=F("turns_without_usage") + F("turns_without_price"),
                )
                & (
                    Q(
                        cost_amount__isnull=True,
                        cost_turns=F("turns_without_usage") + F("turns_without_price"),
                    )
                    | Q(
                        cost_amount__isnull=False,
                        cost_amount__gte=0,
                        cost_turns__gt=F("turns_without_usage") + F("turns_without_price"),
                    )
                ),
                name="suite_case_cost_counts",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite} · {self.case} ({self.instance})"

    @property
    def cost(self) -> dict[str, int | float | None] | None:
        """What its replies used and cost, in the client's shape (`Spend.as_json`); None when
        its record carried none."""
        if self.cost_turns is None:
            return None
        return {
            "turns": self.cost_turns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "amount": self.cost_amount,
            "turns_without_usage": self.turns_without_usage,
            "turns_without_price": self.turns_without_price,
        }


class PurgePermit(models.Model):
    """The tester-data purge's pass through the append-only guards (`broker.actions.tester_purge`).

    The guards let a DELETE of a message, open, trail row or decision through only while a
    permit of the deleting transaction exists, and only for a row of a tester-owned thread.
    The purge stores its permit first and deletes it last, in the same transaction, so none is
    ever committed. PostgreSQL ties a permit to its transaction by id; SQLite has one writer,
    and no other connection sees a row that is not committed.
    """

    # The transaction's id on PostgreSQL (`txid_current()`); null on SQLite.
    txid = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"purge permit {self.pk}"
