"""The broker's writes. Each public verb checks, then stores, atomically.

Verbs take the actor first and everything else by keyword. Each locks what it races on and
pushes to the channel layer only after commit (`broker.events`). Helpers named `do_*` are
trusted: they state their preconditions and check nothing themselves.

One module a domain, each importing only those above it in this list; callers use the names
re-exported here (`actions.send_to_thread`):

- `streams`: the business's stream lock (`appending`, `appending_to_thread`), thread row locks,
  and the trusted helpers that append trail rows, messages and events.
- `threads`: projects and threads, and a human's or tester's turn (`thread.send`).
- `claims`: claims opened, renewed and ended; the stop (R13), an instance's end (R14), the reaper.
- `turns`: a run's attempts at a turn (`turn.start`, `turn.draft`, `turn.fail`).
- `messages`: `message.send` and consultations (R23).
- `conversations`: a conversation sent whole, mapped onto a tester thread (SPEC §6.1).
- `versions`: versions and branches of an owner's conversation (R24).
- `tasks`: tasks (R15), decisions (R19) and system notices (R17).
- `suite_runs`: the tester's stored test runs (R22's `suite_run.*`), used as a module.
- `suite_comparisons`: two stored test runs compared, and a case's replies side by side
  (read as `suite_run.read`), used as a module.
- `tester_purge`: old tester data deleted under purge permits, used as a module.
"""

from __future__ import annotations

from broker.actions.claims import (
    RUN_CLAIM_ENDS,
    STOPS,
    Stop,
    do_end_claim,
    do_expire_claim,
    end_claim,
    end_instance,
    open_claim,
    reap_claims,
    renew_claim,
    stop_assistant,
)
from broker.actions.conversations import continue_conversation, start_conversation
from broker.actions.messages import consult, expire_consultation, send_message
from broker.actions.streams import (
    appending,
    appending_to_thread,
    do_lock_streams,
    do_record_event,
    do_record_message,
    do_record_trail,
    locked_threads,
)
from broker.actions.tasks import TESTER_TASK_REFUSED, create_decision, create_task, post_notice
from broker.actions.threads import (
    SentTurn,
    archive_thread,
    change_thread,
    create_project,
    create_thread,
    do_record_thread_change,
    mark_read,
    open_thread,
    pin_thread,
    rename_thread,
    send_to_thread,
)
from broker.actions.turns import draft_turn, fail_turn, start_turn
from broker.actions.versions import NewTurn, branch_thread, edit_turn, regenerate_turn

__all__ = [
    "RUN_CLAIM_ENDS",
    "STOPS",
    "TESTER_TASK_REFUSED",
    "NewTurn",
    "SentTurn",
    "Stop",
    "appending",
    "appending_to_thread",
    "archive_thread",
    "branch_thread",
    "change_thread",
    "consult",
    "continue_conversation",
    "create_decision",
    "create_project",
    "create_task",
    "create_thread",
    "do_end_claim",
    "do_expire_claim",
    "do_lock_streams",
    "do_record_event",
    "do_record_message",
    "do_record_thread_change",
    "do_record_trail",
    "draft_turn",
    "edit_turn",
    "end_claim",
    "end_instance",
    "expire_consultation",
    "fail_turn",
    "locked_threads",
    "mark_read",
    "open_claim",
    "open_thread",
    "pin_thread",
    "post_notice",
    "reap_claims",
    "regenerate_turn",
    "rename_thread",
    "renew_claim",
    "send_message",
    "send_to_thread",
    "start_conversation",
    "start_turn",
    "stop_assistant",
]
