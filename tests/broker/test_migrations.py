"""Data migrations: what the stored rows become (0005: how each claim ended)."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from broker import actions
from broker.actors import Actor
from broker.models import ClaimEnd, ThreadClaim
from tests.broker import factories

CLAIM_ENDED_HOW = importlib.import_module("broker.migrations.0005_claim_ended_how")
BEFORE = ("broker", "0004_immutable_owner_and_business")
AFTER = ("broker", "0005_claim_ended_how")

# The sentences stored before the typed field, and the end each one becomes.
SENTENCES = [
    ("done", ClaimEnd.DONE),
    ("stopped by the human", ClaimEnd.STOPPED),
    ("stopped by the tester", ClaimEnd.STOPPED),
    ("instance ended by root", ClaimEnd.INSTANCE_ENDED),
    ("lease-expired", ClaimEnd.LEASE_EXPIRED),
    ("failed: reply refused (invalid)", ClaimEnd.FAILED),
    ("runner stopped", ClaimEnd.SHUT_DOWN),
    ("released early", ClaimEnd.DONE),
]


@pytest.mark.parametrize(("sentence", "how"), SENTENCES)
def test_ended_how_of_stored_sentence(sentence: str, how: ClaimEnd) -> None:
    assert CLAIM_ENDED_HOW.ended_how(sentence) == how


def migrate(target: tuple[str, str]) -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([target])


@pytest.mark.django_db(transaction=True)
def test_migrate_0005_maps_stored_claims(human: Actor, assistant_run: Actor) -> None:
    """Claims ended before the field existed get the end their sentence names; open ones none."""
    product = factories.project(human)
    ended = []
    for index, (sentence, _) in enumerate(SENTENCES):
        claim = factories.claim(assistant_run, factories.thread(human, product, f"t{index}"))
        ended.append(actions.end_claim(assistant_run, claim_id=claim.pk))
        ThreadClaim.objects.filter(pk=claim.pk).update(end_reason=sentence)
    still_open = factories.claim(assistant_run, factories.thread(human, product, "open"))

    migrate(BEFORE)
    migrate(AFTER)

    stored = dict(ThreadClaim.objects.values_list("pk", "ended_how"))
    assert [stored[claim.pk] for claim in ended] == [how for _, how in SENTENCES]
    assert stored[still_open.pk] == ""
    assert ThreadClaim.objects.get(pk=still_open.pk).ended_at is None
