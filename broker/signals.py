"""What the broker tells whoever listens, without knowing who (the site's metrics do).

`turn_ended`: a run's attempt at a turn ended. Arguments: `instance` (the instance's name),
`state` (a `TurnEnd`), `seconds` (the attempt's duration), and `reply` (the backend's `Reply`
when one was written, else None).
"""

from __future__ import annotations

import enum

from django.dispatch import Signal

turn_ended = Signal()


class TurnEnd(enum.StrEnum):
    """How one attempt at a turn ended."""

    ANSWERED = "answered"  # its reply landed
    RETRYING = "retrying"  # a transient failure; it will be tried again
    FAILED = "failed"  # given up
    STOPPED = "stopped"  # the claim ended under it (a stop, a revoke, the lease): reply dropped
    SHUT_DOWN = "shut-down"  # the runner is stopping; the turn stays pending
