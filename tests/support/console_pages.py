"""Console pages in the browser tests: how long an expectation waits, the two viewports, the
Content-Security-Policy violations a page reports, how a test opens a page (`OpenConsole`, the
`open_console` fixture's type) and signs in through it."""

from __future__ import annotations

from typing import Protocol

from playwright.sync_api import Page

from tests.console.server import HUMAN_USERNAME, PASSWORD

# How long an expectation waits: generous, since the suite runs on two workers beside the
# servers and browsers they start, and a wait only lasts this long when a test fails.
TIMEOUT_MS = 20_000

# Every Content-Security-Policy violation of a page, reported to the console where the test
# reads it (`open_console`). Playwright installs it through the browser's own channel, which the
# page's policy does not govern. A violation with no source file was made by a script the test
# evaluated itself, not by the page: axe's check of CSS orientation locks copies each
# `@import`ed stylesheet (admin's forms import their widgets') into a `<style>` of its own.
CSP_VIOLATION = "content-security-policy violation:"
REPORT_CSP_VIOLATIONS = f"""
document.addEventListener("securitypolicyviolation", (event) => event.sourceFile && console.error(
    "{CSP_VIOLATION} " + event.effectiveDirective + " blocked " + (event.blockedURI || "inline")
    + " on " + location.href + " at " + event.sourceFile + ":" + event.lineNumber
    + (event.sample ? " (" + event.sample + ")" : "")
), true);
"""

# The two viewports the Console is tested at: a laptop, and a phone (below 700 px, SPEC §8).
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


class OpenConsole(Protocol):
    def __call__(
        self,
        listener: str,
        *,
        viewport: dict[str, int] = ...,
        dark: bool = ...,
        signed_in: bool = ...,
    ) -> Page: ...


def sign_in(page: Page, human_url: str) -> None:
    """Through the sign-in page, as a person would; it goes on to the Console."""
    page.goto(f"{human_url}/signin")
    page.get_by_label("Username").fill(HUMAN_USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{human_url}/")
