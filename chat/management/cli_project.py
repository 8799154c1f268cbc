"""Which project `--project P` names: a project's name, or else its id."""

from __future__ import annotations

from broker import fields, refusals, selectors
from broker.actors import Actor
from broker.models import Project
from broker.refusals import Refusal
from chat.management.cli_pages import every_row


def all_projects(actor: Actor) -> list[Project]:
    """The business's projects, oldest first (both sides see every project)."""
    return every_row(
        lambda cursor, limit: selectors.list_projects(actor, after=cursor, limit=limit)
    )


def project_named(actor: Actor, value: str) -> Project:
    """The project called `value`; failing that, the project whose id it is."""
    projects = all_projects(actor)
    name = fields.normal_name(value)
    # A name wins over an id, so a project called "12" is still reachable by its name.
    for project in projects:
        if project.name == name:
            return project
    try:
        wanted = fields.parse_id(value, what="project")
    except Refusal:
        wanted = None
    for project in projects:
        if project.pk == wanted:
            return project
    raise Refusal(refusals.NOT_FOUND, f"No project named {value!r}.")
