"""The one refusal type of the broker, and its stable codes (SPEC §6).

The broker speaks codes, never HTTP: `chat/` maps each code to a status in one table and the
consumers map it to a close code in another; a test proves every code has an entry in both.
"""

from __future__ import annotations

from typing import Final

INVALID: Final = "invalid"
HOST_REFUSED: Final = "host-refused"
NOT_AUTHENTICATED: Final = "not-authenticated"
THREAD_NOT_OWNED: Final = "thread-not-owned"
TESTER_OFF: Final = "tester-off"
TESTER_REQUIRED: Final = "tester-required"
TESTER_REFUSED: Final = "tester-refused"
TESTER_LISTENER_REQUIRED: Final = "tester-listener-required"
ORIGIN_REFUSED: Final = "origin-refused"
FETCH_METADATA_REFUSED: Final = "fetch-metadata-refused"
CSRF_FAILED: Final = "csrf-failed"
PROXY_HEADER_REFUSED: Final = "proxy-header-refused"
MESSAGE_SENDER_REFUSED: Final = "message-sender-refused"
MESSAGE_RECIPIENT_REFUSED: Final = "message-recipient-refused"
TESTER_THREAD_HUMAN: Final = "tester-thread-human"
TESTER_REPLY_REQUIRED: Final = "tester-reply-required"
SEND_DISABLED: Final = "send-disabled"
NOT_FOUND: Final = "not-found"
THREAD_EXISTS: Final = "thread-exists"
PROJECT_EXISTS: Final = "project-exists"
NOT_HELD: Final = "not-held"
CLAIM_ENDED: Final = "claim-ended"
CONSULT_TOO_DEEP: Final = "consult-too-deep"
TURN_IN_PROGRESS: Final = "turn-in-progress"
TOO_LARGE: Final = "too-large"
UNSUPPORTED_MEDIA_TYPE: Final = "unsupported-media-type"
IDEMPOTENCY_KEY_REUSED: Final = "idempotency-key-reused"
TOO_MANY_REQUESTS: Final = "too-many-requests"
UNAVAILABLE: Final = "unavailable"
INVALID_BUSINESS: Final = "invalid-business"
INVALID_MESSAGING: Final = "invalid-messaging"

# Every code the product can answer with. Transports map each one; tests iterate this.
CODES: Final = frozenset(
    {
        INVALID,
        HOST_REFUSED,
        NOT_AUTHENTICATED,
        THREAD_NOT_OWNED,
        TESTER_OFF,
        TESTER_REQUIRED,
        TESTER_REFUSED,
        TESTER_LISTENER_REQUIRED,
        ORIGIN_REFUSED,
        FETCH_METADATA_REFUSED,
        CSRF_FAILED,
        PROXY_HEADER_REFUSED,
        MESSAGE_SENDER_REFUSED,
        MESSAGE_RECIPIENT_REFUSED,
        TESTER_THREAD_HUMAN,
        TESTER_REPLY_REQUIRED,
        SEND_DISABLED,
        NOT_FOUND,
        THREAD_EXISTS,
        PROJECT_EXISTS,
        NOT_HELD,
        CLAIM_ENDED,
        CONSULT_TOO_DEEP,
        TURN_IN_PROGRESS,
        TOO_LARGE,
        UNSUPPORTED_MEDIA_TYPE,
        IDEMPOTENCY_KEY_REUSED,
        TOO_MANY_REQUESTS,
        UNAVAILABLE,
        INVALID_BUSINESS,
        INVALID_MESSAGING,
    }
)


class Refusal(Exception):
    """The broker refused a call. `code` is stable kebab-case; `detail` is one sentence."""

    def __init__(self, code: str, detail: str) -> None:
        if code not in CODES:
            raise ValueError(f"unknown refusal code {code!r}")
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
