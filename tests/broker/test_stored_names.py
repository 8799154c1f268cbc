"""Names stored before the name rule that it refuses are reported by the start
check (`mosaic.W001`), never rewritten."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management import call_command

from broker.actors import Actor
from broker.boot import stored_name_warnings
from broker.checks import W001, stored_name_problems
from broker.models import Business, Project, Thread
from tests.broker import factories


def stored_project(business: Business, name: str) -> Project:
    """A project stored as an older version stored it, past the broker's name rule."""
    return Project.objects.create(business=business, name=name, created_by="ada")


def warnings_w001() -> list[str]:
    return [str(message.msg) for message in run_checks() if message.id == W001]


@pytest.mark.django_db
def test_check_clean_names_report_no_w001(human: Actor) -> None:
    project = factories.project(human, "Café ünïcode")
    factories.thread(human, project, "שלום")
    stored_project(project.business, "plain ascii name")
    assert warnings_w001() == []


@pytest.mark.django_db
def test_check_stored_names_breaking_the_rule_warn_w001_and_stay_as_stored(
    business: Business, human: Actor
) -> None:
    zero_width = stored_project(business, "launch\u200b")
    trailing = stored_project(business, "launch ")
    decomposed = stored_project(business, "Cafe\u0301")
    thread = Thread.objects.create(
        project=zero_width, name="\u0301probe", owner="tester", instance=business.instances.get()
    )
    found = warnings_w001()
    assert len(found) == 4
    assert found[0].startswith(f"project {zero_width.pk} ") and "U+200B" in found[0]
    assert found[1].startswith(f"project {trailing.pk} ") and "end with a space" in found[1]
    assert found[2].startswith(f"project {decomposed.pk} ") and "normal form C" in found[2]
    assert found[3].startswith(f"thread {thread.pk} ") and "combining mark" in found[3]
    # A warning: `manage.py check` passes, and nothing is rewritten.
    call_command("check")
    assert Project.objects.get(pk=zero_width.pk).name == "launch\u200b"
    assert Thread.objects.get(pk=thread.pk).name == "\u0301probe"


@pytest.mark.django_db
def test_check_many_stored_names_breaking_the_rule_lists_the_first_then_says_more(
    business: Business,
) -> None:
    stored = [stored_project(business, f"p{number}\u00a0") for number in range(4)]
    problems = list(stored_name_problems(listed=3))
    assert [problem.msg.split(" ")[1] for problem in problems[:3]] == [
        str(project.pk) for project in stored[:3]
    ]
    assert len(problems) == 4
    assert "More stored names" in problems[3].msg


@pytest.mark.django_db
def test_stored_name_warnings_at_start_name_the_rows(business: Business) -> None:
    """What `serve` prints before it starts: the check's warnings, with their id."""
    project = stored_project(business, "\ufefflaunch")
    [line] = stored_name_warnings()
    assert line.startswith(f"{W001}: project {project.pk} ")
    assert "U+FEFF" in line
