"""Over real sockets against `manage.py serve`: a body over
MOSAIC_REQUEST_MAX_BYTES is refused `too-large` while it arrives, never read in full nor spooled
to a file; a malformed multipart body gets the JSON refusal of any other refused body.

The server runs with TMPDIR pointed at an empty directory of the test's: a spooled body would
be a file open there (Python's temporary files are unlinked, so the open descriptors of the
server process are what shows them, as well as the directory's listing).
"""

from __future__ import annotations

import json
import os
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.console.server import LiveServer, serving

LIMIT = 256 * 1024
# Twisted's socket read: a chunked body is refused within the read that passes the limit.
READ = 64 * 1024
# What a declared length claims: the size of the upload in the issue.
HUGE = 600_000_000
# The most the client's and the server's kernels may hold beyond what the server read.
CLIENT_SEND_BUFFER = 64 * 1024
SERVER_RECEIVE_BUFFER_MAX = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
PUSHED_MAX = LIMIT + READ + 2 * CLIENT_SEND_BUFFER + SERVER_RECEIVE_BUFFER_MAX
PIECE = 16 * 1024
# A generous bound on each socket wait: a server that never answers fails, not hangs.
WAIT_SECONDS = 30.0


@pytest.fixture(scope="module")
def spool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spool")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, spool: Path) -> Iterator[LiveServer]:
    with serving(
        tmp_path_factory.mktemp("body-limit"),
        f"mosaic_body_limit_{os.getpid()}",
        settings={"TMPDIR": str(spool), "MOSAIC_REQUEST_MAX_BYTES": str(LIMIT)},
        serve_arguments=("--no-runner",),
    ) as live:
        yield live


def spooled(server: LiveServer, spool: Path) -> list[str]:
    """Files of the spool directory: listed, or open in the server process though unlinked."""
    assert server.process is not None
    open_files = []
    for descriptor in Path(f"/proc/{server.process.pid}/fd").iterdir():
        try:
            target = os.readlink(descriptor)
        except OSError:  # closed while listed
            continue
        if target.startswith(str(spool)):
            open_files.append(target)
    return [*open_files, *(str(path) for path in spool.iterdir())]


def connect(port: int) -> socket.socket:
    client = socket.socket()
    # A small send buffer of its own: what the client pushes is what the server let in.
    client.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CLIENT_SEND_BUFFER)
    client.settimeout(WAIT_SECONDS)
    client.connect(("127.0.0.1", port))
    return client


def head(port: int, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def sign_in_headers(port: int) -> dict[str, str]:
    """L2's Origin and Fetch Metadata, so that only the body decides the answer."""
    return {"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}


def read_response(client: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """The final response on `client` (interim `100 Continue` skipped): status, headers, body."""
    data = b""
    while True:
        while b"\r\n\r\n" not in data:
            piece = client.recv(65536)
            assert piece, f"closed before a response: {data!r}"
            data += piece
        raw_head, data = data.split(b"\r\n\r\n", 1)
        status_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        if status != 100:
            break
    headers = {}
    for line in header_lines:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(data) < length:
        piece = client.recv(65536)
        assert piece, "closed within the response body"
        data += piece
    return status, headers, data[:length]


def readable(client: socket.socket) -> bool:
    ready, _, _ = select.select([client], [], [], 0)
    return bool(ready)


def closed_by_server(client: socket.socket) -> bool:
    """Whether pushing more fails: the server closed the connection rather than read on."""
    pushed = 0
    try:
        while pushed <= PUSHED_MAX:
            pushed += client.send(b"x" * PIECE)
    except OSError:  # reset, broken pipe, or a send the server never drains
        return True
    return False


def test_declared_length_over_limit_refused_before_any_body_byte(
    server: LiveServer, spool: Path
) -> None:
    """`Content-Length: 600000000` gets the JSON 413 to its headers alone: the
    client has sent no byte of the body, nothing is spooled, and the server reads no more."""
    port = server.human_port
    headers = {
        **sign_in_headers(port),
        "Content-Type": "application/json",
        "Content-Length": str(HUGE),
    }
    with connect(port) as client:
        client.sendall(head(port, "/api/auth/login", headers))
        status, response_headers, body = read_response(client)
        assert (status, json.loads(body)["error"]) == (413, "too-large")
        assert response_headers["content-type"] == "application/json"
        assert response_headers["connection"] == "close"
        assert spooled(server, spool) == []
        assert closed_by_server(client)
    assert "http POST /api/auth/login 413" in server.log_tail()


def test_declared_length_over_limit_with_expect_continue_gets_no_invitation(
    server: LiveServer,
) -> None:
    """A client that waits for `100 Continue` is refused instead, and never invited to send."""
    port = server.human_port
    headers = {
        **sign_in_headers(port),
        "Content-Type": "application/json",
        "Content-Length": str(HUGE),
        "Expect": "100-continue",
    }
    with connect(port) as client:
        client.sendall(head(port, "/api/auth/login", headers))
        received = b""
        while piece := client.recv(65536):
            received += piece
    assert received.startswith(b"HTTP/1.1 413 ")
    assert b"100 Continue" not in received


@pytest.mark.parametrize("listener", ["human", "tester"])
def test_chunked_body_refused_once_it_passes_the_limit(
    server: LiveServer, spool: Path, listener: str
) -> None:
    """A chunked body is refused while it streams in, once past the limit:
    the JSON 413 comes before the client could push more than the limit, one read and the
    sockets' buffers, nothing is spooled, and the server then reads no more."""
    port = server.human_port if listener == "human" else server.tester_port
    headers = {
        **sign_in_headers(port),
        "Content-Type": "application/json",
        "Transfer-Encoding": "chunked",
    }
    chunk = f"{PIECE:x}\r\n".encode() + b"x" * PIECE + b"\r\n"
    pushed = 0
    with connect(port) as client:
        client.sendall(head(port, "/api/chat/projects", headers))
        try:
            while not readable(client) and pushed <= PUSHED_MAX:
                assert spooled(server, spool) == []
                client.sendall(chunk)
                pushed += len(chunk)
        except OSError:  # the server closed as it refused; its answer was sent before
            pass
        status, response_headers, body = read_response(client)
        assert (status, json.loads(body)["error"]) == (413, "too-large")
        assert response_headers["connection"] == "close"
        assert LIMIT < pushed <= PUSHED_MAX
        assert spooled(server, spool) == []
        assert closed_by_server(client)


def test_body_within_limit_held_in_memory(server: LiveServer, spool: Path) -> None:
    """A body within the limit but past Twisted's 100 kB is read into memory, not a file: the
    `100 Continue` shows the server has taken the headers and chosen where the body goes."""
    port = server.human_port
    payload = json.dumps({"username": "x" * 200_000, "password": "y"}).encode()
    assert 100_000 < len(payload) <= LIMIT
    headers = {
        **sign_in_headers(port),
        "Content-Type": "application/json",
        "Content-Length": str(len(payload)),
        "Expect": "100-continue",
    }
    with connect(port) as client:
        client.sendall(head(port, "/api/auth/login", headers))
        assert client.recv(65536).startswith(b"HTTP/1.1 100 Continue")
        assert spooled(server, spool) == []
        client.sendall(payload[:-1])
        assert spooled(server, spool) == []
        client.sendall(payload[-1:])
        status, _, body = read_response(client)
    # The app answered it (a name that long is no user's), in JSON.
    assert status != 413
    assert "error" in json.loads(body)


# A multipart body without its boundary: Twisted's parse and Django's both reject it.
MALFORMED_MULTIPART = {"Content-Type": "multipart/form-data"}
MALFORMED_BODY = b"not a multipart body"


def test_malformed_multipart_to_the_api_is_refused_in_json(server: LiveServer) -> None:
    """A malformed multipart body gets the API's JSON refusal of any body
    that is not JSON (415), not the server's bare 400, and its log line."""
    response = httpx.post(
        f"{server.human_url}/api/auth/login",
        content=MALFORMED_BODY,
        headers={**sign_in_headers(server.human_port), **MALFORMED_MULTIPART},
        timeout=WAIT_SECONDS,
    )
    assert (response.status_code, response.json()["error"]) == (415, "unsupported-media-type")
    assert "POST /api/auth/login 415" in server.log_tail()


def test_malformed_multipart_form_post_is_refused_in_json(server: LiveServer) -> None:
    """Admin's form posts are parsed by Django, whose parse error is the 400
    `invalid` of every malformed request, logged as any request is. The form's CSRF cookie
    is there, so that the check reads the body."""
    with httpx.Client(base_url=server.human_url, timeout=WAIT_SECONDS) as browser:
        assert browser.get("/admin/login/").status_code == 200
        response = browser.post(
            "/admin/login/",
            content=MALFORMED_BODY,
            headers={**sign_in_headers(server.human_port), **MALFORMED_MULTIPART},
        )
    assert (response.status_code, response.json()["error"]) == (400, "invalid")
    assert "http POST /admin/login/ 400" in server.log_tail()
