"""Log formats: plain lines, or one JSON object a line (MOSAIC_LOG_FORMAT=json).

A request's line carries its fields (`mosaic.edge.access_log`: listener, method, path, route,
status, ms, actor kind, client, request id) as the record's `request`; the JSON format writes
them beside the time, level, logger and message. Any other record is its time, level, logger,
message and, when it has one, its traceback.

`QuietDisallowedHost`: a request with a Host outside ALLOWED_HOSTS is a probe of the internet,
not an error of ours — one WARNING line, without Django's traceback.
"""

from __future__ import annotations

import datetime
import json
import logging
from typing import Any


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


class QuietDisallowedHost(logging.Filter):
    """Django logs a refused Host at ERROR with the exception's traceback: keep the sentence,
    at WARNING, alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno = logging.WARNING
        record.levelname = logging.getLevelName(logging.WARNING)
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True
