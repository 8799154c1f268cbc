"""The make targets the README documents do what it says they do."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def planned(target: str) -> list[str]:
    """The commands `make <target>` would run, without running them (`make -n`)."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line.strip() for line in result.stdout.splitlines()]


def test_check_code_target_runs_makemigrations_check() -> None:
    """`make test` fails when a model change has no migration (`check-code` runs the check)."""
    assert ".venv/bin/python manage.py makemigrations --check --dry-run" in planned("check-code")
