"""How the command line shows projects, threads, opens and messages.

JSON documents are the chat API's own shapes (`chat.api.shapes`, SPEC §6); the lines are for
people:
`#<id> <from_role> → <to_role>: <body>` for a message, with `[state]` after a turn whose reply
is off its usual course (SPEC §7.1: `[working]`, `[retrying: why]`, `[stopped]`,
`[failed: why]`) and `[cut off]` after a reply the model stopped at its token limit;
`#<id> <name>` for a project, with `[tester]` after one the tester created.
"""

from __future__ import annotations

import json
import unicodedata
from datetime import datetime
from typing import Any

from broker.models import Creator, Message, Project, ReplyState, Thread, ThreadOpen
from chat.api import shapes

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
    return dict(shapes.ProjectOut(project).data)


def project_line(project: Project) -> str:
    """`#<id> <name>`, with `[tester]` after a project the tester created."""
    line = f"#{project.pk} {project.name}"
    return f"{line} [tester]" if project.creator == Creator.TESTER else line


def thread_json(thread: Thread) -> dict[str, Any]:
    return dict(shapes.ThreadOut(thread).data)


def thread_line(thread: Thread) -> str:
    return (
        f"#{thread.pk} {thread.name} (project {thread.project.name}, "
        f"{thread.instance.name}, owner {thread.owner})"
    )


def open_json(opened: ThreadOpen) -> dict[str, Any]:
    return dict(shapes.OpenOut(opened).data)


def open_line(opened: ThreadOpen) -> str:
    return f"opened #{opened.thread_id} as {opened.by} at {iso(opened.at)}"


def message_json(message: Message) -> dict[str, Any]:
    return dict(shapes.MessageOut(message).data)


def message_line(message: Message) -> str:
    body = printable(message.body).replace("\n", CONTINUATION)
    return f"#{message.pk} {message.from_role} → {message.to_role}: {body}{reply_mark(message)}"


def reply_mark(message: Message) -> str:
    """What a person needs to know beside the body: a turn's reply state, a cut-off reply."""
    if message.is_cut_off:
        return "  [cut off]"
    state = message.reply_state
    if state in (None, ReplyState.PENDING, ReplyState.ANSWERED):
        return ""  # the usual course: a reply to come, or come
    progress = message.progress_or_none
    failure = printable(progress.failure) if progress is not None and progress.failure else ""
    return f"  [{state}: {failure}]" if failure else f"  [{state}]"
