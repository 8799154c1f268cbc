"""ASGI entry points: `human_application`, `tester_application`, and `application` (both,
chosen by the port a connection arrived on) for the one-process run.

Fails closed on import: no listener starts while a stored business is refused (R4, R5),
or a database guard is missing (SPEC §3), because system checks do not run under an ASGI server.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mosaic.settings")

# Set Django up before importing anything that touches models.
django_asgi_app = get_asgi_application()

from django.db import connections  # noqa: E402

from broker.boot import refuse_invalid_businesses, refuse_unguarded_database  # noqa: E402
from mosaic.listeners import (  # noqa: E402
    build_human_application,
    build_tester_application,
    by_port,
    plain_http_handler,
)

refuse_invalid_businesses()
refuse_unguarded_database()
# The check ran on this importing thread's connection, which serves no request afterwards.
connections.close_all()

human_application = build_human_application(django_asgi_app)  # type: ignore[arg-type]
tester_application = build_tester_application(plain_http_handler())
application = by_port(human=human_application, tester=tester_application)
