"""P4's data: many tester threads and messages, inserted in bulk, and the query counts.

`python -m bench.seed THREADS MESSAGES [--trail]` (with the product's DATABASE_URL)
adds a project `bench-big` with THREADS tester threads and MESSAGES turns — a tenth of them in
one thread, the rest spread over the others — beside a project `bench-small` of 10 threads of 10
turns. Rows go in with INSERT … SELECT statements (the append-only triggers refuse only UPDATE
and DELETE), storing what a tester's turns would. `--trail` copies every seeded message into the
trail, one row each, as the broker writes a message's row. It prints the ids to read and the
number of queries the broker's selectors make for each list at both sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mosaic.settings")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from broker import selectors  # noqa: E402
from broker.access import access_tester_actor  # noqa: E402
from broker.models import (  # noqa: E402
    Instance,
    Message,
    MessageClass,
    Project,
    Thread,
    TrailKind,
    TrailRow,
)

# A search P8 asks: "turn 77777" is in 11 of a million seeded bodies (77777, 777770 to 777779).
SEARCH = "turn 77777"

BATCH = 5000


def seed_project(actor_business: int, name: str, threads: int, messages: int) -> tuple[int, int]:
    """A project of `threads` tester threads and `messages` turns; (project id, busiest thread)."""
    instance = Instance.objects.get(business_id=actor_business, name="assistant")
    with transaction.atomic():
        project = Project.objects.create(business_id=actor_business, name=name, created_by="tester")
        Thread.objects.bulk_create(
            [
                Thread(project=project, name=f"t{i}", owner="tester", instance=instance)
                for i in range(threads)
            ],
            batch_size=BATCH,
        )
    ids = list(Thread.objects.filter(project=project).order_by("pk").values_list("pk", flat=True))
    busiest = ids[-1]
    heavy = messages // 10 if threads > 10 else messages // threads
    # One INSERT … SELECT over a counter, on SQLite and PostgreSQL alike: a million rows in
    # one statement, where rows sent from Python would cost more than the database's work.
    # The guards (triggers) still run on every row. The turns past `heavy` go round the other
    # threads, whose ids bulk_create gave in one run.
    assert ids == list(range(ids[0], ids[0] + len(ids))), "thread ids not consecutive"
    others = max(len(ids) - 1, 1)
    table = Message._meta.db_table
    names = ["business_id", "thread_id", "from_role", "from_run", "to_role", "class", "body"]
    names += ["holder", "created_at"]
    sql = (
        f"INSERT INTO {table} ({', '.join(names)}) "
        "WITH RECURSIVE counter(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM counter "
        "WHERE i + 1 < %s) "
        "SELECT %s, CASE WHEN i < %s THEN %s ELSE %s + (i - %s) %% %s END, "
        "'tester', 'tester-cli', 'assistant', %s, 'seeded turn ' || i || ' of the bench', '', %s "
        "FROM counter"
    )
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [messages, actor_business, heavy, busiest, ids[0], heavy, others]
    params += [MessageClass.REQUEST.value, now]
    if messages:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
    return project.pk, busiest


def copy_into_trail(project_id: int) -> int:
    """One trail row per seeded message of the project, its text the message's body."""
    names = ["business_id", "thread_id", "message_id", "from_role", "from_run", "to_role"]
    names += ["actor_role", "actor_run", "text", "kind", "thread_name", "tester_visible", "at"]
    sql = (
        f"INSERT INTO {TrailRow._meta.db_table} ({', '.join(names)}) "
        "SELECT m.business_id, m.thread_id, m.id, m.from_role, m.from_run, m.to_role, "
        "m.from_role, m.from_run, m.body, %s, t.name, %s, m.created_at "
        f"FROM {Message._meta.db_table} m JOIN {Thread._meta.db_table} t ON t.id = m.thread_id "
        "WHERE t.project_id = %s ORDER BY m.id"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [TrailKind.MESSAGE.value, True, project_id])
        return cursor.rowcount


def queries(call: object) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()  # type: ignore[operator]
    return len(captured.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("threads", type=int)
    parser.add_argument("messages", type=int)
    parser.add_argument("--trail", action="store_true", help="copy the messages into the trail")
    args = parser.parse_args()
    actor = access_tester_actor(business_slug="demo")
    began = time.perf_counter()
    big = seed_project(actor.business_id, "bench-big", args.threads, args.messages)
    small = seed_project(actor.business_id, "bench-small", 10, 100)
    trail = sum(copy_into_trail(project) for project, _ in (big, small)) if args.trail else 0
    if connection.vendor == "postgresql":
        # The planner's statistics, as autovacuum would gather them some time after.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    seconds = time.perf_counter() - began
    counts = {}
    for label, (project, thread) in (("big", big), ("small", small)):
        counts[label] = {
            "threads": queries(lambda p=project: selectors.list_threads(actor, project_id=p)),
            "messages": queries(lambda t=thread: selectors.thread_messages(actor, thread_id=t)),
        }
    result = {
        "big_project": big[0],
        "big_thread": big[1],
        "small_project": small[0],
        "small_thread": small[1],
        "threads": Thread.objects.count(),
        "messages": Message.objects.count(),
        "trail": trail,
        "search": SEARCH,
        "seconds": seconds,
        "queries": counts,
    }
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    main()
