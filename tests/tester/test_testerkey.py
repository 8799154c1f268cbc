"""`manage.py testerkey`, run by `make run`: the endpoint's key, made once and kept (SPEC §6.1)."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command


def run(env_file: Path) -> str:
    out = io.StringIO()
    call_command("testerkey", env_file=env_file, stdout=out)
    return out.getvalue()


@pytest.fixture
def no_key(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.MOSAIC_TESTER_API_KEY = ""
    monkeypatch.delenv("MOSAIC_TESTER_API_KEY", raising=False)


def test_a_first_run_writes_a_key_to_env_and_prints_it_once(tmp_path: Path, no_key: None) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("MOSAIC_TESTER_PORT=7400\nMOSAIC_TESTER_API_KEY=\n")
    printed = run(env_file)
    lines = env_file.read_text().splitlines()
    assert lines[0] == "MOSAIC_TESTER_PORT=7400"
    [key_line] = [line for line in lines if line.startswith("MOSAIC_TESTER_API_KEY=")]
    key = key_line.split("=", 1)[1]
    assert len(key) > 30 and key in printed


def test_a_new_env_file_is_its_owners_only(tmp_path: Path, no_key: None) -> None:
    env_file = tmp_path / ".env"
    run(env_file)
    assert stat.S_IMODE(os.stat(env_file).st_mode) == 0o600


def test_a_configured_key_is_left_alone_and_not_printed(tmp_path: Path, settings: Any) -> None:
    settings.MOSAIC_TESTER_API_KEY = "mine"
    env_file = tmp_path / ".env"
    printed = run(env_file)
    assert "the value of MOSAIC_TESTER_API_KEY" in printed and "mine" not in printed
    assert not env_file.exists()
