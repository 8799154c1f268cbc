"""The heartbeat: one thread per runner renews its runs' leases and notices ended claims.

Every run registers its claim here and gets a cancellation flag. The keeper renews each claim
every third of a lease, and between renewals looks (one query) for claims that ended under a
run — stopped (R13), the instance ended (R14), or expired — so the turn is cancelled within a
fraction of a second, not at its next write. A renewal refused `claim-ended` cancels the turn
too. Cancelling is a courtesy: the ended claim already refuses the reply (`claim-ended`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from django.db import DatabaseError, close_old_connections, connection

from broker import actions
from broker.actors import Actor
from broker.models import ThreadClaim
from broker.refusals import Refusal

logger = logging.getLogger("mosaic.runner")

# The longest the keeper waits between looks for ended claims, in seconds.
CHECK_INTERVAL = 0.25


@dataclass
class Held:
    """A claim a run of this runner holds."""

    actor: Actor
    claim_id: int
    thread_id: int
    renewed_at: float
    cancel: threading.Event = field(default_factory=threading.Event)
    # Set when the keeper saw the claim end or its renewal refused: the run was stopped.
    ended: bool = False


class LeaseKeeper:
    """Renews the leases of the claims registered with it; cancels a turn whose claim ended."""

    def __init__(self, *, lease_seconds: float) -> None:
        self.renew_every = lease_seconds / 3
        self.check_every = min(CHECK_INTERVAL, self.renew_every)
        self._held: dict[int, Held] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, actor: Actor, *, claim_id: int, thread_id: int) -> Held:
        """Register a new claim; the returned `Held.cancel` is set when the turn must stop."""
        held = Held(
            actor=actor, claim_id=claim_id, thread_id=thread_id, renewed_at=time.monotonic()
        )
        with self._lock:
            self._held[claim_id] = held
        return held

    def forget(self, claim_id: int) -> None:
        with self._lock:
            self._held.pop(claim_id, None)

    def cancel_all(self) -> None:
        """Cancel every turn in flight (the runner is stopping); their claims stay open."""
        with self._lock:
            for held in self._held.values():
                held.cancel.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="runner-lease", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        try:
            while not self._stopping.wait(self.check_every):
                close_old_connections()
                try:
                    self.tick()
                except DatabaseError:
                    # The leases run on; a renewal that never comes ends in `lease-expired`.
                    logger.warning("lease keeper could not reach the database", exc_info=True)
        finally:
            connection.close()

    def tick(self) -> None:
        """Cancel the turns whose claims ended; renew the claims due for it."""
        with self._lock:
            held = [h for h in self._held.values() if not h.ended]
        if not held:
            return
        ended = set(
            ThreadClaim.objects.filter(
                pk__in=[h.claim_id for h in held], ended_at__isnull=False
            ).values_list("pk", flat=True)
        )
        now = time.monotonic()
        for item in held:
            if item.claim_id in ended:
                self._ended(item)
            elif now - item.renewed_at >= self.renew_every:
                try:
                    actions.renew_claim(item.actor, claim_id=item.claim_id)
                except Refusal:
                    # claim-ended (stopped, revoked, expired) or not-found: either way, done.
                    self._ended(item)
                else:
                    item.renewed_at = now

    def _ended(self, item: Held) -> None:
        item.ended = True
        item.cancel.set()
