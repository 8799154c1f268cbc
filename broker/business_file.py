"""Business configuration as code: parse a business file (TOML) and store what it describes.

A file is refused whole, before anything is stored: `invalid` for its shape (naming the file and
the key), `invalid-business` for R4, `invalid-messaging` for R5 (naming the business and role).
The format is documented in docs/business-file.md.
"""

from __future__ import annotations

import contextlib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from django.db import models, transaction

from broker import policy, refusals
from broker.models import HUMAN, RESERVED_ADDRESSES, TESTER, Business, Instance, RoleDefinition
from broker.policy import RoleLists
from broker.refusals import Refusal
from broker.tools import MAX_STEPS_LIMIT, TOOL_NAMES

BUSINESSES_DIR = Path(__file__).resolve().parent / "businesses"
DEMO_FILE = BUSINESSES_DIR / "demo.toml"

# Slugs and names end up in URLs and on the bus as addresses: one plain alphabet for all.
_NAME = re.compile(r"[A-Za-z0-9_-]+")
# Django's own username alphabet, so the human can sign in under the name the file gives.
_USERNAME = re.compile(r"[\w.@+-]+")
# The column widths of the models' fields.
_SLUG_MAX = 100
_USERNAME_MAX = 150
_NAME_MAX = 100

_TOP_KEYS = frozenset({"business", "roles", "instances"})
_BUSINESS_KEYS = frozenset({"slug", "human", "tester_enabled", "default_instance"})
_ROLE_KEYS = frozenset({"receive_from", "send_to", "cross_role"})
_INSTANCE_KEYS = frozenset({"role"})
_INSTANCE_OPTIONAL_KEYS = frozenset({"reply"})
# `[instances.NAME.reply]`: how the instance's replies are made (SPEC §7.1). Every key optional.
REPLY_BACKENDS = ("offline", "openai")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_URL = re.compile(r"https?://[^\s/?#]+(/[^\s?#]*)?")
_REPLY_TEXT_MAX = {"base_url": 500, "api_key_env": 100, "model": 200, "system_prompt": 8000}
_REPLY_NUMBERS: dict[str, tuple[type, float, float]] = {
    "max_tokens": (int, 1, 1_000_000),
    "temperature": (float, 0.0, 2.0),
    "context_tokens": (int, 256, 10_000_000),
    "max_steps": (int, 1, MAX_STEPS_LIMIT),
}
# `[instances.NAME.reply.pricing]`: what a million tokens of the instance's model cost, prompt
# (`input`) and completion (`output`), for conversation tests to tell what replies cost.
PRICING_KEYS = ("input", "output")
PRICE_MAX = 1_000_000.0
# A value of `[instances.NAME.reply]`: text, a number, (`tools`) a list of names, or
# (`pricing`) a price per kind of token.
ReplyValue = str | int | float | list[str] | dict[str, float]
_REPLY_KEYS = frozenset({"backend", "tools", "pricing", *_REPLY_TEXT_MAX, *_REPLY_NUMBERS})


@dataclass(frozen=True)
class RoleSpec:
    name: str
    receive_from: tuple[str, ...]
    send_to: tuple[str, ...]
    cross_role: tuple[str, ...]

    def lists(self) -> RoleLists:
        return RoleLists.of(
            receive_from=self.receive_from, send_to=self.send_to, cross_role=self.cross_role
        )


@dataclass(frozen=True)
class InstanceSpec:
    name: str
    role: str
    # `[instances.NAME.reply]` as given, checked: only the keys the file sets.
    reply: Mapping[str, ReplyValue] = field(default_factory=dict)


@dataclass(frozen=True)
class BusinessSpec:
    slug: str
    human: str
    tester_enabled: bool
    default_instance: str
    roles: tuple[RoleSpec, ...]
    instances: tuple[InstanceSpec, ...]


def parse_business_file(path: str | Path) -> BusinessSpec:
    """Read and validate one business file; raise `Refusal` on the first problem found.

    Pure: reads the file, touches no database.
    """
    source = str(path)
    try:
        with open(path, "rb") as stream:
            document = tomllib.load(stream)
    except OSError as exc:
        raise Refusal(refusals.INVALID, f"{source}: cannot be read ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise Refusal(refusals.INVALID, f"{source}: not valid TOML ({exc})") from exc
    spec = _Reader(source).business_spec(document)
    check_business_rules(spec)
    return spec


def check_business_rules(spec: BusinessSpec) -> None:
    """Apply R4, then R5 to each role, raising the first refusal."""
    refusal = business_rule_refusal(slug=spec.slug, human=spec.human)
    if refusal is not None:
        raise refusal
    for role in spec.roles:
        refusal = role_rule_refusal(slug=spec.slug, role=role.name, lists=role.lists())
        if refusal is not None:
            raise refusal


def business_rule_refusal(*, slug: str, human: str) -> Refusal | None:
    """R4 as a refusal naming the business; the loader, the system check and boot share it."""
    code = policy.business_refusal(human=human)
    if code is None:
        return None
    return Refusal(
        code,
        f"business '{slug}': human '{human}' is refused; a business's human is a username "
        f"other than '{TESTER}', which is the tester's owner name (R4)",
    )


def role_rule_refusal(*, slug: str, role: str, lists: RoleLists) -> Refusal | None:
    """R5 as a refusal naming business and role; the loader, the system check and boot share it."""
    code = policy.role_lists_refusal(lists)
    if code is None:
        return None
    return Refusal(code, f"business '{slug}', role '{role}' lists tester, which is never a role")


def load_business(spec: BusinessSpec) -> Business:
    """Create or update the business `spec` describes, with its roles and instances, atomically.

    Idempotent: loading the same spec again writes nothing. A role or instance the spec no
    longer names is deleted only when nothing references it: threads and claims keep theirs.
    """
    check_business_rules(spec)
    with transaction.atomic():
        # One business per human: say so in the business's terms rather than as a bare
        # unique-constraint failure.
        taken_by = (
            Business.objects.filter(human=spec.human)
            .exclude(slug=spec.slug)
            .values_list("slug", flat=True)
            .first()
        )
        if taken_by is not None:
            raise Refusal(
                refusals.INVALID_BUSINESS,
                f"business '{spec.slug}': human '{spec.human}' is already the human of "
                f"business '{taken_by}'",
            )
        business = Business.objects.select_for_update().filter(slug=spec.slug).first()
        if business is None:
            business = Business.objects.create(
                slug=spec.slug,
                human=spec.human,
                tester_enabled=spec.tester_enabled,
                default_instance=spec.default_instance,
            )
        else:
            _save_changes(
                business,
                human=spec.human,
                tester_enabled=spec.tester_enabled,
                default_instance=spec.default_instance,
            )

        roles = {role.name: role for role in RoleDefinition.objects.filter(business=business)}
        for role_spec in spec.roles:
            lists = {
                "receive_from": list(role_spec.receive_from),
                "send_to": list(role_spec.send_to),
                "cross_role": list(role_spec.cross_role),
            }
            stored_role = roles.get(role_spec.name)
            if stored_role is None:
                roles[role_spec.name] = RoleDefinition.objects.create(
                    business=business, name=role_spec.name, **lists
                )
            else:
                _save_changes(stored_role, **lists)

        instances = {inst.name: inst for inst in Instance.objects.filter(business=business)}
        for instance_spec in spec.instances:
            role = roles[instance_spec.role]
            stored_instance = instances.get(instance_spec.name)
            reply = dict(instance_spec.reply) or None
            if stored_instance is None:
                Instance.objects.create(
                    business=business, name=instance_spec.name, role=role, reply=reply
                )
            else:
                _save_changes(stored_instance, role_id=role.pk, reply=reply)

        named_instances = {instance.name for instance in spec.instances}
        for name, stored_instance in instances.items():
            if name not in named_instances:
                _delete_unless_referenced(stored_instance)
        named_roles = {role.name for role in spec.roles}
        for name, stored_role in roles.items():
            if name not in named_roles:
                _delete_unless_referenced(stored_role)
    return business


def _save_changes(obj: models.Model, **values: object) -> None:
    """Write only the fields whose value differs, so an unchanged reload issues no UPDATE."""
    changed = [field for field, value in values.items() if getattr(obj, field) != value]
    if not changed:
        return
    for name in changed:
        setattr(obj, name, values[name])
    obj.save(update_fields=changed)


def _delete_unless_referenced(obj: models.Model) -> None:
    # Threads, claims or instances still naming it keep it: deleting would rewrite the record.
    with contextlib.suppress(models.ProtectedError, models.RestrictedError):
        obj.delete()


class _Reader:
    """Walks one parsed document; every problem names the file and the dotted key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def refuse(self, key: str, problem: str) -> Refusal:
        return Refusal(refusals.INVALID, f"{self.source}: {key}: {problem}")

    def business_spec(self, document: Mapping[str, object]) -> BusinessSpec:
        self.keys(document, _TOP_KEYS, where="")
        business = self.table(document, "business", where="")
        self.keys(business, _BUSINESS_KEYS, where="business")
        slug = self.name(business, "slug", where="business", pattern=_NAME, max_length=_SLUG_MAX)
        human = self.name(
            business, "human", where="business", pattern=_USERNAME, max_length=_USERNAME_MAX
        )
        tester_enabled = business["tester_enabled"]
        if not isinstance(tester_enabled, bool):
            raise self.refuse("business.tester_enabled", "must be true or false")
        default_instance = self.name(
            business, "default_instance", where="business", pattern=_NAME, max_length=_NAME_MAX
        )

        roles: list[RoleSpec] = []
        for role_name, role in self.tables(document, "roles").items():
            where = f"roles.{role_name}"
            self.address(role_name, key=where, what="role")
            self.keys(role, _ROLE_KEYS, where=where)
            roles.append(
                RoleSpec(
                    name=role_name,
                    receive_from=self.names_list(role, "receive_from", where=where),
                    send_to=self.names_list(role, "send_to", where=where),
                    cross_role=self.names_list(role, "cross_role", where=where),
                )
            )
        role_names = {role.name for role in roles}

        instances: list[InstanceSpec] = []
        for instance_name, instance in self.tables(document, "instances").items():
            where = f"instances.{instance_name}"
            self.address(instance_name, key=where, what="instance")
            self.keys(instance, _INSTANCE_KEYS, where=where, optional=_INSTANCE_OPTIONAL_KEYS)
            role_name = self.name(
                instance, "role", where=where, pattern=_NAME, max_length=_NAME_MAX
            )
            if role_name not in role_names:
                raise self.refuse(f"{where}.role", f"names role '{role_name}', not defined here")
            reply = self.reply(instance, where=where) if "reply" in instance else {}
            instances.append(InstanceSpec(name=instance_name, role=role_name, reply=reply))
        instance_names = {instance.name for instance in instances}

        if default_instance not in instance_names:
            raise self.refuse(
                "business.default_instance", f"'{default_instance}' is not among [instances]"
            )
        # A list entry is an address on the bus: `human` or an instance of this business.
        # `tester` is left to R5, which refuses it with its own code.
        addresses = instance_names | {HUMAN, TESTER}
        for role_spec in roles:
            for list_name in sorted(_ROLE_KEYS):
                for entry in getattr(role_spec, list_name):
                    if entry not in addresses:
                        raise self.refuse(
                            f"roles.{role_spec.name}.{list_name}",
                            f"'{entry}' is neither '{HUMAN}' nor an instance defined here",
                        )

        return BusinessSpec(
            slug=slug,
            human=human,
            tester_enabled=tester_enabled,
            default_instance=default_instance,
            roles=tuple(roles),
            instances=tuple(instances),
        )

    def keys(
        self,
        table: Mapping[str, object],
        expected: frozenset[str],
        *,
        where: str,
        optional: frozenset[str] = frozenset(),
    ) -> None:
        prefix = f"{where}." if where else ""
        unknown = sorted(set(table) - expected - optional)
        if unknown:
            raise self.refuse(f"{prefix}{unknown[0]}", "unknown key")
        missing = sorted(expected - set(table))
        if missing:
            raise self.refuse(f"{prefix}{missing[0]}", "missing")

    def reply(self, instance: Mapping[str, object], *, where: str) -> dict[str, ReplyValue]:
        """`[instances.NAME.reply]`: each key optional, each checked; never a key itself."""
        where = f"{where}.reply"
        table = self.table(instance, "reply", where=where.rsplit(".", 1)[0])
        self.keys(table, frozenset(), where=where, optional=_REPLY_KEYS)
        reply: dict[str, ReplyValue] = {}
        for key, value in table.items():
            dotted = f"{where}.{key}"
            if key == "tools":
                reply[key] = self.tool_names(value, where=dotted)
                continue
            if key == "pricing":
                reply[key] = self.pricing(value, where=dotted)
                continue
            if key in _REPLY_NUMBERS:
                kind, low, high = _REPLY_NUMBERS[key]
                number_ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                if kind is int and not isinstance(value, int):
                    number_ok = False
                if not number_ok or not low <= float(value) <= high:  # type: ignore[arg-type]
                    raise self.refuse(dotted, f"must be {kind.__name__} from {low:g} to {high:g}")
                reply[key] = kind(value)
                continue
            if not isinstance(value, str) or not value:
                raise self.refuse(dotted, "must be a non-empty string")
            if key == "backend" and value not in REPLY_BACKENDS:
                raise self.refuse(dotted, f"must be one of {', '.join(REPLY_BACKENDS)}")
            if key == "base_url" and not _URL.fullmatch(value):
                raise self.refuse(dotted, "must be an http:// or https:// URL")
            if key == "api_key_env" and not _ENV_NAME.fullmatch(value):
                raise self.refuse(
                    dotted,
                    "names the environment variable holding the key (A-Z, 0-9, _), "
                    "never the key itself",
                )
            limit = _REPLY_TEXT_MAX.get(key)
            if limit is not None and len(value) > limit:
                raise self.refuse(dotted, f"must be at most {limit} characters")
            reply[key] = value
        return reply

    def pricing(self, value: object, *, where: str) -> dict[str, float]:
        """`pricing`: `input` and `output`, each the price of a million tokens, 0 to
        PRICE_MAX."""
        if not isinstance(value, dict):
            raise self.refuse(where, "must be a table: input = …, output = …")
        self.keys(value, frozenset(PRICING_KEYS), where=where)
        prices = {}
        for key in PRICING_KEYS:
            price = value[key]
            if (
                isinstance(price, bool)
                or not isinstance(price, int | float)
                or not 0 <= price <= PRICE_MAX
            ):
                raise self.refuse(
                    f"{where}.{key}",
                    f"must be the price of a million tokens, a number from 0 to {PRICE_MAX:,.0f}",
                )
            prices[key] = float(price)
        return prices

    def tool_names(self, value: object, *, where: str) -> list[str]:
        """`tools`: the tools the instance is offered, each at most once (SPEC §7.2)."""
        if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
            raise self.refuse(where, "must be a list of tool names")
        for name in value:
            if name not in TOOL_NAMES:
                raise self.refuse(where, f"{name!r} is not a tool (one of {', '.join(TOOL_NAMES)})")
        if len(set(value)) != len(value):
            raise self.refuse(where, "names a tool twice")
        return list(value)

    def table(self, parent: Mapping[str, object], key: str, *, where: str) -> dict[str, object]:
        value = parent[key]
        if not isinstance(value, dict):
            raise self.refuse(f"{where}.{key}" if where else key, "must be a table")
        return value

    def tables(self, document: Mapping[str, object], key: str) -> dict[str, dict[str, object]]:
        """A table of tables, such as [roles.NAME] or [instances.NAME]."""
        outer = self.table(document, key, where="")
        inner: dict[str, dict[str, object]] = {}
        for name in outer:
            inner[name] = self.table(outer, name, where=key)
        return inner

    def name(
        self,
        table: Mapping[str, object],
        key: str,
        *,
        where: str,
        pattern: re.Pattern[str],
        max_length: int,
    ) -> str:
        value = table[key]
        dotted = f"{where}.{key}"
        if not isinstance(value, str):
            raise self.refuse(dotted, "must be a string")
        if not pattern.fullmatch(value) or len(value) > max_length:
            raise self.refuse(
                dotted,
                f"{value!r} must be 1-{max_length} characters matching {pattern.pattern}",
            )
        return value

    def address(self, name: str, *, key: str, what: str) -> None:
        """A role's or instance's own name: a plain name, never `human` or `tester`."""
        if name in RESERVED_ADDRESSES:
            raise self.refuse(key, f"'{name}' is reserved on the bus; no {what} may take it")
        if not _NAME.fullmatch(name) or len(name) > _NAME_MAX:
            raise self.refuse(
                key, f"a {what} name is 1-{_NAME_MAX} characters matching {_NAME.pattern}"
            )

    def names_list(self, table: Mapping[str, object], key: str, *, where: str) -> tuple[str, ...]:
        value = table[key]
        dotted = f"{where}.{key}"
        if not isinstance(value, list) or not all(isinstance(entry, str) for entry in value):
            raise self.refuse(dotted, "must be a list of names")
        names = tuple(str(entry) for entry in value)
        if len(set(names)) != len(names):
            raise self.refuse(dotted, "names an address twice")
        return names
