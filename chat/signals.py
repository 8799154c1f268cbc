"""What the chat API tells whoever listens, without knowing who (the site's metrics do).

`turn_sent`: a chat view stored a turn a client sent to a thread. Argument: `listener` (the
listener the turn arrived on, `human` or `tester`).
"""

from __future__ import annotations

from django.dispatch import Signal

turn_sent = Signal()
