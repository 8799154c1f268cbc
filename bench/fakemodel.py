"""An OpenAI-compatible `/v1/chat/completions` that takes a fixed time per reply (P5, P9).

`python -m bench.fakemodel PORT SECONDS [CALLS]`; loopback only. It stands for a model backend
whose every answer takes SECONDS, so the runner's concurrency is what P5 measures. With CALLS, it
acts as P9's model: it answers a turn with one `create_task` call per request, each with an id
of its own, until the request carries CALLS tool results after the turn's user message, and
then in words; without, every answer is in words.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPLY = "bench reply"
TASK_ARGUMENTS = json.dumps({"title": "bench task"})


def calls_made(messages: Sequence[dict[str, Any]]) -> int:
    """The tool results a request carries after its last user message: the calls the turn
    it answers has made so far (a thread's earlier turns are sent without theirs)."""
    made = 0
    for message in messages:
        if message.get("role") == "user":
            made = 0
        elif message.get("role") == "tool":
            made += 1
    return made


def answer(body: dict[str, Any], calls: int) -> tuple[dict[str, Any], str]:
    """The assistant message for `body` and its finish reason."""
    made = calls_made(body.get("messages") or [])
    if made >= calls:
        return {"role": "assistant", "content": REPLY}, "stop"
    call = {
        "id": f"call_bench_{made + 1}",
        "type": "function",
        "function": {"name": "create_task", "arguments": TASK_ARGUMENTS},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"


def handler(delay: float, calls: int = 0) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(delay)
            message, finish_reason = answer(body, calls)
            data = json.dumps(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "bench"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            ).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main() -> None:
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(delay, calls))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
