"""ASGI entry points: `human_application`, `tester_application`, `ops_application`, and
`application` (every listener, chosen by the port a connection arrived on) for the one-process
run.

Fails closed on import: no listener starts while a stored business is refused (R4, R5),
or a database guard is missing (SPEC §3), because system checks do not run under an ASGI server.
"""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mosaic.settings")

# Set Django up before importing anything that touches models.
django.setup(set_prefix=False)

from django.conf import settings  # noqa: E402
from django.db import connections  # noqa: E402

from broker.boot import refuse_invalid_businesses, refuse_unguarded_database, started  # noqa: E402
from broker.checkpoints import start_checkpoints  # noqa: E402
from human.listener import build_human_application  # noqa: E402
from mosaic.edge.handler import WorkerPool  # noqa: E402
from mosaic.edge.listener import http_handler, plain_http_handler  # noqa: E402
from mosaic.edge.ports import by_port  # noqa: E402
from mosaic.ops import build_ops_application  # noqa: E402
from tester.listener import build_tester_application  # noqa: E402

refuse_invalid_businesses()
refuse_unguarded_database()
# The check ran on this importing thread's connection, which serves no request afterwards.
connections.close_all()

# One pool per process: both listeners' requests share its threads and their connections.
workers = WorkerPool(size=settings.MOSAIC_HTTP_WORKERS, wait=settings.MOSAIC_HTTP_QUEUE_SECONDS)
human_application = build_human_application(http_handler(workers))
tester_application = build_tester_application(plain_http_handler(workers))
ops_application = build_ops_application()
application = by_port(human=human_application, tester=tester_application, ops=ops_application)
start_checkpoints()
started()
