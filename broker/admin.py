"""Staff admin: every broker record inspectable, nothing writable but R14's instance end.

Admin reads the tables directly, across businesses: staff see every thread by design (the
Console is where views are scoped). It never writes a record itself. Message, Event,
ThreadOpen, TrailRow and Decision are append-only in the database; claims, tasks, stored
idempotent answers and the tester's suite runs are written only by the broker; businesses,
roles and instances come from business files, where the loader checks R4 and R5; projects and
threads are created through the broker, and a thread's owner never changes (R1, R20). So every
page is read-only, for superusers too, and the one staff write — ending an instance — goes
through `broker.actions.end_instance`."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from django.contrib import admin, messages
from django.db.models import Count, Exists, Model, OuterRef, Q, QuerySet, Sum
from django.db.models.fields.related import RelatedField
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from broker import actions as broker_actions
from broker import admin_bounds, fields, steps, thread_rows
from broker.actions import suite_runs
from broker.actors import Actor
from broker.models import (
    TESTER,
    Business,
    Decision,
    Event,
    IdempotentWrite,
    Instance,
    Message,
    Project,
    PurgePermit,
    RoleDefinition,
    Step,
    SuiteCase,
    SuiteRun,
    Task,
    Thread,
    ThreadClaim,
    ThreadOpen,
    TrailRow,
    TurnProgress,
    Via,
)
from broker.refusals import Refusal

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise

    AnyModelAdmin = admin.ModelAdmin[Any]
    AnyThreadInline = admin.TabularInline[Any, Thread]
else:
    # Generic only in the stubs: subscripting at runtime would need django-stubs-ext's
    # monkeypatch, a development dependency.
    AnyModelAdmin = admin.ModelAdmin
    AnyThreadInline = admin.TabularInline

BODY_PREVIEW = 80
# Staff who may end an instance (R14). The change form itself stays read-only for everyone.
END_INSTANCE_PERMISSION = "broker.change_instance"


def preview(text: str) -> SafeString:
    """A list's view of a long text: its first line, cut to BODY_PREVIEW characters and marked
    "…" when anything is left out, in a box the list's stylesheet gives a readable width
    (`wrapping.html`); the record's own page shows all of it."""
    first, _, rest = text.strip().partition("\n")
    shown = Truncator(first).chars(BODY_PREVIEW)
    if rest.strip() and not shown.endswith("…"):
        shown = f"{shown} …"
    return format_html('<span class="preview" title="{}">{}</span>', shown, shown)


# The channel a human's or tester's message came through (`Message.via`, its trail row's copy)
# as a person names it; R6's sender (`from_run`, `human-cli` whatever the channel) keeps a column
# of its own. Null (a run's or the system's row) shows as the admin's empty value.
VIA_LABELS: dict[str, str] = {Via.CONSOLE: "Console", Via.API: "API", Via.CLI: "CLI"}


@admin.display(description="via", ordering="via")
def channel(obj: Message | TrailRow) -> str:
    if not obj.via:
        return admin.site.empty_value_display
    return VIA_LABELS.get(obj.via, obj.via)


# --- read-only bases ---------------------------------------------------------------------


class ReadOnlyAdmin(AnyModelAdmin):
    """Viewable by staff with the view permission; no add, change or delete for anyone.

    Every list is a page of LIST_ROWS whose count stops at COUNT_CAP, and the table's own total
    is never counted (`show_full_result_count`): the record's tables reach millions of rows."""

    paginator = admin_bounds.CappedCountPaginator
    list_per_page = admin_bounds.LIST_ROWS
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        found = super().get_actions(request)
        # Already filtered by the delete permission; removed outright so no change brings it back.
        found.pop("delete_selected", None)
        return found


class ReadOnlyThreadInline(AnyThreadInline):
    """A thread's rows on its page, the newest INLINE_ROWS with a link to the rest: shown,
    never added, changed or deleted."""

    formset = admin_bounds.NewestRowsFormSet
    extra = 0
    can_delete = False
    ordering = ("id",)
    # Scrolls inside its own box when wider than the page.
    template = "admin/broker/edit_inline/scrolling_tabular.html"

    def has_add_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        return False


# --- filters -----------------------------------------------------------------------------

# A list narrowed to one thread's rows, as the thread's page links to it.
THREAD_PARAMETER = "thread__id__exact"


class OwnerKindFilter(admin.SimpleListFilter):
    """Threads by owner kind: the tester's carry `tester`, the human's its username (R2)."""

    title = "owner kind"
    parameter_name = "owner_kind"
    # Path from the listed model to the thread's owner.
    owner_path = "owner"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [("human", "human"), ("tester", "tester")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "tester":
            return queryset.filter(**{self.owner_path: TESTER})
        if self.value() == "human":
            # A human owner is a username that varies by business: any owner but the tester.
            # Rows outside any thread have no owner and are neither.
            return queryset.filter(**{f"{self.owner_path}__isnull": False}).exclude(
                **{self.owner_path: TESTER}
            )
        return queryset


class ThreadOwnerKindFilter(OwnerKindFilter):
    owner_path = "thread__owner"


class ThreadRowsFilter(admin.SimpleListFilter):
    """One thread's rows (`?thread__id__exact=ID`, the thread page's links), read newest first
    from the (thread, id) index (`thread_rows`)."""

    title = "thread"
    parameter_name = THREAD_PARAMETER

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        # Offered only when asked for: the filter applies only while it has a choice to show.
        value = self.value()
        return [(value, f"thread {value}")] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        try:
            thread_id = fields.parse_id(value, what="thread")
        except Refusal:
            return queryset.none()
        return self.narrow(queryset, thread_id)

    def narrow(self, queryset: QuerySet[Any], thread_id: int) -> QuerySet[Any]:
        return queryset.filter(thread_rows.in_thread(thread_id)).order_by(*thread_rows.NEWEST_FIRST)


class TaskThreadFilter(ThreadRowsFilter):
    """A thread's tasks (`?thread=ID`, the thread page's link): a task names its thread only
    through its request, the `human.input` event of the turn (R15)."""

    parameter_name = "thread"

    def narrow(self, queryset: QuerySet[Any], thread_id: int) -> QuerySet[Any]:
        return queryset.filter(request__body__thread=thread_id)


class EndedStateFilter(admin.SimpleListFilter):
    """Rows not ended yet (`?state=open`, labelled `open_label`) or ended (`ended_at`)."""

    parameter_name = "state"
    open_label = "open"

    def lookups(
        self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]
    ) -> list[tuple[str, str]]:
        return [("open", self.open_label), ("ended", "ended")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "open":
            return queryset.filter(ended_at__isnull=True)
        if self.value() == "ended":
            return queryset.filter(ended_at__isnull=False)
        return queryset


class ClaimStateFilter(EndedStateFilter):
    """Open claims (a run holds the thread) or ended ones."""

    title = "claim"


class BusinessScopedFilter(admin.RelatedFieldListFilter):
    """Projects and instances labelled `business / name`: names repeat across businesses."""

    def field_choices(
        self,
        field: RelatedField[Any, Any],
        request: HttpRequest,
        model_admin: admin.ModelAdmin[Any],
    ) -> list[tuple[str, _StrOrPromise]]:
        related = cast(type[Model], field.related_model)
        rows = related._default_manager.order_by("business__slug", "name").values_list(
            "pk", "business__slug", "name"
        )
        return [(str(pk), f"{slug} / {name}") for pk, slug, name in rows]


# --- configuration: businesses, roles, instances -----------------------------------------


@admin.register(Business)
class BusinessAdmin(ReadOnlyAdmin):
    list_display = ("slug", "human", "tester_enabled", "default_instance")
    list_filter = ("tester_enabled",)
    search_fields = ("slug", "human")


@admin.register(RoleDefinition)
class RoleDefinitionAdmin(ReadOnlyAdmin):
    list_display = ("name", "business", "receive_from", "send_to", "cross_role")
    list_filter = ("business",)
    list_select_related = ("business",)
    search_fields = ("name",)


# The reply usage page covers this many days back, newest first.
USAGE_DAYS = 60


def reply_usage(*, days: int = USAGE_DAYS) -> list[dict[str, Any]]:
    """Replies and their tokens (SPEC §7.1) per business, instance and day (UTC), newest first."""
    since = timezone.now() - timedelta(days=days)
    rows = (
        Message.objects.filter(message_class="RESULT", thread__isnull=False, created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("business__slug", "from_role", "day")
        .annotate(
            reply_count=Count("pk"),
            cut_off=Count("pk", filter=Q(finish_reason="length")),
            prompt_tokens=Sum("prompt_tokens"),
            completion_tokens=Sum("completion_tokens"),
        )
        .order_by("-day", "business__slug", "from_role")
    )
    return list(rows)


@admin.register(Instance)
class InstanceAdmin(ReadOnlyAdmin):
    list_display = ("name", "business", "role", "open_claims")
    list_filter = ("business",)
    list_select_related = ("business", "role")
    search_fields = ("name",)
    actions = ("end_instances",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Instance]:
        instances: QuerySet[Instance] = super().get_queryset(request)
        return instances.annotate(
            open_claim_count=Count("claims", filter=Q(claims__ended_at__isnull=True))
        )

    @admin.display(description="open claims", ordering="open_claim_count")
    def open_claims(self, obj: Instance) -> int:
        count: int = getattr(obj, "open_claim_count", 0)
        return count

    def get_urls(self) -> list[URLPattern]:
        usage = path(
            "usage/",
            self.admin_site.admin_view(self.usage_view),
            name="broker_instance_usage",
        )
        return [usage, *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """Token usage per instance and per day, summed from the replies' records."""
        context = {
            **self.admin_site.each_context(request),
            "title": f"Reply usage, last {USAGE_DAYS} days",
            "opts": self.model._meta,
            "rows": reply_usage(),
        }
        return TemplateResponse(request, "admin/broker/usage.html", context)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {**(extra_context or {}), "usage_url": reverse("admin:broker_instance_usage")}
        return super().changelist_view(request, extra)

    def has_end_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(END_INSTANCE_PERMISSION)

    @admin.action(description="End instance (R14)", permissions=["end"])
    def end_instances(self, request: HttpRequest, queryset: QuerySet[Instance]) -> None:
        """R14 through the broker: end every claim each instance holds, tester threads too."""
        username = request.user.get_username()
        ended_instances = 0
        ended_claims = 0
        for instance in queryset.order_by("pk"):
            staff = Actor.staff(business_id=instance.business_id, username=username)
            try:
                ended = broker_actions.end_instance(staff, instance=instance.name)
            except Refusal as refusal:
                # A refusal is the staff member's answer, not a server error.
                self.message_user(
                    request, f"{instance}: {refusal.code}: {refusal.detail}", messages.ERROR
                )
                continue
            ended_instances += 1
            ended_claims += len(ended)
        if ended_instances:
            self.message_user(
                request,
                f"Ended {ended_instances} instance(s); {ended_claims} claim(s) ended.",
                messages.SUCCESS,
            )


# --- projects and threads ----------------------------------------------------------------


@admin.register(Project)
class ProjectAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "business", "created_by", "created_at")
    list_filter = ("business",)
    list_select_related = ("business",)
    search_fields = ("name",)
    date_hierarchy = "created_at"


class MessageInline(ReadOnlyThreadInline):
    model = Message
    fields = (
        "id",
        "created_at",
        "from_role",
        "from_run",
        "to_role",
        "message_class",
        "body",
        "reply",
        "model",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
    )
    readonly_fields = fields
    fk_name = "thread"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).select_related("progress")

    @admin.display(description="reply")
    def reply(self, obj: Message) -> str:
        return reply_text(obj)


def reply_text(message: Message) -> str:
    """A turn's reply state with its failure or retry time (SPEC §7.1); empty for others."""
    state = message.reply_state
    if state is None:
        return ""
    progress = message.progress_or_none
    if progress is not None and progress.failure:
        return f"{state}: {progress.failure}"
    return str(state)


class ThreadOpenInline(ReadOnlyThreadInline):
    model = ThreadOpen
    fields = ("id", "by", "at")
    readonly_fields = fields


class StepInline(ReadOnlyThreadInline):
    """The thread's tool calls (SPEC §7.2), each with its turn, outcome and result."""

    model = Step
    fields = ("id", "turn", "run", "tool", "arguments", "outcome", "code", "result", "ended_at")
    readonly_fields = fields
    fk_name = "thread"


class ThreadClaimInline(ReadOnlyThreadInline):
    model = ThreadClaim
    fields = (
        "id",
        "run",
        "claimed_at",
        "lease_expires_at",
        "ended_at",
        "ended_by",
        "ended_how",
        "end_reason",
    )
    readonly_fields = fields


@admin.register(Thread)
class ThreadAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "name",
        "owner",
        "business",
        "project",
        "instance",
        "held",
        "archived",
        "created_at",
    )
    list_filter = (
        OwnerKindFilter,
        ("archived_at", admin.EmptyFieldListFilter),
        ("project__business", admin.RelatedFieldListFilter),
        ("project", BusinessScopedFilter),
        ("instance", BusinessScopedFilter),
    )
    list_select_related = ("project__business", "instance")
    search_fields = ("name",)
    readonly_fields = ("all_messages", "trail_rows", "tasks", "all_steps")
    inlines = (MessageInline, StepInline, ThreadOpenInline, ThreadClaimInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Thread]:
        open_claim = ThreadClaim.objects.filter(thread=OuterRef("pk"), ended_at__isnull=True)
        threads: QuerySet[Thread] = super().get_queryset(request)
        return threads.annotate(is_held=Exists(open_claim))

    @admin.display(description="business", ordering="project__business__slug")
    def business(self, obj: Thread) -> str:
        return obj.project.business.slug

    @admin.display(description="held by a run", boolean=True, ordering="is_held")
    def held(self, obj: Thread) -> bool:
        return bool(getattr(obj, "is_held", False))

    @admin.display(description="archived", boolean=True, ordering="archived_at")
    def archived(self, obj: Thread) -> bool:
        return obj.archived

    @admin.display(description="messages")
    def all_messages(self, obj: Thread) -> SafeString:
        return changelist_link("message", "thread__id__exact", obj.pk, "all messages")

    @admin.display(description="trail")
    def trail_rows(self, obj: Thread) -> SafeString:
        return changelist_link("trailrow", "thread__id__exact", obj.pk, "its trail rows")

    @admin.display(description="tool calls")
    def all_steps(self, obj: Thread) -> SafeString:
        return changelist_link("step", "thread__id__exact", obj.pk, "all its tool calls")

    @admin.display(description="tasks")
    def tasks(self, obj: Thread) -> SafeString:
        return changelist_link("task", TaskThreadFilter.parameter_name, obj.pk, "its tasks")


def changelist_link(model_name: str, parameter: str, thread_id: int, text: str) -> SafeString:
    """A link to a model's list narrowed to one thread's rows."""
    url = reverse(f"admin:broker_{model_name}_changelist")
    return format_html('<a href="{}?{}={}">{}</a>', url, parameter, thread_id, text)


@admin.register(ThreadOpen)
class ThreadOpenAdmin(ReadOnlyAdmin):
    list_display = ("id", "at", "thread", "by", "business")
    list_filter = (
        ThreadOwnerKindFilter,
        ("thread__project__business", admin.RelatedFieldListFilter),
    )
    list_select_related = ("thread__project__business",)
    search_fields = ("thread__name",)

    @admin.display(description="business", ordering="thread__project__business__slug")
    def business(self, obj: ThreadOpen) -> str:
        return obj.thread.project.business.slug


@admin.register(ThreadClaim)
class ThreadClaimAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "thread",
        "business",
        "instance",
        "run",
        "claimed_at",
        "lease_expires_at",
        "ended_at",
        "ended_by",
        "ended_how",
        "end_reason",
    )
    list_filter = (
        ClaimStateFilter,
        "ended_how",
        ThreadOwnerKindFilter,
        ("thread__project__business", admin.RelatedFieldListFilter),
        ("instance", BusinessScopedFilter),
    )
    list_select_related = ("thread__project__business", "instance")
    search_fields = ("thread__name", "run")

    @admin.display(description="business", ordering="thread__project__business__slug")
    def business(self, obj: ThreadClaim) -> str:
        return obj.thread.project.business.slug


# --- the record: messages, events, trail, tasks, decisions -------------------------------


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    # Who to whom and the body, read most, right after the time, so they are on screen at
    # 1440×900 before the columns that scroll (the body's width: `wrapping.html`); the channel
    # as people name it, then the record's bookkeeping.
    list_display = (
        "id",
        "created_at",
        "from_role",
        "to_role",
        "body_preview",
        channel,
        "thread",
        "message_class",
        "business",
        "from_run",
        "in_reply_to_id",
        "reply",
        "model",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
    )
    list_filter = (
        ThreadRowsFilter,
        "message_class",
        # The states from their choices: reading the distinct values would scan the table.
        ("progress__state", admin.ChoicesFieldListFilter),
        ThreadOwnerKindFilter,
        ("business", admin.RelatedFieldListFilter),
        ("thread__project", BusinessScopedFilter),
    )
    list_select_related = ("business", "thread", "progress")
    search_fields = ("body",)

    @admin.display(description="body")
    def body_preview(self, obj: Message) -> str:
        return preview(obj.body)

    @admin.display(description="reply", ordering="progress__state")
    def reply(self, obj: Message) -> str:
        return reply_text(obj)


@admin.register(TurnProgress)
class TurnProgressAdmin(ReadOnlyAdmin):
    """How each turn's reply went (SPEC §7.1): written by runs and stops, read-only here."""

    list_display = (
        "message_id",
        "thread",
        "state",
        "attempts",
        "retry_at",
        "failure",
        "updated_at",
    )
    list_filter = ("state", ("thread__project__business", admin.RelatedFieldListFilter))
    list_select_related = ("thread",)
    search_fields = ("thread__name", "failure")


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "at", "business", "kind", "body")
    list_filter = ("kind", ("business", admin.RelatedFieldListFilter))
    list_select_related = ("business",)


@admin.register(TrailRow)
class TrailRowAdmin(ReadOnlyAdmin):
    # The actor and the text first: the issue found the actor past the page's right edge, and
    # the text, read most, is on screen before the columns that scroll.
    list_display = (
        "id",
        "at",
        "actor",
        "text_preview",
        "kind",
        "thread",
        "thread_name",
        channel,
        "business",
    )
    list_filter = (
        ThreadRowsFilter,
        "kind",
        "via",
        ThreadOwnerKindFilter,
        "tester_visible",
        ("business", admin.RelatedFieldListFilter),
    )
    list_select_related = ("business", "thread")
    search_fields = ("text",)

    @admin.display(description="actor", ordering="actor_role")
    def actor(self, obj: TrailRow) -> str:
        return f"{obj.actor_role} ({obj.actor_run})"

    @admin.display(description="text")
    def text_preview(self, obj: TrailRow) -> str:
        return preview(obj.text)


@admin.register(PurgePermit)
class PurgePermitAdmin(ReadOnlyAdmin):
    """Empty but for a purge in progress: each purge deletes its permit before it commits, so a
    row listed here long after it was made is one nobody should have stored."""

    list_display = ("id", "txid", "created_at")
    show_full_result_count = False


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ("id", "title", "business", "request_id", "created_by_run", "created_at")
    list_filter = (TaskThreadFilter, ("business", admin.RelatedFieldListFilter))
    list_select_related = ("business",)
    search_fields = ("title",)
    date_hierarchy = "created_at"


@admin.register(Decision)
class DecisionAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "created_at",
        "business",
        "thread",
        "from_role",
        "from_run",
        "route_to",
        "body_preview",
    )
    list_filter = (
        "route_to",
        ThreadOwnerKindFilter,
        ("business", admin.RelatedFieldListFilter),
    )
    list_select_related = ("business", "thread")
    search_fields = ("body",)

    @admin.display(description="body")
    def body_preview(self, obj: Decision) -> str:
        return preview(obj.body)


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    """A run's tool calls (SPEC §7.2): append-only records, read-only here."""

    list_display = (
        "id",
        "ended_at",
        "business",
        "thread",
        "turn_id",
        "run",
        "tool",
        "outcome",
        "code",
        "call",
    )
    list_filter = (
        ThreadRowsFilter,
        "outcome",
        "tool",
        ThreadOwnerKindFilter,
        ("business", admin.RelatedFieldListFilter),
    )
    list_select_related = ("business", "thread")
    show_full_result_count = False

    @admin.display(description="call")
    def call(self, obj: Step) -> str:
        return preview(steps.summary(obj))


@admin.register(IdempotentWrite)
class IdempotentWriteAdmin(ReadOnlyAdmin):
    list_display = ("id", "created_at", "business", "owner", "key")
    list_filter = (OwnerKindFilter, ("business", admin.RelatedFieldListFilter))
    list_select_related = ("business",)
    search_fields = ("key",)


# --- the tester's suite runs -------------------------------------------------------------


class SuiteRunStateFilter(EndedStateFilter):
    """Runs still recording cases, or ended."""

    title = "run"
    open_label = "not ended"


@admin.register(SuiteRun)
class SuiteRunAdmin(ReadOnlyAdmin):
    """The tester's conversation-test runs, each with its cases counted; a run's cases are on
    their own list (`cases`), a page at a time, never inline."""

    list_display = ("id", "business", "suite_names", "started_at", "ended_at", "counts_text")
    list_filter = (SuiteRunStateFilter, ("business", admin.RelatedFieldListFilter))
    list_select_related = ("business",)
    date_hierarchy = "started_at"
    fields = (
        "business",
        "suite_names",
        "started_at",
        "ended_at",
        "baseline",
        "counts_text",
        "cases",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[SuiteRun]:
        return suite_runs.with_counts(super().get_queryset(request))

    @admin.display(description="suites")
    def suite_names(self, obj: SuiteRun) -> str:
        return ", ".join(obj.suites)

    @admin.display(description="cases")
    def counts_text(self, obj: SuiteRun) -> str:
        return ", ".join(f"{count} {name}" for name, count in obj.counts.items())

    @admin.display(description="its cases")
    def cases(self, obj: SuiteRun) -> SafeString:
        url = reverse("admin:broker_suitecase_changelist")
        return format_html('<a href="{}?run__id__exact={}">its cases</a>', url, obj.pk)


@admin.register(SuiteCase)
class SuiteCaseAdmin(ReadOnlyAdmin):
    """Each case's result in a run; a run's page links here narrowed to that run."""

    list_display = (
        "id",
        "run",
        "suite",
        "case",
        "instance",
        "verdict",
        "passed",
        "change",
        "created_at",
    )
    list_filter = (
        "verdict",
        "change",
        ("run__business", admin.RelatedFieldListFilter),
    )
    list_select_related = ("run",)
    list_per_page = 100
    search_fields = ("suite", "case")
    date_hierarchy = "created_at"

    @admin.display(description="passed", ordering="passed_runs")
    def passed(self, obj: SuiteCase) -> str:
        return f"{obj.passed_runs}/{obj.runs}"
