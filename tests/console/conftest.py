"""Fixtures of the browser tests: the live server, its model server, Chromium, and Console pages
on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import fields

import pytest
from playwright.sync_api import Browser, Page

from tests.console.api import LiveApi
from tests.console.assistant import MODEL_NAME, assistant_settings
from tests.console.browser import launched, require_browser
from tests.console.server import HUMAN_USERNAME, PASSWORD, LiveServer, serving
from tests.support.console_pages import (
    CSP_VIOLATION,
    DESKTOP,
    REPORT_CSP_VIOLATIONS,
    TIMEOUT_MS,
    OpenConsole,
    sign_in,
)
from tests.support.model_servers import FakeModel, serve_fake_model


@pytest.fixture(scope="session")
def chromium() -> str:
    return require_browser()


@pytest.fixture(scope="package")
def model_server() -> Iterator[FakeModel]:
    """The server's model: an OpenAI-compatible fake whose answers each test shapes (`model`)."""
    with serve_fake_model(FakeModel(models=[MODEL_NAME])) as served:
        yield served


@pytest.fixture
def model(model_server: FakeModel) -> Iterator[FakeModel]:
    """The model server, answered as shaped by the test; back to its defaults after it."""
    yield model_server
    defaults = FakeModel(models=[MODEL_NAME])
    for item in fields(FakeModel):
        if item.name not in ("url", "requests", "headers", "arrived", "hung_up", "closing"):
            setattr(model_server, item.name, getattr(defaults, item.name))


# Package scope: the browser's event loop must be gone before the tests after this package run
# their own loops in the main thread.
@pytest.fixture(scope="package")
def console_server(
    chromium: str, model_server: FakeModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """`manage.py serve` over a database of its own, migrated and with the demo business, its
    assistant answered by the tests' model server."""
    with serving(
        tmp_path_factory.mktemp("console"),
        f"mosaic_console_{os.getpid()}",
        settings=assistant_settings(model_server.url),
    ) as server:
        yield server


@pytest.fixture(scope="package")
def browser(chromium: str) -> Iterator[Browser]:
    with launched(chromium) as started:
        yield started


@pytest.fixture
def tester_api(console_server: LiveServer) -> Iterator[LiveApi]:
    """The live server's API as the tester, as the runner speaks to it."""
    api = LiveApi(console_server.tester_url)
    yield api
    api.close()


@pytest.fixture
def human_api(console_server: LiveServer) -> Iterator[LiveApi]:
    """The live server's API as the human, signed in."""
    api = LiveApi(console_server.human_url)
    api.sign_in(HUMAN_USERNAME, PASSWORD)
    yield api
    api.close()


@pytest.fixture
def open_console(browser: Browser, console_server: LiveServer) -> Iterator[OpenConsole]:
    """Opens the human Console (signed in as `ada`, or at the sign-in page) or the tester
    Console, each in a browser context of its own, at a viewport and colour scheme; a script
    error or a Content-Security-Policy violation on any page fails the test."""
    contexts = []
    errors: list[str] = []

    def report_violation(listener: str, text: str) -> None:
        if text.startswith(CSP_VIOLATION):
            errors.append(f"{listener}: {text}")

    def open_page(
        listener: str,
        *,
        viewport: dict[str, int] = DESKTOP,
        dark: bool = False,
        signed_in: bool = True,
    ) -> Page:
        context = browser.new_context(
            viewport=viewport,  # type: ignore[arg-type]
            color_scheme="dark" if dark else "light",
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        context.add_init_script(REPORT_CSP_VIOLATIONS)
        context.on("console", lambda message: report_violation(listener, message.text))
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(f"{listener}: {error}"))
        if listener == "tester":
            page.goto(f"{console_server.tester_url}/")
        elif signed_in:
            sign_in(page, console_server.human_url)
        else:
            page.goto(f"{console_server.human_url}/signin")
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert not errors, errors
