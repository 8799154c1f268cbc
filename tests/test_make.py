"""The make targets the README documents do what it says they do."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path

import httpx

from tests.console.server import CLEARED, answers, free_port

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


def planned_from_scratch(target: str) -> list[str]:
    """The commands `make <target>` would run on a fresh clone (`-B`: every stamp out of date)."""
    result = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", target],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [line.strip() for line in result.stdout.splitlines()]


def installs(commands: list[str]) -> list[str]:
    """The requirement files the commands install into the project's virtualenv."""
    return [
        word
        for line in commands
        if line.startswith(".venv/bin/python -m pip install")
        for word in re.findall(r"-r (\S+)", line)
    ]


def test_make_run_installs_the_runtime_set_only() -> None:
    """`make run` installs requirements.txt; the dev set is `make test`'s."""
    assert installs(planned_from_scratch("run")) == ["requirements.txt"]


def test_make_test_installs_the_dev_set() -> None:
    """The dev set includes the runtime set, so `make test` installs it alone."""
    assert "requirements-dev.txt" in installs(planned_from_scratch("test"))


def test_check_code_target_runs_makemigrations_check() -> None:
    """`make test` fails when a model change has no migration (`check-code` runs the check)."""
    assert ".venv/bin/python manage.py makemigrations --check --dry-run" in planned("check-code")


def test_make_run_serves_both_listeners(tmp_path: Path) -> None:
    """README: `make run` sets up a fresh database and serves both listeners until stopped."""
    human_port, tester_port = free_port(), free_port()
    while tester_port == human_port:
        tester_port = free_port()
    environment = {
        **{name: value for name, value in os.environ.items() if name not in CLEARED},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "MOSAIC_HUMAN_HOST": "127.0.0.1",
        "MOSAIC_HUMAN_PORT": str(human_port),
        "MOSAIC_TESTER_HOST": "127.0.0.1",
        "MOSAIC_TESTER_PORT": str(tester_port),
        # Not the default 7334: tests run side by side.
        "MOSAIC_OPS_PORT": "0",
        "MOSAIC_DEMO_PASSWORD": "make-run-password",
        # Set, so the run writes no key into the checkout's .env (`manage.py testerkey`).
        "MOSAIC_TESTER_API_KEY": "make-run-key",
        "MOSAIC_ASSISTANT_BACKEND": "offline",
        "PYTHONUNBUFFERED": "1",
    }
    environment.pop("REDIS_URL", None)
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "run"],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make, serve and daphne stop together
        )
    try:
        deadline = time.monotonic() + 120
        while not (answers(human_port) and answers(tester_port)):
            assert process.poll() is None, log.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-4000:]
            time.sleep(0.1)
        human = httpx.get(f"http://127.0.0.1:{human_port}/", timeout=10)
        tester = httpx.get(f"http://127.0.0.1:{tester_port}/", timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert human.status_code < 500 and tester.status_code == 200, (human, tester)
    printed = log.read_text(errors="replace")
    assert "human Console:" in printed
    assert "tester API key: the value of MOSAIC_TESTER_API_KEY" in printed


def test_cluster_tests_on_missing_database_end_clean() -> None:
    """`make faults` on a fresh machine: the configured database does not exist, and the run
    (here, the package's one test that starts no cluster) ends without an error at teardown."""
    missing = f"mosaic_missing_{uuid.uuid4().hex[:12]}"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/cluster/test_setup.py"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{missing}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout and "error" not in result.stdout


# Documented targets no CI step and no test runs, and why. Each is run by hand before a release.
NOT_RUN_IN_CI = {
    "mutation": "mutmut over the gates and guards takes far longer than the rest of CI",
    "fuzz": "the full fuzzing; the suite runs the same fuzzers, bounded, on every CI run",
    "bench": "rewrites docs/benchmarks.md from minutes of timing on a quiet machine",
    "bench-quick": "a timing run whose figures need a quiet machine; it passes or fails nothing",
    "cluster": "serves until stopped; `make faults` starts the same `manage.py cluster`",
    "model-check": "a real model on CPU takes minutes, and its first install compiles llama.cpp; "
    "the suite runs the same end-to-end cases against the LiteLLM proxy",
    "screenshots": "pictures for people to look at; the browser tests check the same views",
}
# Documented targets a test of the suite invokes as typed.
RUN_BY_TESTS = {"run": "test_make_run_serves_both_listeners"}


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][a-z-]*):", text, flags=re.MULTILINE))


def documented_targets() -> set[str]:
    """Every make target the README names."""
    words = re.findall(r"\bmake ([a-z][a-z-]*)", (ROOT / "README.md").read_text())
    return set(words) & make_targets()


def ci_targets() -> set[str]:
    """Every make target `.ci/run` runs."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line for line in lines if not line.lstrip().startswith(("#", "echo"))]
    return set(re.findall(r"\bmake ([a-z][a-z-]*)", "\n".join(commands)))


def test_documented_make_targets_each_run_in_ci_or_a_test() -> None:
    """Every target the README documents runs in CI or in a test, or is listed with a reason."""
    unexercised = documented_targets() - ci_targets() - set(RUN_BY_TESTS)
    assert unexercised == set(NOT_RUN_IN_CI)
    assert all(name in globals() for name in RUN_BY_TESTS.values())


def test_ci_runs_deploy_check() -> None:
    """`make deploy-check` (docs/operations.md, Production) runs in CI as typed."""
    assert "deploy-check" in ci_targets()


def test_model_check_runs_the_model_tests_the_default_run_leaves_out() -> None:
    """`make model-check` selects the `model` tests; every other run of pytest (CI's, the
    mutants') leaves them out through the default options."""
    assert ".venv/bin/python -m pytest -m model -rP --durations=0" in planned("model-check")
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "-m 'not model'" in options["ini_options"]["addopts"]


def test_model_set_is_built_without_its_multimodal_part() -> None:
    """requirements-model.txt says the Makefile leaves llama.cpp's multimodal part out: the
    install of that set carries `-DLLAVA_BUILD=OFF` to the build (a CMAKE_ARGS of the caller's
    after it, so it can add to or override it), and the other sets' installs carry nothing."""
    model = planned_from_scratch(".venv-model/.installed")
    assert [line for line in model if "pip install" in line] == [
        'CMAKE_ARGS="-DLLAVA_BUILD=OFF $CMAKE_ARGS" .venv-model/bin/python -m pip install '
        "--quiet --disable-pip-version-check -r requirements-model.txt"
    ]
    litellm = planned_from_scratch(".venv-litellm/.installed")
    assert [line for line in litellm if "pip install" in line] == [
        ".venv-litellm/bin/python -m pip install --quiet --disable-pip-version-check "
        "-r requirements-litellm.txt"
    ]
