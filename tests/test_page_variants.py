"""The PostgreSQL and Redis pass runs each group of page variants once, and nothing else less
(tests/support/page_variants.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.page_variants import ONE, SWITCH

ROOT = Path(__file__).resolve().parents[1]

CASES = """
import pytest

DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
EVERYWHERE = [
    pytest.param("human", DESKTOP, False, id="human-desktop-light"),
    pytest.param("tester", DESKTOP, True, id="tester-desktop-dark"),
    pytest.param("human", PHONE, True, id="human-phone-dark"),
    pytest.param("tester", PHONE, False, id="tester-phone-light"),
]

@pytest.mark.parametrize(("listener", "viewport", "dark"), EVERYWHERE)
def test_everywhere(listener, viewport, dark):
    pass

@pytest.mark.parametrize("size", ["phone", "desktop"])
@pytest.mark.parametrize("dark", [True, False])
def test_sizes_and_schemes(size, dark):
    pass

@pytest.mark.parametrize("viewport", [PHONE])
def test_phone_only(viewport):
    pass

@pytest.mark.parametrize("count", [1, 2])
def test_not_a_page(count):
    pass

def test_plain():
    pass
"""


def collected(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, switch: str) -> set[str]:
    monkeypatch.setenv(SWITCH, switch)
    pytester.makepyfile(test_cases=CASES)
    run = pytester.inline_run(
        "--collect-only", "-p", "tests.support.page_variants", "-p", "no:django"
    )
    (finished,) = run.getcalls("pytest_collection_finish")
    return {item.nodeid.removeprefix("test_cases.py::") for item in finished.session.items}


def test_one_variant_of_each_group_is_kept_the_desktop_and_light_one_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert collected(pytester, monkeypatch, ONE) == {
        # Each listener keeps a case: the listener is not the page's.
        "test_everywhere[human-desktop-light]",
        "test_everywhere[tester-desktop-dark]",
        "test_sizes_and_schemes[False-desktop]",
        # A function whose only case is a phone keeps it.
        "test_phone_only[viewport0]",
        "test_not_a_page[1]",
        "test_not_a_page[2]",
        "test_plain",
    }


def test_without_the_switch_every_variant_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(collected(pytester, monkeypatch, "")) == 4 + 4 + 1 + 2 + 1


def functions(node_ids: set[str]) -> set[str]:
    return {node_id.split("[", 1)[0] for node_id in node_ids}


def collect_browser_tests(switch: str) -> set[str]:
    env = {**os.environ, SWITCH: switch}
    env.pop("PYTEST_XDIST_WORKER", None)
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "tests/console"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    return {line for line in listing.splitlines() if line.startswith("tests/console/")}


def test_every_browser_test_function_is_in_the_pass_that_runs_each_variant_once() -> None:
    """On the real collection: every browser test function keeps a case, none is added, and the
    pass is smaller for it."""
    every = collect_browser_tests("")
    once = collect_browser_tests(ONE)
    assert once < every
    assert functions(once) == functions(every)
