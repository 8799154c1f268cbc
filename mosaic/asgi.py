"""ASGI entry point of the human listener.

Fails closed on import: no listener starts while a stored business is refused (R4, R5),
because system checks do not run under an ASGI server.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mosaic.settings")

# Set Django up before importing anything that touches models.
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.db import connections  # noqa: E402

from broker.boot import refuse_invalid_businesses  # noqa: E402

refuse_invalid_businesses()
# The check ran on this importing thread's connection, which serves no request afterwards.
connections.close_all()

application = ProtocolTypeRouter({"http": django_asgi_app})
