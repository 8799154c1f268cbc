"""Links from the HTML report to the tester Console: a thread opens there, and only when its
link is clicked (the page itself fetches nothing)."""

from __future__ import annotations

from html import escape


def thread_link(thread: int, console_url: str | None) -> str:
    """`thread 12` as HTML, linked to the thread in the tester Console at `console_url` (none:
    the words alone)."""
    if not console_url:
        return f"thread {thread}"
    href = escape(f"{console_url.rstrip('/')}/#thread={thread}")
    return f'<a href="{href}">thread {thread}</a>'
