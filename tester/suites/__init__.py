"""Conversation tests for the assistant, run as the tester (`manage.py testassistant`).

Suite files (`files`) name cases of turns and what each reply must hold; the runner (`runner`)
plays them through the tester listener over HTTP and WebSocket (`client`), as the tester Console
does, and reports them (`reports`). Nothing here imports the broker: what a run proves is what
the listener serves.
"""

# The tester listener's port unless `MOSAIC_TESTER_PORT` names another: the one statement of
# it, read by the site's settings and by this client, which must not import Django to learn it.
DEFAULT_PORT = 7333
