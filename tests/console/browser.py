"""Chromium for the browser tests: Debian's build, driven by Playwright.

Playwright's own browser downloads are never used; it drives the system's Chromium through
`executable_path`. Each launch gets a fresh temporary profile (Playwright makes one per launch).

The tests drive Debian's `chromium-headless-shell` where it is installed: the same Chromium
build (Blink, V8, its network stack) without the browser's window machinery, which is what
Playwright itself launches for headless tests, and a quarter less CPU a browser test here
(docs/decisions/testing-and-ci.md). The full `chromium` serves where the shell is missing, and
always for the screenshots.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from tests.support.console_pages import TIMEOUT_MS

CHROMIUM = Path("/usr/bin/chromium")
HEADLESS_SHELL = Path("/usr/bin/chromium-headless-shell")
REQUIRE_VARIABLE = "MOSAIC_REQUIRE_BROWSER"
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_browser() -> str:
    """The browser the tests drive: Debian's headless shell of Chromium where it is installed,
    else Chromium itself (`require_chromium`)."""
    if os.access(HEADLESS_SHELL, os.X_OK):
        return str(HEADLESS_SHELL)
    return require_chromium()


def require_chromium() -> str:
    """Chromium's path. Without it the browser tests skip, or fail under
    MOSAIC_REQUIRE_BROWSER=1 (CI's pass in which every part must be present)."""
    if os.access(CHROMIUM, os.X_OK):
        return str(CHROMIUM)
    reason = f"the browser tests need Chromium at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{reason}; {REQUIRE_VARIABLE}=1 makes its absence a failure")
    pytest.skip(reason)


@contextmanager
def launched(executable: str) -> Iterator[Browser]:
    """The browser at `executable` (`require_browser`, `require_chromium`), driven by
    Playwright with the suite's launch arguments, its expectations waiting `TIMEOUT_MS`."""
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()
