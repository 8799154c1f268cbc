"""Who is calling the broker. Listeners build an `Actor`; the broker never sees a request.

The human and the tester are built by separate constructors, never one from the other (L5).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from broker.models import HUMAN, TESTER

HUMAN_RUN = "human-cli"
TESTER_RUN = "tester-cli"
SYSTEM_RUN = "system"


class ActorKind(enum.Enum):
    HUMAN = "human"
    TESTER = "tester"
    RUN = "run"  # an assistant run of an instance
    STAFF = "staff"  # a staff member acting through admin or the CLI
    SYSTEM = "system"  # the product itself (notices, the lease reaper)


@dataclass(frozen=True, kw_only=True)
class Actor:
    kind: ActorKind
    business_id: int
    # Address on the bus: `human`, `tester`, or the instance's name for a run.
    role: str
    # Stored as a message's from_run: `human-cli`, `tester-cli`, or the run's id.
    run: str
    # The human's username, or the staff member's; empty for the others.
    username: str = ""

    @classmethod
    def human(cls, *, business_id: int, username: str) -> Actor:
        return cls(
            kind=ActorKind.HUMAN,
            business_id=business_id,
            role=HUMAN,
            run=HUMAN_RUN,
            username=username,
        )

    @classmethod
    def tester(cls, *, business_id: int) -> Actor:
        return cls(kind=ActorKind.TESTER, business_id=business_id, role=TESTER, run=TESTER_RUN)

    @classmethod
    def assistant_run(cls, *, business_id: int, instance: str, run: str) -> Actor:
        return cls(kind=ActorKind.RUN, business_id=business_id, role=instance, run=run)

    @classmethod
    def staff(cls, *, business_id: int, username: str) -> Actor:
        return cls(
            kind=ActorKind.STAFF,
            business_id=business_id,
            role="staff",
            run=username,
            username=username,
        )

    @classmethod
    def system(cls, *, business_id: int) -> Actor:
        return cls(kind=ActorKind.SYSTEM, business_id=business_id, role="system", run=SYSTEM_RUN)

    @property
    def is_tester(self) -> bool:
        return self.kind is ActorKind.TESTER

    @property
    def is_human(self) -> bool:
        return self.kind is ActorKind.HUMAN

    def __str__(self) -> str:
        return self.username or f"{self.role}/{self.run}"
