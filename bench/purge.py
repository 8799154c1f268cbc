"""The purge's figure: how long the tester-data purge takes over many tester messages.

`python -m bench.purge THREADS MESSAGES` (with the product's DATABASE_URL, migrated, with the
demo business) seeds a project of THREADS tester threads and MESSAGES turns as P4 does
(`bench.seed`), then times one `purge_tester_data` of everything up to now — batches of 500
threads, each its own transaction, the delete guards checking every row — and prints the rows
it deleted and the seconds it took. The human's rows are not part of it: none are seeded.
"""

from __future__ import annotations

import json
import sys
import time

from django.utils import timezone

from bench.seed import seed_project
from broker.access import access_tester_actor
from broker.actions.tester_purge import purge_tester_data
from broker.models import Message


def main() -> None:
    threads, messages = int(sys.argv[1]), int(sys.argv[2])
    actor = access_tester_actor(business_slug="demo")
    seed_project(actor.business_id, f"bench-purge-{time.time_ns()}", threads, messages)
    stored = Message.objects.count()
    began = time.perf_counter()
    counts = purge_tester_data(cut=timezone.now())["demo"]
    seconds = time.perf_counter() - began
    result = {
        "messages_before": stored,
        "deleted": counts.rows,
        "seconds": round(seconds, 2),
        "messages_per_second": round(counts.messages / seconds),
    }
    print(json.dumps({"result": result}), flush=True)


if __name__ == "__main__":
    main()
