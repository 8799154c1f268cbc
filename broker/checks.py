"""System checks for stored businesses: R4 (`mosaic.E001`) and R5 (`mosaic.E002`); for
the database guards of SPEC §3 (`mosaic.E003`); and for stored names that today's name rule
refuses (`mosaic.W001`, a warning: they are reported, never rewritten).

Registered without the `database` tag so a plain `manage.py check` runs them: these invariants
are about what is stored. Checks do not run under an ASGI server, so `broker.boot` raises on the
same problems at start-up; both read them from `stored_business_problems` and `guards.missing`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.models import Model

from broker import fields, guards
from broker.business_file import business_rule_refusal, role_rule_refusal
from broker.models import Business, Project, RoleDefinition, Thread
from broker.policy import RoleLists

E001 = "mosaic.E001"
E002 = "mosaic.E002"
E003 = "mosaic.E003"
W001 = "mosaic.W001"

# How many stored names `mosaic.W001` lists: enough to find the pattern, few enough to read.
STORED_NAMES_LISTED = 20
# Names made of printable ASCII with no space at either end pass the name rule whatever it
# is: only the others are read and judged, so the check reads a fraction of a big table.
_NAME_WORTH_READING = r"[^ -~]|^ | $"

# Set while `migrate` runs its own checks: it is the repair for missing guards (`broker.apps`
# installs them all at its end), so it must not be refused for them.
_guards_reinstalled_after = ContextVar("guards_reinstalled_after", default=False)


def _asks_for_broker(app_configs: Sequence[AppConfig] | None) -> bool:
    """Whether a check run covers this app: all apps, or a list naming `broker`."""
    return app_configs is None or any(config.label == "broker" for config in app_configs)


def _tables_exist(*models: type[Model]) -> bool:
    """Before the first `migrate` there is nothing stored to judge, and refusing would keep
    `migrate` itself from creating the tables."""
    tables = set(connection.introspection.table_names())
    return {model._meta.db_table for model in models} <= tables


@checks.register()
def check_stored_businesses(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """R4 and R5 over every stored business and role definition."""
    if not _asks_for_broker(app_configs):
        return []
    return list(stored_business_problems())


def stored_business_problems() -> Iterator[checks.Error]:
    """Every stored business or role definition that R4 or R5 refuses, as check errors."""
    if not _tables_exist(Business, RoleDefinition):
        return
    for business in Business.objects.order_by("slug"):
        refusal = business_rule_refusal(slug=business.slug, human=business.human)
        if refusal is not None:
            yield checks.Error(
                refusal.detail,
                hint=(
                    f"Give business '{business.slug}' its human's own username in its business "
                    "file and load it again (manage.py loadbusiness)."
                ),
                obj=business,
                id=E001,
            )
    for role in RoleDefinition.objects.select_related("business").order_by(
        "business__slug", "name"
    ):
        lists = RoleLists.of(
            receive_from=_stored_names(role.receive_from),
            send_to=_stored_names(role.send_to),
            cross_role=_stored_names(role.cross_role),
        )
        refusal = role_rule_refusal(slug=role.business.slug, role=role.name, lists=lists)
        if refusal is not None:
            yield checks.Error(
                refusal.detail,
                hint=(
                    f"Remove 'tester' from role '{role.name}' of business "
                    f"'{role.business.slug}': in a tester-owned thread the lists read the "
                    "tester as 'human' (R9)."
                ),
                obj=role,
                id=E002,
            )


def _stored_names(value: object) -> list[str]:
    """A stored list as names. A bare string counts as a one-name list, so it cannot hide one."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [entry for entry in value if isinstance(entry, str)]
    return []


@checks.register()
def check_database_guards(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """SPEC §3: every database guard (trigger, and function on PostgreSQL) is installed."""
    if not _asks_for_broker(app_configs):
        return []
    if _guards_reinstalled_after.get():
        return []
    return list(guard_problems())


def guard_problems() -> Iterator[checks.Error]:
    """Each missing database guard, by name, as check errors.

    Silent while a broker migration is unapplied: the database is not finished yet, and the
    `migrate` that finishes it installs every guard at its end. Start-up does not wait for
    that (`broker.boot` refuses an unmigrated database too).
    """
    loader = MigrationLoader(connection, ignore_no_migrations=True)
    broker_migrations = {key for key in loader.graph.nodes if key[0] == "broker"}
    if not broker_migrations <= set(loader.applied_migrations):
        return
    for name in guards.missing(connection):
        yield checks.Error(
            f"database guard missing: {name}",
            hint=(
                "Run `manage.py migrate`: it installs every guard again at its end "
                "(broker/guards.py). A migration that rebuilds a table drops its triggers."
            ),
            id=E003,
        )


@contextmanager
def guards_reinstalled_after() -> Iterator[None]:
    """Within: `mosaic.E003` is not reported, because what runs next reinstalls the guards."""
    token = _guards_reinstalled_after.set(True)
    try:
        yield
    finally:
        _guards_reinstalled_after.reset(token)


@checks.register()
def check_stored_names(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Project and thread names stored before today's name rule that it refuses."""
    if not _asks_for_broker(app_configs):
        return []
    return list(stored_name_problems())


def stored_name_problems(listed: int = STORED_NAMES_LISTED) -> Iterator[checks.Warning]:
    """The first `listed` stored project and thread names (by table, then id) that
    `fields.name_problem` refuses, each as a warning; one more warning when there are more.

    Stored names are left as they are: rewriting one would rename a thread under its owner's
    eyes, or collide with a name already taken. People rename them; the check says which."""
    if not _tables_exist(Project, Thread):
        return
    found = 0
    for model, what in ((Project, "project name"), (Thread, "thread name")):
        rows = (
            model.objects.filter(name__regex=_NAME_WORTH_READING)
            .order_by("pk")
            .values_list("pk", "name")
        )
        for pk, name in rows.iterator(chunk_size=1000):
            problem = fields.name_problem(name, what=what)
            if problem is None:
                continue
            found += 1
            if found > listed:
                yield checks.Warning(
                    f"More stored names than the {listed} listed break the name rule.",
                    hint="Rename those listed and run the check again to see the rest.",
                    id=W001,
                )
                return
            yield checks.Warning(
                f"{model._meta.model_name} {pk} {name!r}: {problem}",
                hint=f"Rename {model._meta.model_name} {pk}; stored names are not rewritten.",
                id=W001,
            )
