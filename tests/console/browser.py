"""Chromium for the browser tests: Debian's build, driven by Playwright.

Playwright's own browser downloads are never used; it drives the system's Chromium through
`executable_path`. Each launch gets a fresh temporary profile (Playwright makes one per launch).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
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


def require_chromium() -> str:
    """Chromium's path. Without it the browser tests skip, or fail under
    MOSAIC_REQUIRE_BROWSER=1 (CI's pass in which every part must be present)."""
    if os.access(CHROMIUM, os.X_OK):
        return str(CHROMIUM)
    reason = f"the browser tests need Chromium at {CHROMIUM} (apt-get install chromium)"
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{reason}; {REQUIRE_VARIABLE}=1 makes its absence a failure")
    pytest.skip(reason)
