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

from broker.business_file import DEMO_FILE
from tests.console.server import ROOT, LiveServer

# A case's tokens and cost as the client counts them (`Spend.as_json`): two turns, one priced
# (11 tokens in and 2 out, $0.021), one without usage.
CASE_COST = {
    "turns": 2,
    "prompt_tokens": 11,
    "completion_tokens": 2,
    "amount": 0.021,
    "turns_without_usage": 1,
    "turns_without_price": 0,
}

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

# A reply that, printed as it came, erases the line before it, returns over it and prints a
# green PASS, then turns the rest of the line around; and a suite failing on it, from the
# instance `hostile` (`add_model_instance`).
SPOOFING_REPLY = (
    "Bye.\n\x1b[2K\r\x1b[32mPASS  hostile · spoofs (1 turn) · 1/1 pass\x1b[0m \x9b2K\u202eok"
)
SPOOFED = """
name = "hostile"
project = "qa"

[[cases]]
name = "spoofs"
instance = "hostile"

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


def add_model_instance(server: LiveServer, directory: Path, name: str, base_url: str) -> None:
    """The demo business loaded again with one more instance, `name`, whose replies come from
    the OpenAI-compatible model server at `base_url`."""
    business = directory / f"{name}.toml"
    business.write_text(
        DEMO_FILE.read_text()
        + f'\n[instances.{name}]\nrole = "assistant"\n\n[instances.{name}.reply]\n'
        f'backend = "openai"\nbase_url = "{base_url}"\nmodel = "m"\n'
    )
    server.manage("loadbusiness", str(business))
