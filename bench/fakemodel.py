"""An OpenAI-compatible `/v1/chat/completions` that takes a fixed time per reply (P5).

`python -m bench.fakemodel PORT SECONDS`; loopback only. It stands for a model backend whose
every reply takes SECONDS, so the runner's concurrency is what the figure measures.
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def handler(delay: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(delay)
            data = json.dumps(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "bench"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "bench reply"},
                            "finish_reason": "stop",
                        }
                    ],
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
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(delay))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
