"""The command line (SPEC §8): the human's and, with `--tester`, the tester's chat verbs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from broker import actions, refusals
from broker.actors import Actor
from broker.models import Business, Message, Project, Thread, ThreadOpen
from chat.management import cli_actor, cli_stream
from chat.management.cli_format import message_line
from chat.management.commands import follow
from tests.broker import factories
from tests.support.businesses import make_business
from tests.support.waits import wait_for

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, stdin: str | None = None) -> str:
    """A command's standard output; refusals raise CommandError as at the shell."""
    out = io.StringIO()
    options: dict[str, Any] = {"stdout": out, "stderr": io.StringIO()}
    if stdin is not None:
        options["stdin"] = io.StringIO(stdin)
    call_command(*args, **options)
    return out.getvalue()


def refused(*args: str) -> tuple[int, str]:
    """Exit status and code of a refused command."""
    with pytest.raises(CommandError) as caught:
        run(*args)
    return caught.value.returncode, str(caught.value).split(":")[0]


def json_lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines()]


@pytest.fixture
def product(human: Actor) -> Project:
    return factories.project(human, "product")


@pytest.fixture
def human_thread(human: Actor, product: Project) -> Thread:
    return factories.thread(human, product, "human work")


@pytest.fixture
def tester_thread(tester: Actor, product: Project) -> Thread:
    return factories.thread(tester, product, "tester check")


# --- the reply source --------------------------------------------------------------------


@pytest.fixture
def answering_assistant(business: Business) -> Iterator[None]:
    """The assistant that answers the CLI's turns: the real runner, with the offline backend."""
    from runner.backends.offline import OfflineBackend
    from runner.service import Runner

    runner = Runner(backend=OfflineBackend(), business_id=business.pk, concurrency=2)
    runner.start()
    yield
    assert runner.stop(timeout=10)


def in_background(call: Callable[[], Any], *, after: threading.Event) -> threading.Thread:
    """Run `call` on its own connection once `after` is set."""

    def work() -> None:
        try:
            after.wait(timeout=10)
            call()
        finally:
            connection.close()

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    return worker


# --- threads (R3) ------------------------------------------------------------------------


def test_threads_tester_lists_only_tester_threads(
    human_thread: Thread, tester_thread: Thread
) -> None:
    """T1 (R3): `threads --tester` lists the tester's threads and none of the human's."""
    listed = json.loads(run("threads", "--tester", "--json"))["threads"]
    assert [(t["id"], t["owner"]) for t in listed] == [(tester_thread.pk, "tester")]


def test_threads_human_lists_only_human_threads(
    human_thread: Thread, tester_thread: Thread
) -> None:
    """T1 (R3): the human's list leaves tester threads out entirely."""
    assert run("threads").splitlines() == [
        f"#{human_thread.pk} human work (project product, assistant, owner ada)"
    ]
    listed = json.loads(run("threads", "--json"))["threads"]
    assert [t["id"] for t in listed] == [human_thread.pk]


def test_threads_project_filter_by_name_or_id(
    human: Actor, product: Project, human_thread: Thread
) -> None:
    other = factories.project(human, "other")
    elsewhere = factories.thread(human, other, "elsewhere")
    by_name = json.loads(run("threads", "--project", "other", "--json"))["threads"]
    by_id = json.loads(run("threads", "--project", str(product.pk), "--json"))["threads"]
    assert [t["id"] for t in by_name] == [elsewhere.pk]
    assert [t["id"] for t in by_id] == [human_thread.pk]
    assert refused("threads", "--project", "missing") == (2, refusals.NOT_FOUND)


# --- thread create, open, read -----------------------------------------------------------


def test_thread_create_tester_owns_thread(product: Project) -> None:
    """T1 (R2): a thread the tester creates on the command line is owned by `tester`."""
    created = json.loads(
        run("thread", "create", "--project", "product", "--name", "probe", "--tester", "--json")
    )["thread"]
    assert (created["owner"], created["instance"], created["project"]) == (
        "tester",
        "assistant",
        product.pk,
    )
    assert Thread.objects.get(pk=created["id"]).owner == "tester"


def test_thread_create_human_owns_thread_and_prints_it(product: Project) -> None:
    line = run(
        "thread", "create", "--project", "product", "--name", "mine", "--instance", "assistant"
    )
    thread = Thread.objects.get(name="mine")
    assert thread.owner == "ada"
    assert line.strip() == f"#{thread.pk} mine (project product, assistant, owner ada)"


def test_thread_create_name_the_human_used_refuses_thread_exists(human_thread: Thread) -> None:
    """R18: the accepted leak, and nothing more about the human's thread."""
    assert refused(
        "thread", "create", "--project", "product", "--name", "human work", "--tester"
    ) == (2, refusals.THREAD_EXISTS)


def test_thread_open_tester_stores_by_tester(tester_thread: Thread) -> None:
    """T2 (R2): the tester's open stores `by 'tester'`."""
    opened = json.loads(run("thread", "open", str(tester_thread.pk), "--tester", "--json"))
    assert opened["open"]["by"] == "tester"
    assert list(ThreadOpen.objects.values_list("by", flat=True)) == ["tester"]


def test_thread_read_prints_messages_oldest_first(
    human: Actor, assistant_run: Actor, human_thread: Thread
) -> None:
    first = actions.send_to_thread(human, thread_id=human_thread.pk, body="one").message
    second = actions.send_to_thread(human, thread_id=human_thread.pk, body="two\nlines").message
    assert run("thread", "read", str(human_thread.pk)).splitlines() == [
        f"#{first.pk} human → assistant: one",
        f"#{second.pk} human → assistant: two",
        "    lines",
    ]
    after = json.loads(
        run("thread", "read", str(human_thread.pk), "--after", str(first.pk), "--json")
    )
    assert [(m["id"], m["from_run"], m["class"]) for m in after["messages"]] == [
        (second.pk, "human-cli", "REQUEST")
    ]


def test_thread_read_tester_on_human_thread_refuses_thread_not_owned(
    human_thread: Thread,
) -> None:
    """T1 (R1): the tester reading the human's thread is refused, exit status 2."""
    assert refused("thread", "read", str(human_thread.pk), "--tester") == (
        2,
        refusals.THREAD_NOT_OWNED,
    )


def test_thread_open_human_on_tester_thread_refuses_thread_not_owned(
    tester_thread: Thread,
) -> None:
    """T1 (R1): and the human on the tester's."""
    assert refused("thread", "open", str(tester_thread.pk)) == (2, refusals.THREAD_NOT_OWNED)
    assert not ThreadOpen.objects.exists()


def test_thread_read_escapes_terminal_control_characters(
    human: Actor, human_thread: Thread
) -> None:
    """A body cannot drive the reader's terminal: escape sequences are printed visibly."""
    actions.send_to_thread(human, thread_id=human_thread.pk, body="red \x1b[31mtext")
    assert "red \\x1b[31mtext" in run("thread", "read", str(human_thread.pk))


# --- who acts (L5) -----------------------------------------------------------------------


def test_cli_tester_is_built_without_the_human(
    tester_thread: Thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """L5: `--tester` builds the tester on its own path; the human's is never touched."""

    def forbidden(**kwargs: Any) -> Actor:
        raise AssertionError("the tester was built through the human")

    monkeypatch.setattr(cli_actor, "access_human_actor", forbidden)
    listed = json.loads(run("threads", "--tester", "--json"))["threads"]
    assert [t["owner"] for t in listed] == ["tester"]


def test_cli_human_is_built_without_the_tester(
    human_thread: Thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """L5: the other way round."""

    def forbidden(**kwargs: Any) -> Actor:
        raise AssertionError("the human was built through the tester")

    monkeypatch.setattr(cli_actor, "access_tester_actor", forbidden)
    listed = json.loads(run("threads", "--json"))["threads"]
    assert [t["owner"] for t in listed] == ["ada"]


def test_cli_user_names_the_human_of_another_business(
    human_thread: Thread, other_business: Business
) -> None:
    """With several businesses `--user` picks the human; without it the command asks."""
    grace = Actor.human(business_id=other_business.pk, username="grace")
    theirs = factories.thread(grace, factories.project(grace, "ops"), "ops work")
    listed = json.loads(run("threads", "--user", "grace", "--json"))["threads"]
    assert [t["id"] for t in listed] == [theirs.pk]
    with pytest.raises(CommandError, match="--user") as caught:
        run("threads")
    assert caught.value.returncode == 1


def test_cli_business_names_the_tester_of_another_business(
    tester_thread: Thread, other_business: Business
) -> None:
    other_tester = Actor.tester(business_id=other_business.pk)
    theirs = factories.thread(other_tester, factories.project(other_tester, "ops"), "probe")
    listed = json.loads(run("threads", "--tester", "--business", "other", "--json"))["threads"]
    assert [t["id"] for t in listed] == [theirs.pk]
    with pytest.raises(CommandError, match="--business") as caught:
        run("threads", "--tester")
    assert caught.value.returncode == 1


@pytest.mark.parametrize(
    ("args", "status", "code"),
    [
        (("--user", "nobody"), 2, refusals.NOT_AUTHENTICATED),
        (("--user", "tester"), 2, refusals.NOT_AUTHENTICATED),
        (("--tester", "--business", "missing"), 2, refusals.NOT_FOUND),
        (("--tester", "--user", "ada"), 1, "--user names a human; --tester acts as the tester."),
        (("--business", "demo"), 1, "--business goes with --tester; name the human with --user."),
    ],
)
def test_cli_actor_options_refused(
    business: Business, args: tuple[str, ...], status: int, code: str
) -> None:
    with pytest.raises(CommandError) as caught:
        run("threads", *args)
    assert caught.value.returncode == status
    assert str(caught.value).startswith(code)


def test_cli_tester_off_refuses_tester_off(db: None) -> None:
    make_business("quiet", human="ada", tester_enabled=False)
    assert refused("threads", "--tester") == (2, refusals.TESTER_OFF)


def test_cli_no_business_asks_to_load_one(db: None) -> None:
    with pytest.raises(CommandError, match="loadbusiness"):
        run("threads")


# --- talk and follow ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_talk_tester_sends_each_line_and_prints_reply(
    tester_thread: Thread, answering_assistant: None
) -> None:
    """T2, T4 through the CLI: the tester's turns are stored as the tester; replies come back."""
    output = run("talk", "--thread", str(tester_thread.pk), "--tester", stdin="hello\n\nagain\n")
    stored = list(Message.objects.filter(thread=tester_thread).order_by("pk"))
    assert [(m.from_role, m.from_run, m.to_role, m.message_class) for m in stored] == [
        ("tester", "tester-cli", "assistant", "REQUEST"),
        ("assistant", stored[1].from_run, "tester", "RESULT"),
        ("tester", "tester-cli", "assistant", "REQUEST"),
        ("assistant", stored[3].from_run, "tester", "RESULT"),
    ]
    assert [m.body for m in stored[::2]] == ["hello", "again"]
    assert [m.in_reply_to_id for m in stored[1::2]] == [stored[0].pk, stored[2].pk]
    # Every message printed once, in order; the reply's text is whatever the assistant said. A
    # turn is printed as it stood then: the runner may already have taken it (`[working]`).
    printed = [line.removesuffix("  [working]") for line in output.splitlines()]
    assert printed == [line for m in stored for line in message_line(m).splitlines()]
    assert output.startswith(f"#{stored[0].pk} tester → assistant: hello")


@pytest.mark.django_db(transaction=True)
def test_talk_human_json_prints_one_object_per_message(
    human_thread: Thread, answering_assistant: None
) -> None:
    """R6, R7: the human's turn is `human-cli` with a request; one JSON object per line."""
    lines = json_lines(run("talk", "--thread", str(human_thread.pk), "--json", stdin="hi\n"))
    assert [(m["from_run"], m["class"], m["to_role"]) for m in lines] == [
        ("human-cli", "REQUEST", "assistant"),
        (lines[1]["from_run"], "RESULT", "human"),
    ]
    assert lines[0]["request"] is not None
    assert lines[1]["in_reply_to"] == lines[0]["id"]


def test_talk_without_reply_gives_up_after_wait(tester_thread: Thread) -> None:
    with pytest.raises(CommandError, match="No reply") as caught:
        run("talk", "--thread", str(tester_thread.pk), "--tester", "--wait", "0.1", stdin="hi\n")
    assert caught.value.returncode == 1
    assert Message.objects.filter(thread=tester_thread).count() == 1


def test_talk_turn_is_stored_via_cli(tester_thread: Thread) -> None:
    """A turn sent with `talk` says it came through the CLI (message and trail
    row); its stored sender stays `tester-cli` (R6)."""
    with pytest.raises(CommandError, match="No reply"):
        run("talk", "--thread", str(tester_thread.pk), "--tester", "--wait", "0.1", stdin="hi\n")
    turn = Message.objects.get(thread=tester_thread)
    assert (turn.from_run, turn.via, turn.trail.get().via) == ("tester-cli", "cli", "cli")


@pytest.mark.django_db(transaction=True)
def test_talk_ends_when_the_turn_fails_and_read_shows_why(
    tester_thread: Thread, business: Business
) -> None:
    """SPEC §7.1: a failed turn gets no reply: `talk` says so at once, `thread read` marks it."""
    from runner.backends import ReplyFailed
    from runner.service import Runner

    class Refusing:
        name = "refusing"

        def reply(self, turn: Any, **_: Any) -> Any:
            raise ReplyFailed("The model does not exist.", transient=False)

    runner = Runner(backend=Refusing(), business_id=business.pk, concurrency=1)
    runner.start()
    try:
        started = time.monotonic()
        with pytest.raises(CommandError) as caught:
            run("talk", "--thread", str(tester_thread.pk), "--tester", "--wait", "30", stdin="hi\n")
    finally:
        assert runner.stop(timeout=10)
    assert caught.value.returncode == 1
    turn = Message.objects.get(thread=tester_thread)
    assert str(caught.value) == f"No reply to #{turn.pk} (failed: The model does not exist.)"
    assert time.monotonic() - started < 10
    output = run("thread", "read", str(tester_thread.pk), "--tester")
    assert output == f"#{turn.pk} tester → assistant: hi  [failed: The model does not exist.]\n"


def test_talk_in_human_thread_as_tester_refuses_before_reading_input(
    human_thread: Thread,
) -> None:
    """R1: nothing is sent into a thread that is not the caller's."""
    with pytest.raises(CommandError) as caught:
        run("talk", "--thread", str(human_thread.pk), "--tester", stdin="sneak\n")
    assert (caught.value.returncode, str(caught.value).split(":")[0]) == (
        2,
        refusals.THREAD_NOT_OWNED,
    )
    assert not Message.objects.exists()


def test_talk_ends_at_end_of_input(tester_thread: Thread) -> None:
    assert run("talk", "--thread", str(tester_thread.pk), "--tester", stdin="") == ""


@pytest.mark.django_db(transaction=True)
def test_follow_prints_new_messages_only(
    human: Actor,
    human_thread: Thread,
    answering_assistant: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`follow` starts at the newest message and prints what arrives, reply included."""
    old = actions.send_to_thread(human, thread_id=human_thread.pk, body="old").message
    started = threading.Event()

    def newest_then_signal(actor: Actor, *, thread_id: int) -> int:
        newest = cli_stream.newest_id(actor, thread_id=thread_id)
        started.set()
        return newest

    monkeypatch.setattr(follow, "newest_id", newest_then_signal)
    # Wait until the old turn is answered, so only the new exchange arrives while following.
    wait_for(lambda: Message.objects.filter(in_reply_to=old).exists(), what="the old turn's reply")
    sender = in_background(
        lambda: actions.send_to_thread(human, thread_id=human_thread.pk, body="new"),
        after=started,
    )

    output = run("follow", "--thread", str(human_thread.pk), "--max-seconds", "3")

    sender.join(timeout=10)
    new = Message.objects.get(thread=human_thread, body="new")
    reply = Message.objects.get(in_reply_to=new)
    first, *rest = output.splitlines()
    # The turn is printed as `follow` read it: waiting, or already taken by the runner.
    assert first in (
        f"#{new.pk} human → assistant: new",
        f"#{new.pk} human → assistant: new  [working]",
    )
    assert rest == message_line(reply).splitlines()


def test_follow_after_id_prints_from_there_as_json(tester: Actor, tester_thread: Thread) -> None:
    first = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="one").message
    second = actions.send_to_thread(tester, thread_id=tester_thread.pk, body="two").message
    output = run(
        "follow",
        "--thread",
        str(tester_thread.pk),
        "--tester",
        "--after",
        str(first.pk),
        "--json",
        "--max-seconds",
        "0",
    )
    assert [m["id"] for m in json_lines(output)] == [second.pk]


def test_follow_interrupted_exits_zero(
    tester: Actor, tester_thread: Thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C ends the stream quietly: the command returns, so the process exits 0."""
    actions.send_to_thread(tester, thread_id=tester_thread.pk, body="seen")

    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_stream.time, "sleep", interrupt)
    output = run("follow", "--thread", str(tester_thread.pk), "--tester", "--after", "0")
    assert output.splitlines()[0].endswith("tester → assistant: seen")


def test_follow_human_thread_as_tester_refuses_thread_not_owned(human_thread: Thread) -> None:
    assert refused("follow", "--thread", str(human_thread.pk), "--tester") == (
        2,
        refusals.THREAD_NOT_OWNED,
    )


# --- projects ----------------------------------------------------------------------------


def test_project_create_and_projects_list_both_sides(business: Business) -> None:
    """Projects belong to the business: the tester may create one, and both sides list it."""
    created = json.loads(run("project", "create", "--name", "tests", "--tester", "--json"))
    assert created["project"]["name"] == "tests"
    assert created["project"]["creator"] == "tester"
    # A project the tester created says so, on either side.
    line = f"#{created['project']['id']} tests [tester]"
    assert run("projects").splitlines() == [line]
    assert run("projects", "--tester").splitlines() == [line]
    assert refused("project", "create", "--name", "tests") == (2, refusals.PROJECT_EXISTS)


def test_projects_list_human_project_has_no_tester_mark(product: Project) -> None:
    assert run("projects").splitlines() == [f"#{product.pk} product"]


def test_thread_create_project_named_in_another_normal_form_finds_it(business: Business) -> None:
    """Names are stored in normal form C, and `--project` is read in it too."""
    run("project", "create", "--name", "Cafe\u0301")
    created = json.loads(run("thread", "create", "--project", "Caf\u00e9", "--name", "t", "--json"))
    assert created["thread"]["name"] == "t"


# --- hostile input ----------------------------------------------------------------------

# An undecodable byte of a command line reaches Python as a lone surrogate ("\udcff");
# PostgreSQL stores no NUL.
UNSTORABLE_ARGS = [
    ("project", "create", "--name", "a\ud800"),
    ("project", "create", "--name", "\udcff", "--tester"),
    ("thread", "create", "--project", "product", "--name", "x\udcff"),
    ("thread", "create", "--project", "product", "--name", "x", "--instance", "\ud800"),
    ("thread", "create", "--project", "\ud800", "--name", "x"),
    ("threads", "--user", "\udcff"),
    ("threads", "--tester", "--business", "\udcff"),
    ("threads", "--user", "ada\x00"),
    ("thread", "create", "--project", "product", "--name", "x", "--instance", "a\x00"),
]


@pytest.mark.parametrize("args", UNSTORABLE_ARGS)
def test_cli_lone_surrogate_or_nul_in_an_option_refuses_invalid(
    product: Project, args: tuple
) -> None:
    """Once a UnicodeEncodeError traceback; now `invalid`, exit 2, nothing stored."""
    assert refused(*args) == (2, refusals.INVALID)
    assert (Project.objects.count(), Thread.objects.count()) == (1, 0)


@pytest.mark.parametrize(
    "name",
    [
        "report\u202egpj.exe",
        "\u2066x\u2069",
        "\u200b\u200b",
        "launch\u200b",
        "launch\u00a0",
        "\u0301launch",
    ],
)
def test_cli_name_with_format_character_edge_space_leading_mark_or_nothing_visible_refuses_invalid(
    product: Project, name: str
) -> None:
    assert refused("project", "create", "--name", name) == (2, refusals.INVALID)
    assert refused("thread", "create", "--project", "product", "--name", name) == (
        2,
        refusals.INVALID,
    )
    assert (Project.objects.count(), Thread.objects.count()) == (1, 0)


def test_talk_lone_surrogate_in_a_line_refuses_invalid(human_thread: Thread) -> None:
    with pytest.raises(CommandError) as caught:
        run("talk", "--thread", str(human_thread.pk), stdin="hello \udcff\n")
    assert (caught.value.returncode, str(caught.value).split(":")[0]) == (2, refusals.INVALID)
    assert not Message.objects.exists()


ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


@pytest.mark.parametrize(
    "args",
    [
        ("thread", "open", "{id}"),
        ("thread", "read", "{id}"),
        ("thread", "read", "{plain}", "--after", "{id}"),
        ("talk", "--thread", "{id}"),
        ("follow", "--thread", "{id}", "--max-seconds", "0.1"),
        ("follow", "--thread", "{plain}", "--after", "{id}", "--max-seconds", "0.1"),
    ],
)
def test_cli_id_in_other_digits_is_a_usage_error(human_thread: Thread, args: tuple) -> None:
    """The thread's own id in Arabic-Indic digits once named it (`int()` reads them); an id on
    the command line is ASCII digits, as in a path or a query."""
    written = [
        arg.format(id=str(human_thread.pk).translate(ARABIC_INDIC), plain=human_thread.pk)
        for arg in args
    ]
    with pytest.raises(CommandError) as caught:
        run(*written, stdin="" if args[0] == "talk" else None)
    assert caught.value.returncode == 1
    assert "invalid" in str(caught.value)
    assert not ThreadOpen.objects.exists()


def test_thread_create_project_in_other_digits_is_not_found(product: Project) -> None:
    """`--project ²` once raised ValueError (`isdigit()` then `int()`); it names no project."""
    assert refused("thread", "create", "--project", "²", "--name", "x") == (2, refusals.NOT_FOUND)
    assert not Thread.objects.exists()


# --- at the shell ------------------------------------------------------------------------


SHELL_SETUP = """
import json, django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
call_command("loadbusiness", "broker/businesses/demo.toml")
call_command("project", "create", "--name", "product")
call_command("thread", "create", "--project", "product", "--name", "mine")
"""


def test_cli_process_refusal_prints_code_and_exits_2(tmp_path: Path) -> None:
    """R1 at the shell: `code: detail` on stderr, exit status 2, nothing on stdout."""
    environment = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "mosaic.settings",
    }

    def shell(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            cwd=REPO,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )

    prepared = shell("-c", SHELL_SETUP)
    assert prepared.returncode == 0, prepared.stderr
    # The last line is the new thread: `#<id> mine (…)`.
    thread_id = prepared.stdout.splitlines()[-1].split()[0].lstrip("#")

    done = shell("manage.py", "thread", "read", thread_id, "--tester")

    assert done.returncode == 2
    assert "thread-not-owned: This thread belongs to someone else." in done.stderr
    assert done.stdout == ""
