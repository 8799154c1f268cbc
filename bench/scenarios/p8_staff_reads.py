"""P8: staff reads at a million rows — admin's thread page, lists and searches, and
the Consoles' thread list, message page and message-text search.

The database is seeded by `bench.seed THREADS MESSAGES --trail` (a tenth of the messages in one
thread, every message copied into the trail). The product runs as `make run` runs it (`manage.py
serve --no-runner`); the demo's staff user signs in to admin over HTTP as a browser would (the
login form, its CSRF token, the session cookie), and the tester's Console reads go to the tester
listener. Each page is read one request at a time — a staff member's read, not a load — after
one warm-up read, `requests` times; the figures are its latencies and the size of its answer.
"""

from __future__ import annotations

import http.cookiejar
import re
import time
import urllib.parse
import urllib.request
from typing import Any

from bench import processes as proc
from bench import report
from bench.harness import Harness
from bench.stats import summary

# The targets of staff reads at a million rows: each page's p50, and the thread page's size.
PAGE_P50_MS = 300.0
THREAD_PAGE_BYTES = 1_000_000
STAFF = "staff"  # the demo's staff superuser (`setupdemo`), its password the bench's


class StaffBrowser:
    """One signed-in staff session on the human listener: cookies kept, as a browser keeps them."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def sign_in(self) -> None:
        login = f"{self.base}/admin/login/?next=/admin/"
        form = self.read(login)[1].decode()
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert found, "no CSRF token on the admin login page"
        fields = {
            "csrfmiddlewaretoken": found.group(1),
            "username": STAFF,
            "password": proc.PASSWORD,
            "next": "/admin/",
        }
        request = urllib.request.Request(
            login,
            data=urllib.parse.urlencode(fields).encode(),
            headers={"Origin": self.base, "Referer": login, "Sec-Fetch-Site": "same-origin"},
            method="POST",
        )
        with self.opener.open(request, timeout=60) as answer:
            assert answer.url.endswith("/admin/"), f"staff sign-in failed: {answer.url}"

    def read(self, url: str) -> tuple[int, bytes]:
        with self.opener.open(url, timeout=120) as answer:
            return answer.status, answer.read()


def time_reads(browser: StaffBrowser, url: str, requests: int) -> dict[str, Any]:
    """`requests` reads of `url` one after the other, after a warm-up read."""
    browser.read(url)
    latencies, sizes, errors = [], [], 0
    for _ in range(requests):
        began = time.perf_counter()
        try:
            status, body = browser.read(url)
        except OSError:  # an HTTP error status or a failed connection
            errors += 1
            continue
        latencies.append((time.perf_counter() - began) * 1000)
        sizes.append(len(body))
        errors += status >= 400
    return {"latency": summary(latencies), "bytes": max(sizes, default=0), "errors": errors}


def paths(seeded: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Page name → (listener, path): what staff and the tester's Console read at this size."""
    thread, project = seeded["big_thread"], seeded["big_project"]
    search = urllib.parse.quote(seeded["search"])
    return {
        "admin: thread page (busiest thread)": ("human", f"/admin/broker/thread/{thread}/change/"),
        "admin: thread list": ("human", "/admin/broker/thread/"),
        "admin: message list": ("human", "/admin/broker/message/"),
        "admin: message list of the busiest thread": (
            "human",
            f"/admin/broker/message/?thread__id__exact={thread}",
        ),
        "admin: trail list": ("human", "/admin/broker/trailrow/"),
        "admin: trail list of the busiest thread": (
            "human",
            f"/admin/broker/trailrow/?thread__id__exact={thread}",
        ),
        "admin: turn list": ("human", "/admin/broker/turnprogress/"),
        "admin: claim list": ("human", "/admin/broker/threadclaim/"),
        "admin: message search": ("human", f"/admin/broker/message/?q={search}"),
        "admin: trail search": ("human", f"/admin/broker/trailrow/?q={search}"),
        "Console: thread list": ("tester", f"/api/chat/threads?project={project}"),
        "Console: message page (busiest thread)": (
            "tester",
            f"/api/chat/threads/{thread}/messages",
        ),
        "Console: message-text search": (
            "tester",
            f"/api/chat/threads?project={project}&q={search}",
        ),
    }


def measure(server: proc.Process, seeded: dict[str, Any], requests: int) -> dict[str, Any]:
    """Each page of `paths`, read `requests` times; page name → its figures."""
    human, tester = server.wait_ports
    staff = StaffBrowser(human)
    staff.sign_in()
    # The tester listener needs no sign-in; its reads carry what a Console's fetch carries.
    console = StaffBrowser(tester)
    console.opener.addheaders = [("Origin", console.base), ("Sec-Fetch-Site", "same-origin")]
    figures = {}
    for name, (listener, path) in paths(seeded).items():
        browser = staff if listener == "human" else console
        figures[name] = time_reads(browser, browser.base + path, requests)
    return figures


def rows_and_verdicts(
    figures: dict[str, Any], setup: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The section's table rows and its verdicts against the targets above."""
    rows = [
        {
            "setup": f"{name} ({setup})",
            "latency": figure["latency"],
            "errors": figure["errors"],
            "figure": f"{figure['bytes']:,} bytes",
        }
        for name, figure in figures.items()
    ]
    slowest = max(figures, key=lambda name: figures[name]["latency"]["p50"])
    thread_page = next(figure for name, figure in figures.items() if "thread page" in name)
    verdicts = [
        report.verdict(
            f"slowest page's p50 ms, {setup} ({slowest})",
            figures[slowest]["latency"]["p50"],
            PAGE_P50_MS,
            higher=False,
        ),
        report.verdict(
            f"thread page bytes, {setup}", thread_page["bytes"], THREAD_PAGE_BYTES, higher=False
        ),
        report.check(
            f"errors, {setup}: {sum(f['errors'] for f in figures.values())}",
            all(f["errors"] == 0 for f in figures.values()),
        ),
    ]
    return rows, verdicts


def p8(harness: Harness, database: str, setup: str) -> None:
    """P8: staff reads and the Console's reads at a million rows (`measure`)."""
    plan = harness.plan
    seeded = proc.seed(database, plan.p8_threads, plan.p8_messages, "--trail")
    harness.log(
        f"P8 {setup} seeded {seeded['messages']} messages and {seeded['trail']} trail rows "
        f"in {seeded['seconds']:.0f} s"
    )
    server = proc.product_server(harness.workdir, database, label=f"product-p8-{setup.lower()}")
    with harness.running(server):
        figures = measure(server, seeded, plan.p8_requests)
    section = harness.section(
        f"P8 {setup}",
        f"P8 — staff reads with {seeded['threads']:,} threads, {seeded['messages']:,} messages "
        f"and {seeded['trail']:,} trail rows ({setup})",
        f"each page's p50 ≤ {PAGE_P50_MS:g} ms; the thread page ≤ 1 MB",
    )
    section["rows"], section["verdicts"] = rows_and_verdicts(figures, setup)
    section["note"] = (
        f"Each page read {plan.p8_requests} times one after the other, after a warm-up read, "
        "by the demo's staff user signed in over HTTP (admin, human listener) or as the "
        f"tester's Console (tester listener); the busiest thread holds "
        f'{plan.p8_messages // 10:,} messages, and the search asks "{seeded["search"]}". '
        "The figure is the largest answer's size."
    )
    harness.raw[f"P8 {setup}"] = {"seeded": seeded, "figures": figures}
