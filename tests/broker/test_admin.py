"""Staff admin (SPEC §8): every record inspectable and read-only; R14's instance end."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.db.models import Model, Q
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from broker import actions, idempotency, refusals, selectors, steps
from broker.actions import suite_runs
from broker.actors import Actor
from broker.admin import channel
from broker.models import (
    Business,
    ClaimEnd,
    Decision,
    Event,
    EventKind,
    Instance,
    Message,
    MessageClass,
    Project,
    PurgePermit,
    Step,
    SuiteCase,
    SuiteRun,
    Task,
    Thread,
    ThreadClaim,
    ThreadOpen,
    TrailRow,
    Via,
)
from broker.policy import RoleLists
from broker.refusals import Refusal
from broker.steps import ToolCall
from broker.tools import offered_tools
from tests.broker import factories
from tests.support.businesses import make_business

ADMIN_USERNAME = "admin"  # pytest-django's admin_client signs in as this superuser


@dataclass
class Records:
    """One of every record, across two businesses, each reached through the broker."""

    business: Business
    other: Business
    product: Project
    ops: Project
    human_thread: Thread
    tester_thread: Thread
    other_thread: Thread
    ended_claim: ThreadClaim
    open_claim: ThreadClaim
    suite_run: SuiteRun


@pytest.fixture
def records(business: Business, human: Actor, tester: Actor, assistant_run: Actor) -> Records:
    product = factories.project(human, "product")
    human_thread = factories.thread(human, product, "human work")
    tester_thread = factories.thread(tester, product, "tester check")
    actions.open_thread(human, thread_id=human_thread.pk)
    actions.open_thread(tester, thread_id=tester_thread.pk)
    turn = actions.send_to_thread(human, thread_id=human_thread.pk, body="please summarise")
    tester_turn = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="tester asks")

    claim = factories.claim(assistant_run, human_thread)
    actions.send_message(
        assistant_run,
        to="human",
        body="here is the summary",
        message_class=MessageClass.RESULT,
        in_reply_to=turn.message.pk,
        claim_id=claim.pk,
    )
    assert turn.request is not None
    actions.create_task(assistant_run, claim_id=claim.pk, request_id=turn.request, title="sum")
    ended_claim = actions.end_claim(assistant_run, claim_id=claim.pk)
    open_claim = factories.claim(assistant_run, tester_thread)
    # A tool call of the tester's turn, refused (R15): a step (SPEC §7.2).
    actions.start_turn(assistant_run, claim_id=open_claim.pk, turn_id=tester_turn.message.pk)
    steps.call_tool(
        assistant_run,
        claim_id=open_claim.pk,
        turn_id=tester_turn.message.pk,
        call=ToolCall(call_id="call-1", round=1, name="create_task", arguments='{"title": "t"}'),
        toolbox=offered_tools(RoleLists.of(receive_from=["human"], send_to=["human"])),
    )
    idempotency.remember_answer(
        tester, key="key-1", fingerprint="create thread", produce=lambda: {"thread": 2}
    )
    suite_run = suite_runs.start_suite_run(tester, suites=["smoke"])
    suite_runs.record_suite_case(
        tester,
        run_id=suite_run.pk,
        suite="smoke",
        case="greets",
        instance="assistant",
        verdict="fail",
        passed_runs=0,
        runs=1,
        threads=[tester_thread.pk],
        failures=[{"repeat": 1, "turn": 0, "sent": "hi", "expected": "hello", "actual": "no"}],
    )
    suite_runs.end_suite_run(tester, run_id=suite_run.pk)
    # A purge's permit, as while one runs (it deletes it before it commits).
    PurgePermit.objects.create()

    # A second business whose assistant may route decisions to its human (R19).
    other = make_business("acme", human="grace", cross_role=("human",))
    grace = Actor.human(business_id=other.pk, username="grace")
    ops = factories.project(grace, "ops")
    other_thread = factories.thread(grace, ops, "ops work")
    actions.send_to_thread(grace, thread_id=other_thread.pk, body="decide please")
    other_run = Actor.assistant_run(business_id=other.pk, instance="assistant", run="acme-1")
    other_claim = factories.claim(other_run, other_thread)
    actions.create_decision(other_run, claim_id=other_claim.pk, body="ship it")
    return Records(
        business=business,
        other=other,
        product=product,
        ops=ops,
        human_thread=human_thread,
        tester_thread=tester_thread,
        other_thread=other_thread,
        ended_claim=ended_claim,
        open_claim=open_claim,
        suite_run=suite_run,
    )


def broker_models() -> list[type[Model]]:
    return list(apps.get_app_config("broker").get_models())


def changelist(model: type[Model]) -> str:
    return reverse(f"admin:broker_{model._meta.model_name}_changelist")


def change_url(model: type[Model], pk: int) -> str:
    return reverse(f"admin:broker_{model._meta.model_name}_change", args=[pk])


def listed(client: Client, model: type[Model], query: dict[str, Any]) -> set[int]:
    """The primary keys a changelist shows for `query` (a refused filter would redirect)."""
    response = client.get(changelist(model), query)
    assert response.status_code == 200
    return {row.pk for row in response.context["cl"].result_list}


# --- every model -------------------------------------------------------------------------


def test_admin_registers_every_broker_model() -> None:
    """SPEC §8: every model of the broker is inspectable in admin."""
    assert [m for m in broker_models() if not admin.site.is_registered(m)] == []


@pytest.mark.parametrize("model", broker_models(), ids=lambda m: m.__name__)
def test_admin_changelist_and_change_page_render(
    admin_client: Client, records: Records, model: type[Model]
) -> None:
    rows = model._default_manager.all()
    assert rows.exists(), f"the records fixture stores no {model.__name__}"
    assert admin_client.get(changelist(model)).status_code == 200
    assert admin_client.get(change_url(model, rows.first().pk)).status_code == 200


def test_thread_change_page_shows_messages_opens_and_claims_inline(
    admin_client: Client, records: Records
) -> None:
    response = admin_client.get(change_url(Thread, records.human_thread.pk))
    content = response.content.decode()
    assert "please summarise" in content and "here is the summary" in content
    assert "run-1" in content  # the claim
    inlines = {formset.opts.model for formset in response.context["inline_admin_formsets"]}
    assert inlines == {Message, Step, ThreadOpen, ThreadClaim}
    for formset in response.context["inline_admin_formsets"]:
        assert not formset.has_add_permission
        assert not formset.has_change_permission
        assert not formset.has_delete_permission


def test_thread_change_page_links_to_all_its_messages(
    admin_client: Client, records: Records
) -> None:
    assert listed(admin_client, Message, {"thread__id__exact": records.human_thread.pk}) == set(
        Message.objects.filter(thread=records.human_thread).values_list("pk", flat=True)
    )
    page = admin_client.get(change_url(Thread, records.human_thread.pk)).content.decode()
    assert f"thread__id__exact={records.human_thread.pk}" in page


def test_thread_change_page_links_to_its_trail_rows_and_tasks(
    admin_client: Client, records: Records
) -> None:
    """A thread's page leads to its trail rows and its tasks, each list narrowed to
    exactly that thread's rows."""
    thread = records.human_thread
    page = admin_client.get(change_url(Thread, thread.pk)).content.decode()
    assert f'{changelist(TrailRow)}?thread__id__exact={thread.pk}"' in page
    assert f'{changelist(Task)}?thread={thread.pk}"' in page
    assert listed(admin_client, TrailRow, {"thread__id__exact": thread.pk}) == set(
        TrailRow.objects.filter(thread=thread).values_list("pk", flat=True)
    )
    tasks = set(Task.objects.values_list("pk", flat=True))
    assert tasks and listed(admin_client, Task, {"thread": thread.pk}) == tasks
    assert listed(admin_client, Task, {"thread": records.tester_thread.pk}) == set()
    assert listed(admin_client, Task, {"thread": "x"}) == set()


def test_suite_run_pages_show_counts_and_link_to_the_runs_cases(
    admin_client: Client, records: Records, tester: Actor
) -> None:
    """A run's list shows its suites and counted cases, a page at a time without counting the
    table; its page links to its cases' list narrowed to that run, never inline (STYLE 22)."""
    other = suite_runs.start_suite_run(tester, suites=["billing"])
    suite_runs.record_suite_case(
        tester,
        run_id=other.pk,
        suite="billing",
        case="refunds",
        instance="assistant",
        verdict="pass",
        passed_runs=1,
        runs=1,
    )
    run = records.suite_run
    listing = admin_client.get(changelist(SuiteRun))
    assert {"id", "suite_names", "started_at", "ended_at", "counts_text"} <= set(
        listing.context["cl"].list_display
    )
    run_admin = admin.site.get_model_admin(SuiteRun)
    assert (run_admin.list_per_page, run_admin.show_full_result_count) == (50, False)
    assert "0 pass, 0 flaky, 1 fail, 0 error, 0 regressed" in listing.content.decode()
    page = admin_client.get(change_url(SuiteRun, run.pk))
    assert page.context["inline_admin_formsets"] == []
    assert f'{changelist(SuiteCase)}?run__id__exact={run.pk}"' in page.content.decode()
    assert listed(admin_client, SuiteCase, {"run__id__exact": run.pk}) == set(
        SuiteCase.objects.filter(run=run).values_list("pk", flat=True)
    )
    assert listed(admin_client, SuiteCase, {"run__id__exact": other.pk}) == set(
        SuiteCase.objects.filter(run=other).values_list("pk", flat=True)
    )
    assert admin.site.get_model_admin(SuiteCase).show_full_result_count is False


def test_trail_changelist_shows_actor_kind_thread_and_channel(
    admin_client: Client, records: Records
) -> None:
    """The trail list shows its actor (once past the page's edge) and what the
    Console decides on."""
    response = admin_client.get(changelist(TrailRow))
    columns = response.context["cl"].list_display
    assert {"actor", "kind", "thread", "thread_name"} <= {
        column if isinstance(column, str) else column.__name__ for column in columns
    }
    assert channel in columns
    assert columns.index("actor") < columns.index("text_preview")
    content = response.content.decode()
    assert "human (human-cli)" in content and "assistant (run-1)" in content


@pytest.mark.parametrize(
    ("via", "label"), [(Via.CONSOLE, "Console"), (Via.API, "API"), (Via.CLI, "CLI")]
)
def test_message_changelist_shows_the_body_early_and_the_channel_by_name(
    admin_client: Client, records: Records, human: Actor, via: Via, label: str
) -> None:
    """The body comes right after who wrote it to whom, before the thread, the business and
    R6's sender, and reads at a useful width; `via` reads Console, API or CLI, never the stored
    value, while `from_run` still says `human-cli` in its own column."""
    body = f"sent through {via}"
    actions.send_to_thread(human, thread_id=records.human_thread.pk, body=body, via=via)
    response = admin_client.get(changelist(Message), {"q": body})
    columns = list(response.context["cl"].list_display)
    body_at = columns.index("body_preview")
    assert body_at <= 4, columns
    assert all(body_at < columns.index(late) for late in ("thread", "business", "from_run"))
    assert channel in columns
    content = response.content.decode()
    assert re.search(rf'<td class="field-channel">{label}</td>', content), content
    assert re.search(r'<td class="field-from_run">human-cli</td>', content)
    assert "#result_list td.field-body_preview .preview {\n    min-width: 24em;" in content


def test_message_changelist_leaves_the_channel_of_a_run_empty(
    admin_client: Client, records: Records
) -> None:
    response = admin_client.get(changelist(Message), {"q": "here is the summary"})
    content = response.content.decode()
    assert re.search(r'<td class="field-channel">-</td>', content), content


@pytest.mark.parametrize("page", ["thread", "trail", "messages", "instances"])
def test_admin_pages_wrap_long_bodies_and_keep_dates_on_one_line(
    admin_client: Client, records: Records, page: str
) -> None:
    """A 3,000-character body made a thread page 21,000 px wide and dates took five
    lines: the broker's pages carry the rules that wrap bodies and keep times whole."""
    actions.send_to_thread(
        Actor.human(business_id=records.business.pk, username="ada"),
        thread_id=records.human_thread.pk,
        body="x" * 3000,
    )
    url = {
        "thread": change_url(Thread, records.human_thread.pk),
        "trail": changelist(TrailRow),
        "messages": changelist(Message),
        "instances": changelist(Instance),
    }[page]
    content = admin_client.get(url).content.decode()
    assert "overflow-wrap: anywhere" in content
    assert "td.field-created_at" in content and "white-space: nowrap" in content
    if page == "thread":
        # The body sits where the rules reach it: the inline's body cell, in full.
        assert re.search(r'<td class="field-body">\s*<p>x{3000}</p>', content)


def test_thread_page_cells_are_what_admin_shows_escaped(
    admin_client: Client, records: Records
) -> None:
    """The thread page places its rows without admin's per-field template, and each
    cell is still admin's own: the body escaped, the reply state, the empty value."""
    actions.send_to_thread(
        Actor.human(business_id=records.business.pk, username="ada"),
        thread_id=records.human_thread.pk,
        body="<b>bold</b> & more",
    )
    content = admin_client.get(change_url(Thread, records.human_thread.pk)).content.decode()
    *_, newest = re.findall(r'<tr [^>]*id="messages-\d+">(.*?)</tr>', content, re.DOTALL)
    cells = dict(re.findall(r'<td class="field-(\w+)"><p>(.*?)</p></td>', newest))
    assert cells["body"] == "&lt;b&gt;bold&lt;/b&gt; &amp; more"
    assert cells["reply"] == "pending"
    assert cells["model"] == "-"
    assert "<b>bold</b>" not in content


# --- filters and search ------------------------------------------------------------------

# (model, query, rows expected) — each built from the records.
FilterCase = Callable[[Records], tuple[type[Model], dict[str, Any], Q]]

FILTERS: dict[str, FilterCase] = {
    "thread-owner-tester": lambda r: (Thread, {"owner_kind": "tester"}, Q(owner="tester")),
    "thread-owner-human": lambda r: (Thread, {"owner_kind": "human"}, ~Q(owner="tester")),
    "thread-business": lambda r: (
        Thread,
        {"project__business__id__exact": r.other.pk},
        Q(project__business=r.other),
    ),
    "thread-project": lambda r: (
        Thread,
        {"project__id__exact": r.product.pk},
        Q(project=r.product),
    ),
    "thread-instance": lambda r: (
        Thread,
        {"instance__id__exact": r.other_thread.instance_id},
        Q(instance_id=r.other_thread.instance_id),
    ),
    "thread-search-name": lambda r: (Thread, {"q": "tester check"}, Q(name="tester check")),
    "message-class": lambda r: (
        Message,
        {"message_class__exact": MessageClass.RESULT},
        Q(message_class=MessageClass.RESULT),
    ),
    "message-owner-tester": lambda r: (
        Message,
        {"owner_kind": "tester"},
        Q(thread__owner="tester"),
    ),
    "message-owner-human": lambda r: (
        Message,
        {"owner_kind": "human"},
        Q(thread__isnull=False) & ~Q(thread__owner="tester"),
    ),
    "message-business": lambda r: (
        Message,
        {"business__id__exact": r.business.pk},
        Q(business=r.business),
    ),
    "message-project": lambda r: (
        Message,
        {"thread__project__id__exact": r.ops.pk},
        Q(thread__project=r.ops),
    ),
    "message-search-text": lambda r: (Message, {"q": "summary"}, Q(body__icontains="summary")),
    "event-kind": lambda r: (
        Event,
        {"kind__exact": EventKind.HUMAN_INPUT},
        Q(kind=EventKind.HUMAN_INPUT),
    ),
    "event-business": lambda r: (Event, {"business__id__exact": r.other.pk}, Q(business=r.other)),
    "claim-open": lambda r: (ThreadClaim, {"state": "open"}, Q(ended_at__isnull=True)),
    "claim-ended": lambda r: (ThreadClaim, {"state": "ended"}, Q(ended_at__isnull=False)),
    "claim-ended-how": lambda r: (
        ThreadClaim,
        {"ended_how__exact": ClaimEnd.DONE},
        Q(ended_how=ClaimEnd.DONE),
    ),
    "claim-owner-tester": lambda r: (
        ThreadClaim,
        {"owner_kind": "tester"},
        Q(thread__owner="tester"),
    ),
    "claim-business": lambda r: (
        ThreadClaim,
        {"thread__project__business__id__exact": r.business.pk},
        Q(thread__project__business=r.business),
    ),
    "open-owner-tester": lambda r: (ThreadOpen, {"owner_kind": "tester"}, Q(by="tester")),
    "trail-owner-tester": lambda r: (
        TrailRow,
        {"owner_kind": "tester"},
        Q(thread__owner="tester"),
    ),
    "project-business": lambda r: (
        Project,
        {"business__id__exact": r.other.pk},
        Q(business=r.other),
    ),
}


@pytest.mark.parametrize("case", FILTERS.values(), ids=FILTERS.keys())
def test_admin_filter_narrows_list_to_matching_rows(
    admin_client: Client, records: Records, case: FilterCase
) -> None:
    model, query, expected = case(records)
    every = set(model._default_manager.values_list("pk", flat=True))
    matching = set(model._default_manager.filter(expected).values_list("pk", flat=True))
    assert matching and matching != every, "the case must narrow the list"
    assert listed(admin_client, model, query) == matching


# --- read-only, superusers included ------------------------------------------------------

APPEND_ONLY = (Message, Event, ThreadOpen, TrailRow, Decision)
# Everything a forged form might try to rewrite, whichever model it is posted to.
FORGED = {
    "body": "forged",
    "name": "forged",
    "owner": "tester",
    "by": "forged",
    "text": "forged",
    "kind": EventKind.TASK_CREATED,
    "human": "forged",
    "title": "forged",
    "run": "forged",
    "_save": "Save",
}


def stored(model: type[Model]) -> list[dict[str, Any]]:
    return list(model._default_manager.order_by("pk").values())


@pytest.mark.parametrize("model", broker_models(), ids=lambda m: m.__name__)
def test_admin_change_page_offers_no_save_or_delete(
    admin_client: Client, records: Records, model: type[Model]
) -> None:
    """Append-only rows (and every other row: see docs/decisions/admin.md) are shown read-only."""
    row = model._default_manager.first()
    response = admin_client.get(change_url(model, row.pk))
    content = response.content.decode()
    assert response.context["has_change_permission"] is False
    assert response.context["has_delete_permission"] is False
    for control in ('name="_save"', 'name="_continue"', 'name="_addanother"', "deletelink"):
        assert control not in content


@pytest.mark.parametrize("model", broker_models(), ids=lambda m: m.__name__)
def test_admin_forged_change_delete_or_add_is_refused_403(
    admin_client: Client, records: Records, model: type[Model]
) -> None:
    """A superuser's forged POST changes nothing: no change, delete or add permission."""
    before = stored(model)
    row = model._default_manager.first()
    name = model._meta.model_name
    delete_url = reverse(f"admin:broker_{name}_delete", args=[row.pk])
    add_url = reverse(f"admin:broker_{name}_add")

    assert admin_client.post(change_url(model, row.pk), FORGED).status_code == 403
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    assert admin_client.get(delete_url).status_code == 403
    assert admin_client.post(add_url, FORGED).status_code == 403
    assert stored(model) == before


@pytest.mark.parametrize("model", broker_models(), ids=lambda m: m.__name__)
def test_admin_changelist_offers_no_delete_selected(
    admin_client: Client, records: Records, model: type[Model]
) -> None:
    before = stored(model)
    response = admin_client.get(changelist(model))
    form = response.context["action_form"]
    offered = [choice for choice, _ in form.fields["action"].choices] if form else []
    assert "delete_selected" not in offered

    pks = [row[model._meta.pk.attname] for row in before]
    forged = {"action": "delete_selected", "_selected_action": pks, "post": "yes"}
    admin_client.post(changelist(model), forged)
    assert stored(model) == before


@pytest.mark.parametrize("model", APPEND_ONLY, ids=lambda m: m.__name__)
def test_admin_append_only_model_grants_view_only(rf: Any, model: type[Model]) -> None:
    """Append-only models: no add, change or delete even for a superuser; view stays."""
    request = rf.get("/")
    request.user = User(username="root", is_staff=True, is_superuser=True)
    model_admin = admin.site.get_model_admin(model)
    assert model_admin.has_view_permission(request)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)
    assert "delete_selected" not in model_admin.get_actions(request)


def test_admin_staff_with_view_permission_reads_but_cannot_change(
    client: Client, records: Records
) -> None:
    staff = User.objects.create_user("viewer", password="pw-viewer-1", is_staff=True)
    staff.user_permissions.add(
        Permission.objects.get(codename="view_thread"),
        Permission.objects.get(codename="change_thread"),
    )
    client.force_login(staff)
    assert client.get(changelist(Thread)).status_code == 200
    before = stored(Thread)
    assert client.post(change_url(Thread, records.human_thread.pk), FORGED).status_code == 403
    assert stored(Thread) == before
    assert client.get(changelist(Message)).status_code == 403  # no view permission there


# --- R14: ending an instance -------------------------------------------------------------


def end_instance_action(client: Client, instance: Instance) -> Any:
    return client.post(
        changelist(Instance),
        {"action": "end_instances", "_selected_action": [instance.pk]},
        follow=True,
    )


def test_admin_end_instance_ends_tester_and_human_claims_alike(
    admin_client: Client,
    business: Business,
    human: Actor,
    tester: Actor,
    assistant_run: Actor,
) -> None:
    """R14: the staff action ends every claim the instance holds, the tester's included."""
    product = factories.project(human)
    threads = [factories.thread(human, product, "mine"), factories.thread(tester, product, "t")]
    for side, thread in zip((human, tester), threads, strict=True):
        actions.send_to_thread(side, thread_id=thread.pk, body="work")
    claims = [actions.open_claim(assistant_run, thread_id=thread.pk) for thread in threads]
    assert all(claims)
    instance = Instance.objects.get(business=business, name="assistant")

    response = end_instance_action(admin_client, instance)

    assert response.status_code == 200
    notes = [str(m) for m in response.context["messages"]]
    assert notes == ["Ended 1 instance(s); 2 claim(s) ended."]
    ended = ThreadClaim.objects.filter(pk__in=[c.pk for c in claims if c])
    assert {(c.thread.owner, c.ended_by) for c in ended} == {
        ("ada", ADMIN_USERNAME),
        ("tester", ADMIN_USERNAME),
    }
    assert all(c.ended_at and c.end_reason == f"instance ended by {ADMIN_USERNAME}" for c in ended)
    event = Event.objects.get(kind=EventKind.INSTANCE_ENDED)
    assert (event.body["by"], event.body["instance"]) == (ADMIN_USERNAME, "assistant")
    # The trail shows each claim's end and the instance end, labelled with the staff actor.
    trail = [(row.thread_id, row.actor_role, row.text) for row in TrailRow.objects.order_by("pk")]
    assert (
        threads[0].pk,
        "staff",
        f"staff to assistant: claim of run-1 ended (instance ended by {ADMIN_USERNAME})",
    ) in trail
    assert (
        threads[1].pk,
        "staff",
        f"staff to assistant: claim of run-1 ended (instance ended by {ADMIN_USERNAME})",
    ) in trail
    assert trail[-1] == (
        None,
        "staff",
        f"staff to assistant: instance ended by {ADMIN_USERNAME}; 2 claim(s) ended",
    )
    # R20: the human's trail shows all of it; the tester's only its own thread's claim end.
    human_view = selectors.read_trail(human)
    tester_view = selectors.read_trail(tester)
    assert human_view[-1].text.endswith("2 claim(s) ended")
    assert [r.thread_id for r in tester_view if "ended" in r.text] == [threads[1].pk]


def test_admin_end_instance_refusal_is_an_error_message_not_500(
    admin_client: Client, business: Business, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(actor: Actor, *, instance: str) -> list[ThreadClaim]:
        raise Refusal(refusals.NOT_FOUND, f"No instance named {instance!r}.")

    monkeypatch.setattr(actions, "end_instance", refuse)
    instance = Instance.objects.get(business=business, name="assistant")

    response = end_instance_action(admin_client, instance)

    assert response.status_code == 200
    notes = [(m.level_tag, str(m)) for m in response.context["messages"]]
    assert notes == [("error", "assistant: not-found: No instance named 'assistant'.")]
    assert not Event.objects.filter(kind=EventKind.INSTANCE_ENDED).exists()


def test_admin_end_instance_needs_change_instance_permission(
    client: Client, business: Business, human: Actor, assistant_run: Actor
) -> None:
    """A staff member who may only view instances is not offered the action, nor can forge it."""
    thread = factories.thread(human, factories.project(human), "mine")
    actions.send_to_thread(human, thread_id=thread.pk, body="work")
    claim = factories.claim(assistant_run, thread)
    viewer = User.objects.create_user("viewer", password="pw-viewer-1", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_instance"))
    client.force_login(viewer)
    instance = Instance.objects.get(business=business, name="assistant")

    page = client.get(changelist(Instance))
    assert page.context["action_form"] is None
    end_instance_action(client, instance)

    claim.refresh_from_db()
    assert claim.ended_at is None


# --- flat query counts -------------------------------------------------------------------


def add_threads(business: Business, project: Project, *, start: int, count: int) -> None:
    instance = Instance.objects.get(business=business, name="assistant")
    Thread.objects.bulk_create(
        Thread(
            project=project,
            name=f"thread {n}",
            owner="tester" if n % 2 else business.human,
            instance=instance,
        )
        for n in range(start, start + count)
    )


def add_messages(business: Business, thread: Thread, *, count: int) -> None:
    Message.objects.bulk_create(
        Message(
            business=business,
            thread=thread,
            from_role="human",
            from_run="human-cli",
            to_role="assistant",
            message_class=MessageClass.REQUEST,
            body=f"turn {n}",
        )
        for n in range(count)
    )


def queries_of(client: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_admin_thread_changelist_query_count_flat_from_10_to_1000_threads(
    admin_client: Client,
    business: Business,
    human: Actor,
    assistant_run: Actor,
    django_assert_max_num_queries: Any,
) -> None:
    project = factories.project(human)
    add_threads(business, project, start=0, count=10)
    held = Thread.objects.order_by("pk").first()
    actions.send_to_thread(human, thread_id=held.pk, body="work")
    factories.claim(assistant_run, held)
    at_ten = queries_of(admin_client, changelist(Thread))

    add_threads(business, project, start=10, count=990)

    with django_assert_max_num_queries(at_ten):
        assert admin_client.get(changelist(Thread)).status_code == 200


@pytest.mark.parametrize(
    "model", [Message, TrailRow, ThreadClaim, ThreadOpen, Event, SuiteRun, SuiteCase]
)
def test_admin_changelist_query_count_flat_as_rows_grow(
    admin_client: Client,
    business: Business,
    human: Actor,
    tester: Actor,
    assistant_run: Actor,
    django_assert_max_num_queries: Any,
    model: type[Model],
) -> None:
    """No list column reads per row: ten times the rows, no more queries."""
    project = factories.project(human)

    def grow(count: int) -> None:
        for n in range(count):
            side = tester if n % 2 else human
            thread = factories.thread(side, project, f"{model.__name__} {count} {n}")
            actions.open_thread(side, thread_id=thread.pk)
            actions.send_to_thread(side, thread_id=thread.pk, body="work")
            claim = factories.claim(assistant_run, thread)
            actions.end_claim(assistant_run, claim_id=claim.pk)
            run = suite_runs.start_suite_run(tester, suites=["smoke"])
            suite_runs.record_suite_case(
                tester,
                run_id=run.pk,
                suite="smoke",
                case=f"{count} {n}",
                instance="assistant",
                verdict="pass",
                passed_runs=1,
                runs=1,
                threads=[thread.pk] if side is tester else [],
            )

    grow(3)
    at_few = queries_of(admin_client, changelist(model))
    grow(30)
    assert model._default_manager.count() > 30
    with django_assert_max_num_queries(at_few):
        assert admin_client.get(changelist(model)).status_code == 200


def test_reply_usage_sums_tokens_per_instance_and_day(
    admin_client: Client, business, human, assistant_run
) -> None:
    """SPEC §7.1: admin sums each instance's usage per day from the replies' records."""
    from broker import actions
    from broker.replies import ReplyRecord
    from tests.broker import factories

    thread = factories.thread(human, factories.project(human), "usage")
    claim = factories.claim(assistant_run, thread)
    for prompt, completion, finish in ((10, 5, "stop"), (20, 7, "length")):
        turn = actions.send_to_thread(human, thread_id=thread.pk, body="hi").message
        actions.send_message(
            assistant_run,
            to="human",
            message_class="RESULT",
            in_reply_to=turn.pk,
            claim_id=claim.pk,
            body="reply",
            record=ReplyRecord(
                model="m", finish_reason=finish, prompt_tokens=prompt, completion_tokens=completion
            ),
        )
    page = admin_client.get(reverse("admin:broker_instance_usage"))
    assert page.status_code == 200
    [row] = page.context["rows"]
    assert (row["from_role"], row["reply_count"], row["cut_off"]) == ("assistant", 2, 1)
    assert (row["prompt_tokens"], row["completion_tokens"]) == (30, 12)
    assert "<td>30</td>" in page.content.decode()
    listing = admin_client.get(reverse("admin:broker_instance_changelist")).content.decode()
    assert reverse("admin:broker_instance_usage") in listing


def test_reply_usage_is_for_staff_only(client: Client) -> None:
    page = client.get(reverse("admin:broker_instance_usage"))
    assert page.status_code == 302 and "/login/" in page["Location"]
