"""The conversation-test client as a test team installs it: `pip install <checkout>` into a
fresh virtualenv, used from a directory outside the checkout, against a real tester listener.

It gives the `mosaic-test` command and the pytest plugin (through its `pytest11` entry point:
no conftest line), and installs no Django. The install needs the package registry, as any
`pip install` does; it is not skipped when the registry cannot be reached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.server import ROOT, free_port
from tests.support.served import Served, human_left_alone

# The pytest the plugin is tried with: the one this suite pins.
PYTEST = next(
    line.strip()
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
    if line.startswith("pytest==")
)
INSTALL_SECONDS = 600


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the checkout and pytest installed, and nothing else."""
    venv = tmp_path_factory.mktemp("client") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
         str(ROOT), PYTEST],
        cwd=venv.parent,
        capture_output=True,
        text=True,
        timeout=INSTALL_SECONDS,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-4000:]
    return venv


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the checkout, holding the offline example suites (the adversarial
    ones need a judge and a real model: test_adversarial_suites.py runs them)."""
    assert ROOT not in tmp_path.parents
    shutil.copytree(
        ROOT / "examples" / "conversations",
        tmp_path / "conversations",
        ignore=shutil.ignore_patterns("adversarial"),
    )
    return tmp_path


@pytest.fixture
def live(suite_server: Served) -> Iterator[Served]:
    with human_left_alone(suite_server):
        yield suite_server


def environment(url: str) -> dict[str, str]:
    """Nothing of this suite's: no project on the path, no settings module, no plugins but the
    ones installed."""
    kept = {name: value for name, value in os.environ.items() if name in ("PATH", "HOME", "LANG")}
    return {**kept, "MOSAIC_TESTER_URL": url}


def run(venv: Path, *arguments: str, cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / arguments[0]), *arguments[1:]],
        cwd=cwd,
        env=environment(url),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_install_brings_no_django(client_venv: Path, outside: Path) -> None:
    found = run(
        client_venv,
        "python",
        "-c",
        "import importlib.util as u, mosaic_test; print(u.find_spec('django') is None)",
        cwd=outside,
        url="http://127.0.0.1:1",
    )
    assert (found.returncode, found.stdout.strip()) == (0, "True"), found.stderr


@pytest.mark.parametrize("module", ["mosaic_test", "mosaic_test.cli"])
def test_python_dash_m_runs_the_command(client_venv: Path, outside: Path, module: str) -> None:
    """`python -m mosaic_test` and `python -m mosaic_test.cli` are the `mosaic-test` command."""
    ran = run(client_venv, "python", "-m", module, "--help", cwd=outside, url="http://127.0.0.1:1")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("usage: "), ran.stdout


def test_mosaic_test_runs_the_example_suites(
    client_venv: Path, outside: Path, live: Served
) -> None:
    """The example command of docs/testing.md, as typed, against `make run`'s offline backend."""
    # `conversations/*.suite.toml`, as the shell expands it.
    typed = sorted(
        str(path.relative_to(outside)) for path in outside.glob("conversations/*.suite.toml")
    )
    ran = run(client_venv, "mosaic-test", *typed, cwd=outside, url=live.url)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "PASS  offline assistant · greets, then counts the turns (2 turns) · 3/3 pass" in (
        ran.stdout
    )
    # A dataset's rows, each a case; the offline backend records no usage: the cost is unknown.
    assert (
        "PASS  offline datasets · remembers where the launch is [city=Porto, day=Monday] "
        "(2 turns) · 1/1 pass, 95% interval 21–100% · tokens unknown · cost unknown "
        "(2 turns without usage)"
    ) in ran.stdout
    last = ran.stdout.splitlines()[-1]
    assert last.startswith("6 pass, 0 flaky, 0 fail, 0 error (run ")
    assert last.endswith(" s; tokens unknown · cost unknown (15 turns without usage)")


PLUGIN_TESTS = """
def test_greets(mosaic_tester):
    thread = mosaic_tester.thread("installed greets")
    reply = thread.send("hello", within=30)
    reply.check(icontains=["HELLO"], max_seconds=30, model="offline", finish_reason="stop")
    assert reply.seconds >= reply.first_token_seconds >= 0
    assert reply.usage is None


def test_misses(mosaic_tester):
    thread = mosaic_tester.thread("installed misses")
    thread.send("hello", within=30).check(equals="Goodbye")
"""


def test_plugin_is_loaded_without_a_conftest_line(
    client_venv: Path, outside: Path, live: Served
) -> None:
    (outside / "test_talk.py").write_text(PLUGIN_TESTS)
    ran = run(client_venv, "pytest", "-p", "no:cacheprovider", "-q", cwd=outside, url=live.url)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    # The example suites are collected too: six cases (two of them a dataset's rows), and the
    # two tests above.
    assert "1 failed, 7 passed" in ran.stdout, ran.stdout
    assert "expected the reply is 'Goodbye'" in ran.stdout


def test_plugin_with_an_unreachable_listener_is_one_error(client_venv: Path, outside: Path) -> None:
    (outside / "test_talk.py").write_text(PLUGIN_TESTS)
    url = f"http://127.0.0.1:{free_port()}"
    ran = run(client_venv, "pytest", "-p", "no:cacheprovider", "-q", cwd=outside, url=url)
    assert ran.returncode == pytest.ExitCode.USAGE_ERROR, ran.stdout + ran.stderr
    told = ran.stdout + ran.stderr
    assert f"the tester listener at {url} cannot run conversation tests" in told
    assert told.count("did not answer") == 1
    assert "Traceback" not in told
