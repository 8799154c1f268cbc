"""Start-up of long-lived processes (`broker.boot.started`): what start-up made is kept out of
the garbage collector's full collections, which otherwise paused every request for 80–90 ms."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

from broker.boot import started

ROOT = Path(__file__).resolve().parents[2]


def test_started_puts_what_start_up_made_out_of_the_collectors_reach() -> None:
    made_at_start_up = [object()]
    assert any(tracked is made_at_start_up for tracked in gc.get_objects())
    try:
        started()
        assert not any(tracked is made_at_start_up for tracked in gc.get_objects())
    finally:
        gc.unfreeze()


def test_the_listeners_settle_their_start_up_once_built(tmp_path: Path) -> None:
    """The ASGI module, as daphne imports it, ends with `started`: Django, the apps and both
    listeners are out of reach (tens of thousands of objects)."""
    environment = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}

    def python(*arguments: str) -> str:
        done = subprocess.run(
            [sys.executable, *arguments],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    python("manage.py", "migrate", "--noinput", "-v", "0")
    frozen = python("-c", "import gc, mosaic.asgi; print(gc.get_freeze_count())")
    assert int(frozen.split()[-1]) > 10_000
