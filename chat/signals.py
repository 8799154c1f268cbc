"""A live Console never outlives its session: signing out closes that session's sockets."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from chat.consumers import session_group

logger = logging.getLogger("mosaic.chat")


@receiver(user_logged_out)
def close_sockets_of_session(sender: Any, request: Any, **kwargs: Any) -> None:
    key = getattr(getattr(request, "session", None), "session_key", None)
    layer = get_channel_layer()
    if not key or layer is None:
        return
    try:
        async_to_sync(layer.group_send)(session_group(key), {"type": "session.ended"})
    except Exception:
        logger.warning("could not close the sockets of a signed-out session", exc_info=True)
