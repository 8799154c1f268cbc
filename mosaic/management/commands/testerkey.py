"""`manage.py testerkey`: the key of the tester's OpenAI-compatible endpoint (SPEC §6.1).

When MOSAIC_TESTER_API_KEY is set (in the environment or `.env`) it says so and changes
nothing. Otherwise it generates a key, keeps it in `.env` beside `manage.py` — where the
settings read it from, so every later run has the same key and every tool configured with it
keeps working — and prints it once. `make run` runs it on every start.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

VARIABLE = "MOSAIC_TESTER_API_KEY"


class Command(BaseCommand):
    help = (
        f"Print where the tester's OpenAI-compatible endpoint takes its key from; without "
        f"{VARIABLE}, generate one into .env and print it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--env-file",
            type=Path,
            default=Path(settings.BASE_DIR) / ".env",
            help="The .env file a new key is written to (default: beside manage.py).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        env_file: Path = options["env_file"]
        if os.environ.get(VARIABLE) or settings.MOSAIC_TESTER_API_KEY:
            self.stdout.write(f"tester API key: the value of {VARIABLE}")
            return
        key = "mt-" + secrets.token_urlsafe(32)
        write_variable(env_file, VARIABLE, key)
        # Printed once, because nothing else shows it; a tool's configuration takes it from here
        # or from the file.
        self.stdout.write(f"tester API key (new, kept in {env_file.name}): {key}")


def write_variable(env_file: Path, name: str, value: str) -> None:
    """`name=value` in `env_file`, in place of any line that set it (an empty value counts as
    unset, and the first line would win); the file readable by its owner only when new."""
    lines = env_file.read_text().splitlines() if env_file.exists() else []
    kept = [line for line in lines if line.split("=", 1)[0].strip() != name]
    text = "\n".join([*kept, f"{name}={value}"]) + "\n"
    if not env_file.exists():
        env_file.touch(mode=0o600)
    env_file.write_text(text)
