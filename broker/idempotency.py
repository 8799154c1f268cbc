"""R21: a write repeated with the same Idempotency-Key returns its first answer.

The answer is opaque to the broker (the transport decides what it holds). Keys are scoped per
owner, so one side's key never collides with, or reveals, the other's. Only answered writes
are remembered: a refused write rolls back with its key, and a retry runs again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction

from broker import policy, refusals
from broker.actors import Actor
from broker.models import IdempotentWrite
from broker.refusals import Refusal

KEY_MAX = 200


def check_key(key: str) -> str:
    """A key is 1–200 visible ASCII characters."""
    if not 1 <= len(key) <= KEY_MAX or not all("!" <= char <= "~" for char in key):
        raise Refusal(
            refusals.INVALID, f"The Idempotency-Key must be 1–{KEY_MAX} visible ASCII characters."
        )
    return key


def remember_answer(
    actor: Actor, *, key: str, fingerprint: str, produce: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The answer first given to (owner, key), or `produce()`'s, stored with the write.

    The key row is inserted before the write runs, inside the same transaction: a concurrent
    twin waits on the unique index and then reads the stored answer, so the write runs once.
    """
    check_key(key)
    owner = policy.owner(actor)
    with transaction.atomic():
        try:
            with transaction.atomic():
                record = IdempotentWrite.objects.create(
                    business_id=actor.business_id,
                    owner=owner,
                    key=key,
                    fingerprint=fingerprint,
                    answer={},
                )
        except IntegrityError:
            earlier = IdempotentWrite.objects.get(
                business_id=actor.business_id, owner=owner, key=key
            )
            if earlier.fingerprint != fingerprint:
                raise Refusal(
                    refusals.IDEMPOTENCY_KEY_REUSED,
                    "This Idempotency-Key was used for another request.",
                ) from None
            return earlier.answer  # type: ignore[no-any-return]
        answer = produce()
        record.answer = answer
        record.save(update_fields=["answer"])
        return answer
