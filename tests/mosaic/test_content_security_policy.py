"""The Content-Security-Policy of both listeners: every route answers with it, read
from the urlconfs (admin's whole tree too), so a new page without it fails; it allows no inline
or eval'd script, no plug-in, no `<base>` and no framing; the admin's one inline style runs by
the request's own nonce."""

from __future__ import annotations

import re

import httpx
import pytest
from django.contrib.auth.models import User

from tests.support.listener_fixtures import signed_in_staff
from tests.support.listener_routes import every_path
from tests.support.listeners import HUMAN, TESTER, ListenerClient

SELF = "'self'"
NONE = "'none'"
# What every answer's policy holds, whatever else it allows.
REQUIRED = {
    "default-src": {SELF},
    "script-src": {SELF},
    "connect-src": {SELF},
    # A `data:` image loads nothing; an image from anywhere else could carry text away.
    "img-src": {SELF, "data:"},
    "object-src": {NONE},
    "base-uri": {NONE},
    "frame-ancestors": {NONE},
}
# The pages each walk must reach and find rendered (200, HTML): the walk is not vacuous.
HUMAN_PAGES = {
    "",
    "signin",
    "api/docs",
    "admin/",
    "admin/broker/thread/",
    "admin/broker/instance/usage/",
    "admin/auth/user/<path:object_id>/change/",
}
TESTER_PAGES = {"", "api/docs"}


def directives(header: str) -> dict[str, set[str]]:
    return {
        name: set(sources)
        for name, *sources in (part.split() for part in header.split(";") if part.strip())
    }


def weaknesses(header: str | None) -> list[str]:
    """What an answer's policy lacks or allows beyond the rule; [] for a strict one."""
    if header is None:
        return ["no Content-Security-Policy"]
    policy = directives(header)
    found = [
        f"{name} is {sorted(policy.get(name, set()))}"
        for name, sources in REQUIRED.items()
        if policy.get(name) != sources
    ]
    styles = policy.get("style-src", set())
    if SELF not in styles or {"'unsafe-inline'", "'unsafe-eval'", "*"} & styles:
        found.append(f"style-src is {sorted(styles)}")
    return found


def found_in(answer: httpx.Response) -> list[str]:
    """The answer's policy's weaknesses, and `page` when it is a rendered HTML page."""
    rendered = answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    return weaknesses(answer.headers.get("content-security-policy")) + (
        ["page"] if rendered else []
    )


def walk(client: ListenerClient, listener: str, ident: str) -> dict[str, list[str]]:
    """What each route's GET answers, keyed by the route as written in the urlconf."""
    return {
        written: found_in(client.get(path)) for written, path in every_path(listener, ident).items()
    }


def pages(answers: dict[str, list[str]]) -> set[str]:
    return {written for written, found in answers.items() if found == ["page"]}


def weak(answers: dict[str, list[str]]) -> dict[str, list[str]]:
    return {written: found for written, found in answers.items() if found not in ([], ["page"])}


@pytest.mark.django_db
def test_every_human_route_answers_with_the_strict_policy(business) -> None:
    """The Console, sign-in, the API docs, the chat API and every admin route, as staff (the
    ids are staff's own, so its user pages render)."""
    client = signed_in_staff()
    answers = walk(client, HUMAN, str(User.objects.get(username="staff").pk))
    # Staff is signed in: admin's sign-in form is seen without a session.
    answers["admin/login/"] = found_in(ListenerClient(HUMAN).get("/admin/login/"))
    assert pages(answers) >= HUMAN_PAGES | {"admin/login/"}
    assert weak(answers) == {}


@pytest.mark.django_db
def test_every_tester_route_answers_with_the_strict_policy(tester_client: ListenerClient) -> None:
    answers = walk(tester_client, TESTER, "1")
    assert pages(answers) >= TESTER_PAGES
    assert weak(answers) == {}


def test_strict_policy_check_catches_each_weakening() -> None:
    """The check above fails a missing header, a missing directive and an unsafe source."""
    strict = (
        "default-src 'self'; script-src 'self'; connect-src 'self'; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'; style-src 'self'; img-src 'self' data:"
    )
    assert weaknesses(strict) == []
    assert weaknesses(None) == ["no Content-Security-Policy"]
    assert weaknesses(strict.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'"))
    assert weaknesses(strict.replace("script-src 'self'", "script-src 'self' 'unsafe-eval'"))
    assert weaknesses(strict.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'"))
    assert weaknesses(strict.replace("; frame-ancestors 'none'", ""))
    assert weaknesses(strict.replace("; base-uri 'none'", ""))
    assert weaknesses(strict.replace("object-src 'none'", "object-src 'self'"))
    assert weaknesses(strict.replace("img-src 'self' data:", "img-src *"))


@pytest.mark.django_db
def test_admin_inline_style_runs_by_the_requests_own_nonce(business) -> None:
    """The broker's admin style (`admin/broker/wrapping.html`) carries the nonce its answer's
    policy names, a new one each request; a page with no inline style names none."""
    client = signed_in_staff()
    nonces = []
    for _ in range(2):
        page = client.get("/admin/broker/thread/")
        styles = directives(page.headers["content-security-policy"])["style-src"]
        (allowed,) = (source for source in styles if source.startswith("'nonce-"))
        assert re.findall(r'<style nonce="([^"]+)"', page.text) == [allowed[7:-1]]
        nonces.append(allowed)
    assert nonces[0] != nonces[1]
    console = client.get("/")
    assert directives(console.headers["content-security-policy"])["style-src"] == {SELF}
