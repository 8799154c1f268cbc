"""Log formats: plain lines, or one JSON object a line (MOSAIC_LOG_FORMAT=json).

A request's line carries its fields (`mosaic.edge.access_log`: listener, method, path, route,
status, ms, actor kind, client, request id) as the record's `request`; the JSON format writes
them beside the time, level, logger and message. Any other record is its time, level, logger,
message and, when it has one, its traceback.

`QuietDisallowedHost`: a request with a Host outside ALLOWED_HOSTS is a probe of the internet,
not an error of ours — one WARNING line, without Django's traceback. `QuietUnreadableBody`: so
is a body Django could not parse (`chat.bodies`) — one WARNING line naming why.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any

from chat.bodies import UNREADABLE_BODY


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "request", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def _quieten(record: logging.LogRecord, *, naming: tuple[str, ...] = ()) -> None:
    """`record` as one WARNING line, without the traceback: its message, then those of
    `naming` it does not say already."""
    message = record.getMessage()
    added = [words for words in naming if words and words not in message]
    if added:
        # Escaped as Django escapes a logged path: the client's words never break the line.
        said = "; ".join(added).encode("unicode_escape").decode("ascii")
        record.msg = f"{message} ({said})"
        record.args = ()
    record.levelno = logging.WARNING
    record.levelname = logging.getLevelName(logging.WARNING)
    record.exc_info = None
    record.exc_text = None
    record.stack_info = None


class QuietDisallowedHost(logging.Filter):
    """Django logs a refused Host at ERROR with the exception's traceback: keep the sentence,
    at WARNING, alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        _quieten(record)
        return True


class QuietUnreadableBody(logging.Filter):
    """Django logs a body it could not parse with the exception's traceback, 25 lines an
    anonymous request can ask for (a malformed multipart body at the sign-in): keep the
    sentence, the path and the parser's reason, at WARNING, on one line. Any other record, a server
    error's traceback among them, passes as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        exception = record.exc_info[1] if record.exc_info else None
        if isinstance(exception, UNREADABLE_BODY):
            # Django's `log_response` passes the request: its path, and the parser's reason.
            path = getattr(getattr(record, "request", None), "path", "")
            _quieten(record, naming=(str(path), str(exception)))
        return True
