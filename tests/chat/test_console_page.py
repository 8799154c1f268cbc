"""Who the human Console's page is for, decided by the page itself (`chat.views`), and
each request logged once (L6's line for a chat request, the edge's for any other)."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError

from mosaic.management.commands.serve import OneLineCommandLine
from tests.support.listener_fixtures import signed_in_staff
from tests.support.listeners import TESTER, ListenerClient


def test_console_without_a_session_is_the_sign_in_form(anonymous_client: ListenerClient) -> None:
    """A first visit to `/` goes to the sign-in form, not a page saying "signed out"."""
    page = anonymous_client.get("/")
    assert (page.status_code, page.headers["location"]) == (302, "/signin")


def test_console_for_the_human_is_the_console(human_client: ListenerClient) -> None:
    page = human_client.get("/")
    assert page.status_code == 200
    assert 'data-visitor="human"' in page.text
    assert 'id="not-the-human"' not in page.text


def test_console_for_staff_says_it_is_the_humans(business) -> None:
    """Staff (signed in, not the business's human) are told whose Console it is."""
    page = signed_in_staff().get("/")
    assert page.status_code == 200
    assert 'data-visitor="other"' in page.text
    assert "This Console is the business" in page.text
    assert 'id="sign-out"' not in page.text


def test_console_needs_no_database(
    human_client: ListenerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page answers while the database does not (the fault tests): the page finds out."""

    def cut(*args, **kwargs):
        raise OperationalError("cut")

    monkeypatch.setattr("chat.views.access_human_actor", cut)
    page = human_client.get("/")
    assert page.status_code == 200
    assert 'data-visitor="unknown"' in page.text


def test_tester_console_needs_no_sign_in(business) -> None:
    page = ListenerClient(TESTER).get("/")
    assert page.status_code == 200
    assert 'data-visitor="tester"' in page.text


def test_each_request_logs_one_line(
    human_client: ListenerClient, caplog: pytest.LogCaptureFixture
) -> None:
    """L6: a chat request's one line names its user; a page, a static file and a refusal made
    before any view get one line each from the listener's edge, never a second."""
    caplog.set_level(logging.INFO, logger="mosaic.requests")
    human_client.get("/api/chat/projects")
    human_client.get("/")
    human_client.get("/static/console/favicon.svg")
    human_client.get("/api/chat/projects", headers={"X-Mosaic-Tester": "1"})
    lines = [r.getMessage() for r in caplog.records if r.name == "mosaic.requests"]
    assert lines == [
        'chat GET /api/chat/projects 200 user="ada"',
        "http GET / 200",
        "http GET /static/console/favicon.svg 200",
        "http GET /api/chat/projects 403",
    ]


def test_serve_turns_daphne_access_log_off() -> None:
    """daphne's access line repeated each request's own line: `serve` runs daphne without it."""
    server = OneLineCommandLine.server_class(
        application=None, endpoints=["tcp:port=0"], action_logger=print
    )
    assert server.action_logger is None
