"""Fixtures of the browser tests: the live server, its model server, Chromium, and Console pages
on it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import fields

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.console.browser import LAUNCH_ARGS, require_chromium
from tests.console.server import (
    HUMAN_USERNAME,
    PASSWORD,
    LiveServer,
    create_scratch_database,
    drop_scratch_database,
    is_postgres,
)
from tests.model_servers import FakeModel, serve_fake_model

TIMEOUT_MS = 10_000
MODEL_NAME = "console-model"
# Seconds before a failed attempt is tried again: long enough to see the turn retrying.
RETRY_SECONDS = "4"

OpenConsole = Callable[[str], Page]


@pytest.fixture(scope="session")
def chromium() -> str:
    return require_chromium()


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
    workdir = tmp_path_factory.mktemp("console")
    test_url = os.environ.get("DATABASE_URL", "")
    scratch = f"mosaic_console_{os.getpid()}"
    if is_postgres(test_url):
        database_url = create_scratch_database(test_url, scratch)
    else:
        database_url = f"sqlite:///{workdir / 'console.sqlite3'}"
    server = LiveServer(
        database_url=database_url,
        workdir=workdir,
        settings={
            "MOSAIC_ASSISTANT_BACKEND": "openai",
            "MOSAIC_ASSISTANT_BASE_URL": model_server.url,
            "MOSAIC_ASSISTANT_MODEL": MODEL_NAME,
            "MOSAIC_ASSISTANT_API_KEY": "console-test-key",
            "MOSAIC_ASSISTANT_RETRY_SECONDS": RETRY_SECONDS,
        },
    )
    try:
        server.prepare()
        server.start()
        yield server
    finally:
        server.stop()
        if is_postgres(test_url):
            drop_scratch_database(test_url, scratch)


@pytest.fixture(scope="package")
def browser(chromium: str) -> Iterator[Browser]:
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS)
        yield launched
        launched.close()


def sign_in(page: Page, human_url: str) -> None:
    """Through the sign-in page, as a person would; it goes on to the Console."""
    page.goto(f"{human_url}/signin")
    page.get_by_label("Username").fill(HUMAN_USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{human_url}/")


@pytest.fixture
def open_console(browser: Browser, console_server: LiveServer) -> Iterator[OpenConsole]:
    """Opens the human Console (signed in as `ada`) or the tester Console, each in a browser
    context of its own; a script error on any page fails the test."""
    contexts = []
    errors: list[str] = []

    def open_page(listener: str) -> Page:
        context = browser.new_context()
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(f"{listener}: {error}"))
        if listener == "tester":
            page.goto(f"{console_server.tester_url}/")
        else:
            sign_in(page, console_server.human_url)
        return page

    yield open_page
    for context in contexts:
        context.close()
    assert not errors, errors
