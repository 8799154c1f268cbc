"""Assistant runs (SPEC §7): find pending messages, claim their threads, reply, release.

- `pending`: which messages wait for a reply, which threads a runner may take up.
- `claims`: taking up a thread; clearing dead runs' leases.
- `lease`: the heartbeat that renews leases and cancels a turn whose claim ended.
- `turns`: a turn and its thread's history, as a backend sees it; the tester line.
- `run`: one run of one thread, claim to release.
- `retention`: the daily purge of old tester data (`MOSAIC_TESTER_RETENTION_DAYS`).
- `service`: the `Runner` (dispatcher and worker pool), in-process or `manage.py runassistant`.
- `backends`: the offline default and the OpenAI-compatible chat completions backend.
"""
