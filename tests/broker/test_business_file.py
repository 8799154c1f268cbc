"""Business files: structure (`invalid`), R4 (`invalid-business`), R5 (`invalid-messaging`)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from broker import refusals
from broker.business_file import (
    DEMO_FILE,
    BusinessSpec,
    InstanceSpec,
    RoleSpec,
    load_business,
    parse_business_file,
)
from broker.models import Business, Instance, Project, RoleDefinition, Thread
from broker.refusals import Refusal

REPO = Path(__file__).resolve().parents[2]
DEMO = DEMO_FILE.read_text()

# A role whose name differs from its instance's, so messages can be seen to name the role.
CONCIERGE = """
[business]
slug = "acme"
human = "grace"
tester_enabled = true
default_instance = "front"

[roles.concierge]
receive_from = ["human"]
send_to = ["human"]
cross_role = []

[instances.front]
role = "concierge"
"""

# Two instances: `kept` gets a thread, `spare` gets none.
TWO_INSTANCES = """
[business]
slug = "acme"
human = "grace"
tester_enabled = true
default_instance = "assistant"

[roles.assistant]
receive_from = ["human"]
send_to = ["human"]
cross_role = []

[instances.assistant]
role = "assistant"

[instances.kept]
role = "assistant"

[instances.spare]
role = "assistant"
"""


def write(tmp_path: Path, text: str, name: str = "business.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refusal_of(path: Path) -> Refusal:
    with pytest.raises(Refusal) as caught:
        parse_business_file(path)
    return caught.value


def stored() -> list[tuple[object, ...]]:
    """Every row the loader writes."""
    return [
        *Business.objects.order_by("pk").values_list(),
        *RoleDefinition.objects.order_by("pk").values_list(),
        *Instance.objects.order_by("pk").values_list(),
    ]


def test_parse_demo_file_gives_demo_business() -> None:
    """SPEC §9: the demo business has human `ada`, instance `assistant`, the tester on."""
    assert parse_business_file(DEMO_FILE) == BusinessSpec(
        slug="demo",
        human="ada",
        tester_enabled=True,
        default_instance="assistant",
        roles=(
            RoleSpec(name="assistant", receive_from=("human",), send_to=("human",), cross_role=()),
        ),
        instances=(InstanceSpec(name="assistant", role="assistant"),),
    )


@pytest.mark.django_db
def test_load_demo_file_stores_business_role_and_instance() -> None:
    """SPEC §3: loading stores the business, its role definition and its instance."""
    business = load_business(parse_business_file(DEMO_FILE))

    assert (business.slug, business.human, business.tester_enabled) == ("demo", "ada", True)
    assert business.default_instance == "assistant"
    role = RoleDefinition.objects.get(business=business)
    assert (role.name, role.receive_from, role.send_to, role.cross_role) == (
        "assistant",
        ["human"],
        ["human"],
        [],
    )
    instance = Instance.objects.get(business=business)
    assert (instance.name, instance.role_id) == ("assistant", role.pk)


@pytest.mark.django_db
def test_load_same_file_twice_writes_nothing() -> None:
    """Configuration as code is idempotent: a second load of the same file issues no write."""
    load_business(parse_business_file(DEMO_FILE))
    before = stored()

    with CaptureQueriesContext(connection) as queries:
        load_business(parse_business_file(DEMO_FILE))

    verbs = {query["sql"].split()[0].upper() for query in queries.captured_queries}
    assert verbs.isdisjoint({"INSERT", "UPDATE", "DELETE"})
    assert stored() == before


@pytest.mark.django_db
def test_load_changed_file_updates_same_rows(tmp_path: Path) -> None:
    """A reload applies the file's new values to the rows it stored before."""
    first = load_business(parse_business_file(DEMO_FILE))
    changed = DEMO.replace("tester_enabled = true", "tester_enabled = false").replace(
        "cross_role = []", 'cross_role = ["human"]'
    )

    second = load_business(parse_business_file(write(tmp_path, changed)))

    assert second.pk == first.pk
    assert Business.objects.get().tester_enabled is False
    assert RoleDefinition.objects.get().cross_role == ["human"]


@pytest.mark.django_db
def test_load_without_instances_keeps_only_referenced_ones(tmp_path: Path) -> None:
    """A dropped instance is deleted unless a thread names it: the record stays whole."""
    business = load_business(parse_business_file(write(tmp_path, TWO_INSTANCES)))
    project = Project.objects.create(business=business, name="product", created_by="grace")
    Thread.objects.create(
        project=project, name="t", owner="grace", instance=Instance.objects.get(name="kept")
    )
    dropped = TWO_INSTANCES.split("[instances.kept]")[0]

    load_business(parse_business_file(write(tmp_path, dropped)))

    assert sorted(Instance.objects.values_list("name", flat=True)) == ["assistant", "kept"]


def demo_with(old: str, new: str) -> str:
    assert old in DEMO
    return DEMO.replace(old, new, 1)


STRUCTURE_ERRORS = [
    # Unknown keys, at every level: a typo is refused rather than ignored.
    pytest.param(DEMO + "\n[extra]\nx = 1\n", "extra", id="unknown-top"),
    pytest.param(
        demo_with('slug = "demo"', 'slug = "demo"\ncolour = 1'),
        "business.colour",
        id="unknown-business",
    ),
    pytest.param(
        demo_with("receive_from", "recieve_from"), "roles.assistant.recieve_from", id="unknown-role"
    ),
    pytest.param(DEMO + "colour = 1\n", "instances.assistant.colour", id="unknown-instance"),
    # Missing keys and tables.
    pytest.param(demo_with('human = "ada"\n', ""), "business.human", id="missing-human"),
    pytest.param(
        demo_with("tester_enabled = true\n", ""), "business.tester_enabled", id="missing-tester"
    ),
    pytest.param(
        demo_with("cross_role = []\n", ""), "roles.assistant.cross_role", id="missing-list"
    ),
    pytest.param(
        demo_with('role = "assistant"\n', ""), "instances.assistant.role", id="missing-role-key"
    ),
    pytest.param(DEMO.split("[instances.assistant]")[0], "instances", id="missing-instances"),
    pytest.param(
        "[roles.assistant]" + DEMO.split("[roles.assistant]")[1], "business", id="missing-business"
    ),
    # Wrong types.
    pytest.param(
        demo_with("tester_enabled = true", 'tester_enabled = "yes"'),
        "business.tester_enabled",
        id="bool-as-string",
    ),
    pytest.param(demo_with('human = "ada"', "human = 7"), "business.human", id="human-as-number"),
    pytest.param(
        demo_with('send_to = ["human"]', 'send_to = "human"'),
        "roles.assistant.send_to",
        id="list-as-string",
    ),
    pytest.param(
        demo_with('send_to = ["human"]', "send_to = [1]"),
        "roles.assistant.send_to",
        id="list-of-numbers",
    ),
    pytest.param(
        demo_with(
            '[instances.assistant]\nrole = "assistant"', '[instances]\nassistant = "assistant"'
        ),
        "instances.assistant",
        id="instance-not-table",
    ),
    pytest.param(
        "business = 1\n[roles.assistant]" + DEMO.split("[roles.assistant]")[1],
        "business",
        id="business-not-table",
    ),
    # Bad values.
    pytest.param(
        demo_with('slug = "demo"', 'slug = "de mo"'), "business.slug", id="slug-with-space"
    ),
    pytest.param(demo_with('human = "ada"', 'human = ""'), "business.human", id="empty-human"),
    pytest.param(
        demo_with('role = "assistant"', 'role = "helper"'),
        "instances.assistant.role",
        id="undefined-role",
    ),
    pytest.param(
        DEMO + '[instances.human]\nrole = "assistant"\n', "instances.human", id="instance-human"
    ),
    pytest.param(
        DEMO + '[instances.tester]\nrole = "assistant"\n', "instances.tester", id="instance-tester"
    ),
    pytest.param(
        DEMO + "[roles.tester]\nreceive_from = []\nsend_to = []\ncross_role = []\n",
        "roles.tester",
        id="role-tester",
    ),
    pytest.param(
        demo_with('default_instance = "assistant"', 'default_instance = "helper"'),
        "business.default_instance",
        id="default-elsewhere",
    ),
    pytest.param(
        demo_with('send_to = ["human"]', 'send_to = ["humans"]'),
        "roles.assistant.send_to",
        id="unknown-address",
    ),
    pytest.param(
        demo_with('send_to = ["human"]', 'send_to = ["human", "human"]'),
        "roles.assistant.send_to",
        id="address-twice",
    ),
]


@pytest.mark.parametrize(("text", "key"), STRUCTURE_ERRORS)
def test_parse_malformed_file_refuses_invalid_naming_file_and_key(
    tmp_path: Path, text: str, key: str
) -> None:
    """SPEC §6: a malformed business file is `invalid`, and the detail names file and key."""
    path = write(tmp_path, text)

    refusal = refusal_of(path)

    assert refusal.code == refusals.INVALID
    assert refusal.detail.startswith(f"{path}: {key}: ")


@pytest.mark.parametrize("text", ["[business", "slug = = 1"])
def test_parse_bad_toml_refuses_invalid_naming_file(tmp_path: Path, text: str) -> None:
    """SPEC §6: a file that is not TOML is `invalid`, naming the file."""
    path = write(tmp_path, text)

    refusal = refusal_of(path)

    assert (refusal.code, refusal.detail.startswith(f"{path}: ")) == (refusals.INVALID, True)


def test_parse_missing_file_refuses_invalid(tmp_path: Path) -> None:
    """SPEC §6: a file that cannot be read is `invalid`, naming the file."""
    refusal = refusal_of(tmp_path / "absent.toml")

    assert refusal.code == refusals.INVALID
    assert str(tmp_path / "absent.toml") in refusal.detail


def test_parse_human_tester_refuses_invalid_business(tmp_path: Path) -> None:
    """T6 (R4): a business whose human is `tester` is refused by the loader, naming it."""
    refusal = refusal_of(write(tmp_path, demo_with('human = "ada"', 'human = "tester"')))

    assert refusal.code == refusals.INVALID_BUSINESS
    assert refusal.detail.startswith("business 'demo': human 'tester' ")


@pytest.mark.parametrize("list_name", ["receive_from", "send_to", "cross_role"])
def test_parse_role_listing_tester_refuses_invalid_messaging(
    tmp_path: Path, list_name: str
) -> None:
    """R5: a role list naming `tester` is refused, naming the business and the role."""
    text = CONCIERGE.replace(f"{list_name} = [", f'{list_name} = ["tester", ', 1)

    refusal = refusal_of(write(tmp_path, text))

    assert refusal.code == refusals.INVALID_MESSAGING
    assert refusal.detail == "business 'acme', role 'concierge' lists tester, which is never a role"


def test_load_spec_built_by_hand_still_applies_rules() -> None:
    """R4, R5: a spec that skipped the parser is refused before anything is written."""
    spec = parse_business_file(DEMO_FILE)
    role = spec.roles[0]
    listing_tester = RoleSpec(
        name=role.name, receive_from=("tester",), send_to=role.send_to, cross_role=()
    )

    with pytest.raises(Refusal) as caught:
        load_business(dataclasses.replace(spec, roles=(listing_tester,)))

    assert caught.value.code == refusals.INVALID_MESSAGING


@pytest.mark.django_db
def test_load_human_of_another_business_refuses_invalid_business(tmp_path: Path) -> None:
    """SPEC §3: one business per human, refused in the business's terms."""
    load_business(parse_business_file(DEMO_FILE))
    other = write(tmp_path, CONCIERGE.replace('human = "grace"', 'human = "ada"'))

    with pytest.raises(Refusal) as caught:
        load_business(parse_business_file(other))

    assert caught.value.code == refusals.INVALID_BUSINESS
    assert "business 'demo'" in caught.value.detail


@pytest.mark.django_db
def test_loadbusiness_command_valid_files_prints_one_line_each(tmp_path: Path) -> None:
    """The loader command stores every file and says so, one line per business."""
    out = StringIO()

    call_command("loadbusiness", str(DEMO_FILE), str(write(tmp_path, CONCIERGE)), stdout=out)

    assert [line.split(":")[0] for line in out.getvalue().splitlines()] == [
        "loaded business 'demo'",
        "loaded business 'acme'",
    ]
    assert sorted(Business.objects.values_list("slug", flat=True)) == ["acme", "demo"]


@pytest.mark.django_db
def test_loadbusiness_command_human_tester_exits_2_storing_nothing(tmp_path: Path) -> None:
    """T6 (R4): the loader command refuses `invalid-business`, exits 2, stores nothing."""
    bad = write(tmp_path, demo_with('human = "ada"', 'human = "tester"'))

    with pytest.raises(CommandError) as caught:
        call_command("loadbusiness", str(bad))

    assert caught.value.returncode == 2
    assert str(caught.value).startswith("invalid-business: business 'demo'")
    assert stored() == []


@pytest.mark.django_db
def test_loadbusiness_command_refusal_in_later_file_stores_no_file(tmp_path: Path) -> None:
    """All or nothing: a refusal met while writing the second file rolls back the first."""
    # The second file's human is the first's: refused only once the first is written.
    same_human = write(tmp_path, CONCIERGE.replace('human = "grace"', 'human = "ada"'))

    with pytest.raises(CommandError) as caught:
        call_command("loadbusiness", str(DEMO_FILE), str(same_human))

    assert (caught.value.returncode, str(caught.value).split(":")[0]) == (2, "invalid-business")
    assert stored() == []


def test_loadbusiness_process_prints_code_and_exits_nonzero(tmp_path: Path) -> None:
    """R5 at the shell: `code: detail` on stderr, exit status 2."""
    bad = write(tmp_path, CONCIERGE.replace("send_to = [", 'send_to = ["tester", ', 1))
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}"}

    done = subprocess.run(
        [sys.executable, "manage.py", "loadbusiness", str(bad)],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "invalid-messaging: business 'acme', role 'concierge'" in done.stderr


# --- an instance's reply settings (SPEC §7.1) ----------------------------------------------

REPLY = """
[instances.assistant.reply]
backend = "openai"
base_url = "http://127.0.0.1:8080/v1"
api_key_env = "ASSISTANT_KEY"
model = "smollm2"
system_prompt = "You are terse."
max_tokens = 256
temperature = 0.2
context_tokens = 2048
"""


@pytest.mark.django_db
def test_parse_instance_reply_settings_keeps_what_the_file_sets(tmp_path: Path) -> None:
    spec = parse_business_file(write(tmp_path, DEMO + REPLY))
    (instance,) = spec.instances
    assert instance.reply == {
        "backend": "openai",
        "base_url": "http://127.0.0.1:8080/v1",
        "api_key_env": "ASSISTANT_KEY",
        "model": "smollm2",
        "system_prompt": "You are terse.",
        "max_tokens": 256,
        "temperature": 0.2,
        "context_tokens": 2048,
    }
    load_business(spec)
    assert Instance.objects.get(name="assistant").reply == instance.reply


@pytest.mark.django_db
def test_parse_instance_pricing_is_kept_with_its_reply_settings(tmp_path: Path) -> None:
    """What a million tokens of the instance's model cost, for conversation tests to price its
    replies at (served by GET /api/chat/instances)."""
    text = DEMO + REPLY + "\n[instances.assistant.reply.pricing]\ninput = 2.5\noutput = 10\n"
    spec = parse_business_file(write(tmp_path, text))
    (instance,) = spec.instances
    assert instance.reply["pricing"] == {"input": 2.5, "output": 10.0}
    load_business(spec)
    assert Instance.objects.get(name="assistant").reply == instance.reply


@pytest.mark.django_db
def test_reload_without_reply_settings_clears_them(tmp_path: Path) -> None:
    load_business(parse_business_file(write(tmp_path, DEMO + REPLY)))
    load_business(parse_business_file(write(tmp_path, DEMO)))
    assert Instance.objects.get(name="assistant").reply is None


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('api_key = "sk-123"', "api_key"),
        ('backend = "anthropic"', "backend"),
        ('base_url = "file:///etc/passwd"', "base_url"),
        ('api_key_env = "sk-live-123"', "api_key_env"),
        ('model = ""', "model"),
        ("max_tokens = 0", "max_tokens"),
        ("max_tokens = 1.5", "max_tokens"),
        ("max_tokens = true", "max_tokens"),
        ("temperature = 3", "temperature"),
        ('temperature = "hot"', "temperature"),
        ("context_tokens = 100", "context_tokens"),
        (f'system_prompt = "{"x" * 8001}"', "system_prompt"),
        ("pricing = 2.5", "pricing"),
        ("pricing = { input = 2.5 }", "pricing.output"),
        ("pricing = { input = 2.5, output = 10, cached = 1 }", "pricing.cached"),
        ("pricing = { input = -1, output = 10 }", "pricing.input"),
        ("pricing = { input = 1, output = 2e6 }", "pricing.output"),
        ("pricing = { input = 1, output = true }", "pricing.output"),
        ("pricing = { input = 1, output = nan }", "pricing.output"),
    ],
)
def test_parse_bad_reply_setting_refuses_invalid_naming_the_key(
    tmp_path: Path, line: str, key: str
) -> None:
    """A key itself is never accepted in the file: only the name of the variable holding it."""
    path = write(tmp_path, DEMO + f"\n[instances.assistant.reply]\n{line}\n")
    refusal = refusal_of(path)
    assert refusal.code == refusals.INVALID
    assert refusal.detail.startswith(f"{path}: instances.assistant.reply.{key}: ")


def test_parse_reply_that_is_not_a_table_refuses_invalid(tmp_path: Path) -> None:
    path = write(tmp_path, DEMO.replace('role = "assistant"\n', 'role = "assistant"\nreply = 1\n'))
    refusal = refusal_of(path)
    assert refusal.detail.startswith(f"{path}: instances.assistant.reply: must be a table")
