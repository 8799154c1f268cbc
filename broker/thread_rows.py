"""A thread's rows read from its (thread, id) index, whatever the planner guesses.

Asked for one thread's newest rows as `thread_id = X ORDER BY id DESC LIMIT n`, PostgreSQL drops
`thread_id` from the ordering (it is constant) and may walk the primary key back from the newest
row of the table, skipping every other thread's rows: for a thread whose messages are old, the
whole table (78 ms at 100,000 messages, against 0.1 ms). Written as a range of one value and
ordered by (thread, id), the order is the index's and the planner reads the index. SQLite reads
it the same way.
"""

from __future__ import annotations

from django.db.models import Q

# The order of a thread's rows, newest first, and oldest first: the (thread, id) index's.
NEWEST_FIRST = ("-thread_id", "-pk")
OLDEST_FIRST = ("thread_id", "pk")


def in_thread(thread_id: int) -> Q:
    """The rows of one thread, said so that the database keeps `thread_id` in the ordering."""
    return Q(thread_id__gte=thread_id, thread_id__lte=thread_id)
