"""P4's data: many tester threads and messages, inserted in bulk, and the query counts.

`python -m bench.seed THREADS MESSAGES` (with the product's DATABASE_URL) adds a project
`bench-big` with THREADS tester threads and MESSAGES turns — a tenth of them in one thread, the
rest spread over the others — beside a project `bench-small` of 10 threads of 10 turns. Rows go
in with bulk INSERTs (the append-only triggers refuse only UPDATE and DELETE), storing what a
tester's turns would. It prints the ids to read and the number of queries the
broker's selectors make for each list at both sizes.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mosaic.settings")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from broker import selectors  # noqa: E402
from broker.access import access_tester_actor  # noqa: E402
from broker.models import Instance, Message, MessageClass, Project, Thread  # noqa: E402

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
    plan = [busiest] * heavy
    rest = messages - heavy
    plan += [ids[i % (len(ids) - 1)] for i in range(rest)] if len(ids) > 1 else []
    # Plain INSERTs through Django's cursor: the ORM's per-object work would cost more than
    # the database's, and the guards (triggers) still run on every row.
    table = Message._meta.db_table
    names = ["business_id", "thread_id", "from_role", "from_run", "to_role", "class", "body"]
    names += ["holder", "created_at"]
    sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})"
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    for start in range(0, len(plan), BATCH):
        rows = [
            (
                *(actor_business, thread_id, "tester", "tester-cli", "assistant"),
                *(MessageClass.REQUEST.value, f"seeded turn {start + offset}", "", now),
            )
            for offset, thread_id in enumerate(plan[start : start + BATCH])
        ]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, rows)
    return project.pk, busiest


def queries(call: object) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()  # type: ignore[operator]
    return len(captured.captured_queries)


def main() -> None:
    threads, messages = int(sys.argv[1]), int(sys.argv[2])
    actor = access_tester_actor(business_slug="demo")
    began = time.perf_counter()
    big = seed_project(actor.business_id, "bench-big", threads, messages)
    small = seed_project(actor.business_id, "bench-small", 10, 100)
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
        "seconds": seconds,
        "queries": counts,
    }
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    main()
