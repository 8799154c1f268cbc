"""The inbox's order and pins: threads by last activity, pinned ones first, paged by `below`;
the pin verb on both sides (R1, R16, R20, R22); and the side's own default project for a
thread made with none named."""

from __future__ import annotations

import pytest

from broker import actions, policy, refusals, selectors
from broker.actors import Actor
from broker.models import Creator, Project, Thread, TrailKind, TrailRow
from broker.refusals import Refusal
from tests.broker import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def product(human: Actor) -> Project:
    return factories.project(human)


def by_activity(actor: Actor, **kwargs: object) -> list[str]:
    threads = selectors.list_threads(actor, order=selectors.BY_ACTIVITY, **kwargs)  # type: ignore[arg-type]
    return [thread.name for thread in threads]


def threads_of(actor: Actor, product: Project, *names: str) -> dict[str, Thread]:
    return {name: factories.thread(actor, product, name) for name in names}


# --- last activity -------------------------------------------------------------------------


def test_a_reply_moves_its_thread_to_the_top(
    human: Actor, assistant_run: Actor, product: Project
) -> None:
    """The newest activity first: a thread made last leads until a reply lands in an older one,
    and the owner's own turn moves its thread up as well."""
    threads = threads_of(human, product, "a", "b", "c")
    turn = actions.send_to_thread(human, thread_id=threads["a"].pk, body="hi").message
    assert by_activity(human) == ["a", "c", "b"]
    actions.send_to_thread(human, thread_id=threads["b"].pk, body="and you")
    assert by_activity(human) == ["b", "a", "c"]
    factories.reply(assistant_run, turn)
    assert by_activity(human) == ["a", "b", "c"]


def test_last_activity_is_the_newest_message_or_the_creation(
    human: Actor, assistant_run: Actor, product: Project
) -> None:
    """Stored where a thread is made and where each message is stored: the newest message's
    time, else the thread's creation; a claim's end is no activity."""
    threads = threads_of(human, product, "talked", "quiet")
    turn = actions.send_to_thread(human, thread_id=threads["talked"].pk, body="hi").message
    answer = factories.reply(assistant_run, turn)
    talked = Thread.objects.get(pk=threads["talked"].pk)
    quiet = Thread.objects.get(pk=threads["quiet"].pk)
    assert talked.active_at == answer.created_at
    assert quiet.active_at is not None
    assert abs((quiet.active_at - quiet.created_at).total_seconds()) < 1


def test_rename_archive_and_pin_are_not_activity(human: Actor, product: Project) -> None:
    threads = threads_of(human, product, "a", "b")
    actions.rename_thread(human, thread_id=threads["a"].pk, name="renamed")
    actions.archive_thread(human, thread_id=threads["a"].pk, archived=True)
    actions.archive_thread(human, thread_id=threads["a"].pk, archived=False)
    actions.pin_thread(human, thread_id=threads["a"].pk, pinned=True)
    actions.pin_thread(human, thread_id=threads["a"].pk, pinned=False)
    assert by_activity(human) == ["b", "renamed"]
    assert Thread.objects.get(pk=threads["a"].pk).active_at == threads["a"].active_at


def test_the_activity_order_lists_only_the_actors_threads(
    human: Actor, tester: Actor, product: Project
) -> None:
    """R3 in the inbox's order too: the other side's threads and their activity never show."""
    mine = threads_of(human, product, "mine")
    probe = threads_of(tester, product, "probe")
    actions.send_to_thread(tester, thread_id=probe["probe"].pk, body="busy")
    actions.pin_thread(tester, thread_id=probe["probe"].pk, pinned=True)
    assert (by_activity(human), by_activity(tester)) == (["mine"], ["probe"])
    actions.send_to_thread(human, thread_id=mine["mine"].pk, body="mine too")
    assert (by_activity(human), by_activity(tester)) == (["mine"], ["probe"])


def test_search_and_the_archive_keep_the_activity_order(human: Actor, product: Project) -> None:
    threads = threads_of(human, product, "plan a", "plan b", "other")
    actions.send_to_thread(human, thread_id=threads["plan a"].pk, body="hi")
    assert by_activity(human, query="plan") == ["plan a", "plan b"]
    for name in ("plan b", "plan a"):
        actions.archive_thread(human, thread_id=threads[name].pk, archived=True)
    assert by_activity(human, archived=True) == ["plan a", "plan b"]


# --- pins --------------------------------------------------------------------------------


def test_pinned_threads_come_first_each_part_by_activity(human: Actor, product: Project) -> None:
    threads = threads_of(human, product, "a", "b", "c", "d")
    actions.pin_thread(human, thread_id=threads["a"].pk, pinned=True)
    actions.pin_thread(human, thread_id=threads["c"].pk, pinned=True)
    assert by_activity(human) == ["c", "a", "d", "b"]
    actions.send_to_thread(human, thread_id=threads["a"].pk, body="hi")
    actions.send_to_thread(human, thread_id=threads["b"].pk, body="hi")
    assert by_activity(human) == ["a", "c", "b", "d"]
    actions.pin_thread(human, thread_id=threads["a"].pk, pinned=False)
    assert by_activity(human) == ["c", "b", "a", "d"]
    assert [t.pinned for t in selectors.list_threads(human, order=selectors.BY_ACTIVITY)] == [
        True,
        False,
        False,
        False,
    ]


@pytest.mark.parametrize("who", ["human", "tester"])
def test_pin_own_thread_writes_one_labelled_trail_row(
    request: pytest.FixtureRequest, product: Project, who: str
) -> None:
    """Each side pins its own thread: one row each way, labelled like the side's turns (R16);
    the tester sees the row of its own thread only (R20). Asking again writes nothing."""
    actor: Actor = request.getfixturevalue(who)
    thread = factories.thread(actor, product, "t")
    for pinned in (True, True, False, False):
        changed = actions.pin_thread(actor, thread_id=thread.pk, pinned=pinned)
        assert changed.pinned is pinned
        assert Thread.objects.get(pk=thread.pk).pinned is pinned
    rows = list(TrailRow.objects.order_by("pk"))
    assert [(row.kind, row.thread_id, row.from_role, row.to_role) for row in rows] == [
        (TrailKind.THREAD_PINNED, thread.pk, actor.role, "assistant"),
        (TrailKind.THREAD_UNPINNED, thread.pk, actor.role, "assistant"),
    ]
    assert [row.text for row in rows] == [
        f"{actor.role} to assistant: pinned the thread",
        f"{actor.role} to assistant: unpinned the thread",
    ]
    assert {row.tester_visible for row in rows} == {who == "tester"}


def test_the_humans_pin_stays_out_of_the_testers_trail(
    human: Actor, tester: Actor, product: Project
) -> None:
    """R20: the human reads the tester's pin, labelled; the tester never reads the human's."""
    mine = factories.thread(human, product, "mine")
    probe = factories.thread(tester, product, "probe")
    actions.pin_thread(human, thread_id=mine.pk, pinned=True)
    actions.pin_thread(tester, thread_id=probe.pk, pinned=True)
    assert [row.text for row in selectors.read_trail(human)] == [
        "human to assistant: pinned the thread",
        "tester to assistant: pinned the thread",
    ]
    assert [row.thread_id for row in selectors.read_trail(tester)] == [probe.pk]


@pytest.mark.parametrize(("who", "owner"), [("human", "tester"), ("tester", "human")])
def test_pin_of_the_other_sides_thread_is_thread_not_owned(
    request: pytest.FixtureRequest, product: Project, who: str, owner: str
) -> None:
    """R1: neither side pins the other's thread, through `pin_thread` or `change_thread`;
    nothing is written."""
    actor: Actor = request.getfixturevalue(who)
    theirs = factories.thread(request.getfixturevalue(owner), product, "theirs")
    for call in (
        lambda: actions.pin_thread(actor, thread_id=theirs.pk, pinned=True),
        lambda: actions.change_thread(actor, thread_id=theirs.pk, pinned=True),
    ):
        with pytest.raises(Refusal) as refusal:
            call()
        assert refusal.value.code == refusals.THREAD_NOT_OWNED
    assert Thread.objects.get(pk=theirs.pk).pinned_at is None
    assert not TrailRow.objects.exists()


def test_change_thread_renames_and_pins_in_one_transaction(
    human: Actor, tester: Actor, product: Project
) -> None:
    """A refused rename (R18: the name is the tester's) pins nothing either."""
    mine = factories.thread(human, product, "mine")
    factories.thread(tester, product, "taken")
    with pytest.raises(Refusal) as refusal:
        actions.change_thread(human, thread_id=mine.pk, name="taken", pinned=True)
    assert refusal.value.code == refusals.THREAD_EXISTS
    assert (Thread.objects.get(pk=mine.pk).pinned, TrailRow.objects.exists()) == (False, False)
    changed = actions.change_thread(human, thread_id=mine.pk, name="kept", pinned=True)
    assert (changed.name, changed.pinned) == ("kept", True)


def test_the_tester_may_pin_only_while_pins_are_on_its_list(
    tester: Actor, product: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R22: `thread.pin` is a verb of its own on the tester's list; off it, refused."""
    probe = factories.thread(tester, product, "probe")
    monkeypatch.setattr(policy, "TESTER_VERBS", policy.TESTER_VERBS - {"thread.pin"})
    with pytest.raises(Refusal) as refusal:
        actions.change_thread(tester, thread_id=probe.pk, pinned=True)
    assert refusal.value.code == refusals.TESTER_REFUSED
    assert Thread.objects.get(pk=probe.pk).pinned is False


# --- paging the inbox's order ------------------------------------------------------------


def test_below_pages_through_pinned_threads_into_the_others(human: Actor, product: Project) -> None:
    threads = threads_of(human, product, *"abcdefg")
    for name in "be":
        actions.pin_thread(human, thread_id=threads[name].pk, pinned=True)
    actions.send_to_thread(human, thread_id=threads["a"].pk, body="hi")
    whole = by_activity(human)
    assert whole == ["e", "b", "a", "g", "f", "d", "c"]
    for size in (1, 2, 3):
        pages: list[str] = []
        below = None
        while True:
            page = by_activity(human, limit=size, below=below)
            if not page:
                break
            pages += page
            below = threads[page[-1]].pk
        assert pages == whole


def test_below_another_sides_or_a_missing_thread_is_invalid(
    human: Actor, tester: Actor, product: Project
) -> None:
    """R1, R3: the cursor must be one of the actor's threads; the other side's and a missing
    one get the same answer, so it tells nothing."""
    probe = factories.thread(tester, product, "probe")
    for below in (probe.pk, probe.pk + 100):
        with pytest.raises(Refusal) as refusal:
            by_activity(human, below=below)
        assert (refusal.value.code, refusal.value.detail) == (
            refusals.INVALID,
            "below must be one of your threads.",
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"order": "newest"},
        {"order": selectors.BY_ACTIVITY, "after": 1},
        {"order": selectors.BY_ACTIVITY, "before": 1},
        {"order": selectors.BY_ID, "below": 1},
    ],
)
def test_the_orders_take_their_own_cursors_only(
    human: Actor, product: Project, kwargs: dict[str, object]
) -> None:
    factories.thread(human, product, "t")
    with pytest.raises(Refusal) as refusal:
        selectors.list_threads(human, **kwargs)  # type: ignore[arg-type]
    assert refusal.value.code == refusals.INVALID


# --- the default project -----------------------------------------------------------------


def test_a_thread_with_no_project_goes_to_the_sides_own_default_project(
    human: Actor, tester: Actor
) -> None:
    """Made on first use by its side and found afterwards: the human's `Chats`, the tester's
    `Tester chats`."""
    first = actions.create_thread(human, project_id=None, name="one")
    second = actions.create_thread(human, project_id=None, name="two")
    probe = actions.create_thread(tester, project_id=None, name="probe")
    projects = {p.name: p.creator for p in Project.objects.all()}
    assert projects == {"Chats": Creator.HUMAN, "Tester chats": Creator.TESTER}
    assert first.project_id == second.project_id == Project.objects.get(name="Chats").pk
    assert probe.project_id == Project.objects.get(name="Tester chats").pk


@pytest.mark.parametrize(("taker", "who"), [("tester", "human"), ("human", "tester")])
def test_a_default_projects_name_the_other_side_took_is_passed_over(
    request: pytest.FixtureRequest, taker: str, who: str
) -> None:
    """A `Chats` the tester made (as the Console once did) never takes the human's chat: the
    human's default is the next name, its own; the same the other way."""
    name = "Chats" if who == "human" else "Tester chats"
    factories.project(request.getfixturevalue(taker), name)
    thread = actions.create_thread(request.getfixturevalue(who), project_id=None, name="t")
    assert (thread.project.name, thread.project.creator) == (f"{name} (2)", who)
    again = actions.create_thread(request.getfixturevalue(who), project_id=None, name="t2")
    assert again.project_id == thread.project_id
