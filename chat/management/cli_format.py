"""How the command line shows projects, threads, opens and messages.

JSON documents use the shapes of the chat API (SPEC §6); the lines are for people:
`#<id> <from_role> → <to_role>: <body>` for a message.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime
from typing import Any

from broker.models import Message, Project, Thread, ThreadOpen

# Continuation lines of a multi-line body are indented, so every message line starts with `#`.
CONTINUATION = "\n    "


def to_json(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False)


def iso(moment: datetime) -> str:
    """ISO 8601 UTC with a `Z`, as the API writes times."""
    return moment.isoformat().replace("+00:00", "Z")


def printable(text: str) -> str:
    """Text safe for a terminal: control characters (escape sequences among them) made visible.

    Bodies come from other parties — an assistant's reply among them — and a raw escape
    sequence could rewrite what the reader's terminal shows.
    """
    return "".join(
        char if char in "\n\t" or unicodedata.category(char) != "Cc" else f"\\x{ord(char):02x}"
        for char in text
    )


def project_json(project: Project) -> dict[str, Any]:
    return {"id": project.pk, "name": project.name, "created_at": iso(project.created_at)}


def project_line(project: Project) -> str:
    return f"#{project.pk} {project.name}"


def thread_json(thread: Thread) -> dict[str, Any]:
    return {
        "id": thread.pk,
        "project": thread.project_id,
        "name": thread.name,
        "owner": thread.owner,
        "instance": thread.instance.name,
        "created_at": iso(thread.created_at),
    }


def thread_line(thread: Thread) -> str:
    return (
        f"#{thread.pk} {thread.name} (project {thread.project.name}, "
        f"{thread.instance.name}, owner {thread.owner})"
    )


def open_json(opened: ThreadOpen) -> dict[str, Any]:
    return {"thread": opened.thread_id, "by": opened.by, "at": iso(opened.at)}


def open_line(opened: ThreadOpen) -> str:
    return f"opened #{opened.thread_id} as {opened.by} at {iso(opened.at)}"


def message_json(message: Message) -> dict[str, Any]:
    return {
        "id": message.pk,
        "thread": message.thread_id,
        "from_role": message.from_role,
        "from_run": message.from_run,
        "to_role": message.to_role,
        "class": message.message_class,
        "body": message.body,
        "in_reply_to": message.in_reply_to_id,
        "request": message.request_id,
        "created_at": iso(message.created_at),
    }


def message_line(message: Message) -> str:
    body = printable(message.body).replace("\n", CONTINUATION)
    return f"#{message.pk} {message.from_role} → {message.to_role}: {body}"
