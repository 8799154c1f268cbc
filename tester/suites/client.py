"""The tester listener's chat API, spoken as the tester Console speaks it.

Writes carry the listener's own `Origin` and `Sec-Fetch-Site: same-origin` and are JSON (L3);
the tester listener makes every request the tester (L5), so no identity is sent at all. A reply
is waited for on the thread's socket (`/ws/chat/threads/ID/`), whose frames only wake the
waiter: what decides is the thread's messages read over HTTP, so a frame missed or never sent
(a turn that failed before the socket told it as owed) delays the answer by one poll at most.
"""

from __future__ import annotations

import json
import time
import unicodedata
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from .isolation import ThreadsHeard
from .steps import Step, steps_of
from .visible import visible

# A turn's reply states after which no reply will come (SPEC §7.1).
ENDED_STATES = frozenset({"stopped", "failed"})
REQUEST_SECONDS = 30.0
# The longest a waiter sleeps between two reads when no frame wakes it.
POLL_SECONDS = 1.0
PAGE = 500
# The header a listener names itself by on its answer to a route it does not have; and the
# name of the one that is not this client's.
LISTENER_HEADER = "X-Mosaic-Listener"
HUMAN_LISTENER = "human"


class ListenerError(Exception):
    """The listener refused a request, or could not be reached: a test run cannot go on."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class Reply:
    """The RESULT that answers a turn (R12), and when it came: `seconds` after the send the
    whole reply, `first_token_seconds` after it the first draft (SPEC §7.1), or the reply
    itself when it came whole; and the turn's `steps`, the tool calls made answering it
    (SPEC §7.2), as the read that found the reply gave them."""

    body: str
    message: dict[str, Any]
    seconds: float = 0.0
    first_token_seconds: float = 0.0
    steps: tuple[Step, ...] = ()

    @property
    def usage(self) -> dict[str, Any] | None:
        """`{"prompt_tokens", "completion_tokens"}` as the model server reported them."""
        usage = self.message.get("usage")
        return dict(usage) if isinstance(usage, dict) else None

    @property
    def model(self) -> str | None:
        return self.message.get("model")

    @property
    def finish_reason(self) -> str | None:
        return self.message.get("finish_reason")


@dataclass(frozen=True)
class Outcome:
    """How a turn ended for its sender: its reply, or the state it was left in."""

    turn: dict[str, Any]
    reply: Reply | None
    # `answered`, `stopped` or `failed`, or the state the turn was in when the wait ran out.
    state: str
    failure: str | None
    # Seconds from the send until the wait ended (the reply, the end of the turn, or the
    # deadline).
    seconds: float = 0.0

    @property
    def timed_out(self) -> bool:
        return self.reply is None and self.state not in ENDED_STATES

    @property
    def steps(self) -> tuple[Step, ...]:
        """The turn's steps when the wait ended, reply or none."""
        return self.reply.steps if self.reply is not None else steps_of(self.turn)


def utc_stamp() -> str:
    """Now in UTC, to the millisecond: what makes a repeat's thread names its own."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class TesterClient:
    """One tester listener at `url` (`http://127.0.0.1:PORT`). Safe to share between threads:
    each request opens its own connection."""

    # Not a test class, though pytest would take the name for one.
    __test__ = False

    def __init__(self, url: str) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ListenerError("invalid", f"{url!r} is not a listener's URL (http://HOST:PORT).")
        self.url = f"{parts.scheme}://{parts.netloc}"
        # The listener's own page is the origin of every write (L3).
        self.origin = self.url
        # No proxy: the tester listener is on loopback, and a proxy would change what it sees.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    # --- HTTP ---

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, **headers: str
    ) -> tuple[int, dict[str, Any]]:
        """One request; a refusal's `{"error", "detail"}` is raised as `ListenerError`."""
        sent = {"Accept": "application/json", "Sec-Fetch-Site": "same-origin"}
        if method != "GET":
            sent |= {"Origin": self.origin, "Content-Type": "application/json"}
        sent |= headers
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=sent)
        try:
            with self.opener.open(request, timeout=REQUEST_SECONDS) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            raise refusal_of(error, url=self.url) from None
        except (OSError, ValueError) as error:
            raise ListenerError(
                "unreachable", f"the tester listener at {self.url} did not answer ({error})"
            ) from None

    def project_id(self, name: str) -> int:
        """The id of the project `name`, created when missing (R2)."""
        found = self.find_project(name)
        if found is not None:
            return found
        try:
            _, answer = self.request("POST", "/api/chat/projects", {"name": name})
        except ListenerError as refusal:
            if refusal.code != "project-exists":
                raise
            # Created meanwhile by another repeat or test run.
            found = self.find_project(name)
            if found is None:
                raise
            return found
        return int(answer["project"]["id"])

    def instances(self) -> list[dict[str, Any]]:
        """The business's instances: each `name`, `role`, `default` and `pricing` (R24)."""
        _, answer = self.request("GET", "/api/chat/instances")
        return list(answer["instances"])

    def find_project(self, name: str) -> int | None:
        # The service stores names in Unicode normal form C: a suite file may spell "é" as
        # "e" and a combining accent.
        wanted = unicodedata.normalize("NFC", name)
        after = 0
        while True:
            _, answer = self.request("GET", f"/api/chat/projects?after={after}&limit={PAGE}")
            projects = answer["projects"]
            for project in projects:
                if project["name"] == wanted:
                    return int(project["id"])
            if len(projects) < PAGE:
                return None
            after = projects[-1]["id"]

    def create_thread(self, *, project: int, name: str, instance: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"project": project, "name": name}
        if instance is not None:
            body["instance"] = instance
        _, answer = self.request("POST", "/api/chat/threads", body)
        return dict(answer["thread"])

    def new_thread(self, *, project: int, name: str, instance: str | None) -> ConversationThread:
        """A thread of the tester's named `<name> · <UTC time>`; a name taken (by another repeat
        or test run in the same millisecond) is tried again with a later time."""
        for _attempt in range(5):
            try:
                thread = self.create_thread(
                    project=project, name=f"{name} · {utc_stamp()}", instance=instance
                )
            except ListenerError as refusal:
                if refusal.code != "thread-exists":
                    raise
                time.sleep(0.01)
                continue
            return ConversationThread(self, thread)
        raise ListenerError("thread-exists", f"no free thread name for {name!r}")

    def messages(self, thread_id: int, *, after: int) -> list[dict[str, Any]]:
        """The thread's messages after `after`, oldest first, every page."""
        found: list[dict[str, Any]] = []
        while True:
            path = f"/api/chat/threads/{thread_id}/messages?after={after}&limit={PAGE}"
            page = self.request("GET", path)[1]["messages"]
            found += page
            if len(page) < PAGE:
                return found
            after = page[-1]["id"]

    def send(self, thread_id: int, body: str) -> dict[str, Any]:
        """Send one turn, with an `Idempotency-Key` as the Console does (R21)."""
        _, answer = self.write("POST", f"/api/chat/threads/{thread_id}/messages", {"body": body})
        return dict(answer["message"])

    def write(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A write made once, whatever a retry of it would do (R21)."""
        return self.request(method, path, body, **{"Idempotency-Key": str(uuid.uuid4())})

    def edit(self, thread_id: int, message_id: int, body: str) -> dict[str, Any]:
        """A new version of one of the tester's turns with new text (R24): in place while it is
        the thread's latest, else in a new branch. `{"message", "request", "thread"}`."""
        path = f"/api/chat/threads/{thread_id}/messages/{message_id}/edit"
        return self.write("POST", path, {"body": body})[1]

    def regenerate(
        self, thread_id: int, message_id: int, *, instance: str | None = None
    ) -> dict[str, Any]:
        """One of the tester's turns (or its reply) asked again (R24), on another `instance` in
        a new branch. `{"message", "request", "thread"}`."""
        path = f"/api/chat/threads/{thread_id}/messages/{message_id}/regenerate"
        return self.write("POST", path, {} if instance is None else {"instance": instance})[1]

    def branch(
        self,
        thread_id: int,
        message_id: int,
        *,
        name: str | None = None,
        instance: str | None = None,
    ) -> dict[str, Any]:
        """A new thread of the tester's carrying the conversation up to `message_id` (R24)."""
        body: dict[str, Any] = {"message": message_id}
        body |= {key: value for key, value in (("name", name), ("instance", instance)) if value}
        _, answer = self.write("POST", f"/api/chat/threads/{thread_id}/branch", body)
        return dict(answer["thread"])

    def archive(self, thread_id: int) -> None:
        """Archive one of the tester's threads: it leaves the tester's working list."""
        self.write("PATCH", f"/api/chat/threads/{thread_id}", {"archived": True})

    # --- the stored history of test runs (tester listener only) ---

    def start_test_run(
        self,
        *,
        suites: list[str],
        compare: str | int | None,
        alpha: float,
        instances: list[str],
        keyword: str | None,
    ) -> dict[str, Any]:
        """A stored test run of `suites`, planned on `instances` ("" is the default) with the
        case selection `keyword`, compared with `compare` at `alpha`."""
        body = {
            "suites": suites,
            "compare": compare,
            "alpha": alpha,
            "instances": instances,
            "keyword": keyword,
        }
        _, answer = self.write("POST", "/api/suite-runs", body)
        return dict(answer["run"])

    def record_case(self, run_id: int, record: dict[str, Any]) -> dict[str, Any]:
        _, answer = self.write("POST", f"/api/suite-runs/{run_id}/cases", record)
        return dict(answer["case"])

    def end_test_run(self, run_id: int, *, halted: str | None = None) -> dict[str, Any]:
        """End a stored test run: finished, or (`halted`, its reason) halted."""
        body = {} if halted is None else {"reason": halted}
        _, answer = self.write("POST", f"/api/suite-runs/{run_id}/end", body)
        return dict(answer["run"])

    def comparison_page(
        self, run_id: int, other_id: int, *, same: bool, after: int | None
    ) -> dict[str, Any]:
        """One page of stored run `run_id` compared with run `other_id` by the listener (SPEC
        §6.3): its counts and PAGE of its cases in the listener's order, every case but the
        `same` ones or (`same`) those alone, after compared case `after` (None: the first)."""
        query = f"limit={PAGE}" + ("&same=true" if same else "")
        query += "" if after is None else f"&after={after}"
        return self.request("GET", f"/api/suite-runs/{run_id}/comparison/{other_id}?{query}")[1]

    def compared_case(self, run_id: int, other_id: int, case_id: int) -> dict[str, Any]:
        """Case `case_id` of stored run `run_id` beside run `other_id`'s same case: each run's
        shown repeat and the first page of their turns, what was sent and each reply."""
        path = f"/api/suite-runs/{run_id}/comparison/{other_id}/cases/{case_id}?limit={PAGE}"
        return self.request("GET", path)[1]

    # --- the thread's socket ---

    def socket(self, thread_id: int) -> ClientConnection | None:
        """The thread's live socket, or None when it cannot be opened (the waiter then polls)."""
        parts = urlsplit(self.url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        # Only the newest rows: what the socket carries is a wake-up, not the record.
        newest = self.newest_id(thread_id)
        try:
            return connect(
                f"{scheme}://{parts.netloc}/ws/chat/threads/{thread_id}/?after={newest}&batch=1",
                origin=Origin(self.origin),
                proxy=None,
                open_timeout=REQUEST_SECONDS,
                ping_interval=None,
                # Connected here and closed by the thread (`close`), not by a `with` block.
                legacy=True,
            )
        except (OSError, WebSocketException, TimeoutError):
            return None

    def newest_id(self, thread_id: int) -> int:
        _, answer = self.request("GET", f"/api/chat/threads/{thread_id}/messages?limit=1")
        messages = answer["messages"]
        return int(messages[-1]["id"]) if messages else 0


def refusal_of(error: urllib.error.HTTPError, *, url: str) -> ListenerError:
    """The listener's refusal as it says it (`code: detail`); a route the human listener does
    not have, as what it means here: the client was pointed at the wrong listener."""
    if error.code == 404 and error.headers.get(LISTENER_HEADER) == HUMAN_LISTENER:
        return ListenerError(
            "human-listener",
            f"{url} is the human listener; conversation tests run against the tester listener "
            "(MOSAIC_TESTER_PORT)",
        )
    try:
        answer = json.load(error)
        return ListenerError(str(answer["error"]), str(answer["detail"]))
    except (ValueError, KeyError, TypeError):
        return ListenerError(f"http-{error.code}", f"the listener answered {error.code}")


class ConversationThread:
    """One tester thread: send turns in order, each waiting for its reply.

    The thread's socket says when something happened; what it says about a turn is noted with
    the time it came (`_hear`): the first `reply.draft` of a turn is its first token, and the
    frame carrying its RESULT is when the reply arrived. The record itself is always read over
    HTTP.
    """

    def __init__(self, client: TesterClient, thread: dict[str, Any]) -> None:
        self.client = client
        self.thread = thread
        self.id = int(thread["id"])
        self.name = str(thread["name"])
        self.instance = str(thread.get("instance") or "")
        self._socket: ClientConnection | None = None
        self._socket_tried = False
        # Turn id → when its first draft came, and when a frame brought its reply.
        self._first_draft: dict[int, float] = {}
        self._reply_heard: dict[int, float] = {}
        # Every thread named by what this thread's client received (`only_own_threads`).
        self.heard = ThreadsHeard(self.id)

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> ConversationThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ask(self, body: str, *, within: float) -> Outcome:
        """Send `body` and wait up to `within` seconds for the RESULT in reply to it."""
        self._listen()
        sent_at = time.monotonic()
        turn = self.client.send(self.id, body)
        self.heard.note(turn, "the answer to its send")
        return self.wait(turn, within=within, sent_at=sent_at)

    def ask_again(self, turn_id: int, *, within: float) -> Outcome:
        """Regenerate turn `turn_id`, the thread's latest (R24): a new version of it in this
        thread, with the turn's own text; wait up to `within` seconds for the RESULT in reply
        to the new version."""
        self._listen()
        sent_at = time.monotonic()
        answer = self.client.regenerate(self.id, turn_id)
        self.heard.note(answer, "the answer to its regenerate")
        return self.wait(dict(answer["message"]), within=within, sent_at=sent_at)

    def _listen(self) -> None:
        """Open the socket once, before the first turn is sent, so no frame about it can come
        before we listen."""
        if not self._socket_tried:
            self._socket_tried = True
            self._socket = self.client.socket(self.id)

    def send(self, body: str, *, within: float = 30.0) -> Reply:
        """Send `body` and return its reply; `NoReply` (an AssertionError) when none came."""
        outcome = self.ask(body, within=within)
        if outcome.reply is None:
            # Told to a person by pytest: the failure's sentence may quote a model server.
            raise NoReply(visible(describe_no_reply(outcome, within)))
        return outcome.reply

    def wait(self, turn: dict[str, Any], *, within: float, sent_at: float | None = None) -> Outcome:
        started = time.monotonic() if sent_at is None else sent_at
        deadline = time.monotonic() + within
        turn_id = int(turn["id"])
        while True:
            state = turn.get("reply_state") or "pending"
            for message in self.client.messages(self.id, after=turn_id - 1):
                self.heard.note(message, "a message read over HTTP")
                if message["id"] == turn_id:
                    turn = message
                    state = message.get("reply_state") or state
                elif message["class"] == "RESULT" and message["in_reply_to"] == turn_id:
                    arrived = self._reply_heard.get(turn_id, time.monotonic())
                    first = min(self._first_draft.get(turn_id, arrived), arrived)
                    # The turn precedes its reply in the same read (id order), and its steps
                    # all ended before the reply was written: `turn` holds every one.
                    reply = Reply(
                        body=str(message["body"]),
                        message=message,
                        seconds=arrived - started,
                        first_token_seconds=first - started,
                        steps=steps_of(turn),
                    )
                    return Outcome(turn, reply, "answered", None, reply.seconds)
            if state in ENDED_STATES:
                return Outcome(turn, None, state, turn.get("failure"), time.monotonic() - started)
            left = deadline - time.monotonic()
            if left <= 0:
                return Outcome(turn, None, state, turn.get("failure"), time.monotonic() - started)
            self.pause(min(left, POLL_SECONDS))

    def pause(self, seconds: float) -> None:
        """Until the socket says something happened in the thread, or `seconds` pass."""
        if self._socket is None:
            time.sleep(seconds)
            return
        try:
            self._hear(self._socket.recv(timeout=seconds))
            # Whatever else has come already is part of the same news.
            while True:
                self._hear(self._socket.recv(timeout=0))
        except TimeoutError:
            return
        except WebSocketException:
            # Closed: wait by polling from now on.
            self._socket = None

    def _hear(self, frame: str | bytes) -> None:
        """Note when a turn's first draft, or a frame with its reply, came."""
        now = time.monotonic()
        try:
            data = json.loads(frame)
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        self.heard.note(data, f"a {str(data.get('type'))!r} frame on the thread's socket")
        if data.get("type") == "reply.draft" and isinstance(data.get("in_reply_to"), int):
            self._first_draft.setdefault(data["in_reply_to"], now)
            return
        rows = data.get("rows") if data.get("type") == "messages" else [data.get("message")]
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("class") == "RESULT":
                answered = row.get("in_reply_to")
                if isinstance(answered, int):
                    self._reply_heard.setdefault(answered, now)


class NoReply(AssertionError):
    """A turn that expected a reply got none."""


def describe_no_reply(outcome: Outcome, within: float) -> str:
    if outcome.state == "failed":
        return f"the turn failed: {outcome.failure or 'no reason given'}"
    if outcome.state == "stopped":
        return "the turn was stopped"
    return f"no reply within {within:g} s (the turn is {outcome.state})"
