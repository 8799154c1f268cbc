"""Which threads the client heard of: the isolation a repeat can check from the tester's side.

The tester never reads anything of the human's (R3, R20), and a repeat talks in one thread of
its own. So every thread id named by what the client received while the repeat ran — each
frame on the thread's socket, each message read over HTTP, the answer to each of its writes —
must be that thread's: a name of any other is a thread the tester was told of and should not
have been (`only_own_threads` in `expect_conversation`).

A thread is named where the listener's shapes name one: the `thread` of a message, a trail row
or a branch's origin (an id), and the `id` of a thread an answer carries (`{"thread": {...}}`).
A step's `arguments` are left out: they are what the model asked for, text of the model's own
like a reply's body, not something the listener told.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The key under which the listener's shapes name a thread, and the keys whose values are the
# model's words rather than the listener's.
THREAD_KEY = "thread"
MODEL_WRITTEN = frozenset({"arguments"})


def threads_named(data: object) -> set[int]:
    """Every thread id `data` (parsed JSON) names, at any depth."""
    found: set[int] = set()
    if isinstance(data, list):
        for item in data:
            found |= threads_named(item)
    elif isinstance(data, dict):
        for key, value in data.items():
            if key in MODEL_WRITTEN:
                continue
            if key == THREAD_KEY:
                named = value.get("id") if isinstance(value, dict) else value
                if isinstance(named, int) and not isinstance(named, bool):
                    found.add(named)
            found |= threads_named(value)
    return found


@dataclass
class ThreadsHeard:
    """The threads named by what one tester thread's client received, each with where it was
    first named; `own` is the thread itself."""

    own: int
    named: dict[int, str] = field(default_factory=dict)

    def note(self, data: object, where: str) -> None:
        for thread in sorted(threads_named(data)):
            self.named.setdefault(thread, where)

    @property
    def foreign(self) -> dict[int, str]:
        """The threads named that are not `own`, in id order."""
        return {thread: where for thread, where in sorted(self.named.items()) if thread != self.own}
