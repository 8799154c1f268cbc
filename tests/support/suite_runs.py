"""Writing suite files and running `testassistant` on them, as a test needs."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError

from tests.console.server import ROOT

GREETS = """
name = "smoke"
project = "qa"

[[cases]]
name = "greets"

[[cases.turns]]
send = "hello"
expect = { matches = "(?i)hello|hi", within = 30 }

[[cases]]
name = "task refused"

[[cases.turns]]
send = "task: ship it"
expect = { contains = ["No task"], not_contains = ["Created task"] }
"""

FAILING = """
name = "wrong"
project = "qa"

[[cases]]
name = "greets"

[[cases.turns]]
send = "hello"

[[cases]]
name = "expects goodbye"

[[cases.turns]]
send = "hello"
expect = { contains = ["Goodbye"] }
"""


@dataclass(frozen=True)
class Ran:
    status: int
    out: str
    error: str

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def write_suite(directory: Path, text: str, name: str = "case.suite.toml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def run_testassistant(*arguments: str | Path) -> Ran:
    """`testassistant` in this process; its status as the command line would exit with it."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("testassistant", *[str(a) for a in arguments], stdout=out, stderr=err)
    except CommandError as error:
        return Ran(error.returncode, out.getvalue(), err.getvalue() + str(error))
    except SystemExit as exit:
        return Ran(int(exit.code or 0), out.getvalue(), err.getvalue())
    return Ran(0, out.getvalue(), err.getvalue())


def run_testassistant_process(*arguments: str | Path, env: dict[str, str]) -> Ran:
    """`python manage.py testassistant …` as its own process."""
    done = subprocess.run(
        [sys.executable, "manage.py", "testassistant", *[str(a) for a in arguments]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return Ran(done.returncode, done.stdout, done.stderr)
