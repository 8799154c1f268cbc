"""The mutants (SPEC §10): one-line mistakes the suite must turn red for.

Each mutant is applied alone, to a copy of the project, never to the working tree. The script
checks that the mutated text occurs exactly once (a stale mutant is an error, not a pass), runs
the whole suite against the copy, restores the file and verifies its checksum, and prints one
line per mutant: `Mn <what> killed` or `Mn <what> survived`. It exits non-zero unless every
mutant is killed. Mutants are judged two at a time (TEST_WORKERS), each on a copy of its own.

    python tests/support/mutants.py            # every mutant
    python tests/support/mutants.py M3 M7      # some of them
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPY_IGNORE = shutil.ignore_patterns(
    ".venv*", ".git", "__pycache__", "*.sqlite3*", ".mypy_cache", ".ruff_cache", "staticfiles"
)
# The peers' virtualenvs (.venv-litellm is most of a gigabyte, .venv-promptfoo more) are linked,
# not copied: no mutant touches them.
LINKED = (".venv-litellm", ".venv-model", ".venv-promptfoo")


@dataclass(frozen=True)
class Mutant:
    id: str
    what: str
    path: str
    # (original, mutated) text pairs; a mutant that needs an import carries it as a second pair.
    edits: tuple[tuple[str, str], ...]
    # Tests that name the rule: run first, so a kill is found fast; the whole suite runs after
    # them unless one of them already turned red.
    suspects: tuple[str, ...] = ()


MUTANTS = (
    Mutant(
        "M1",
        "the owner check compares the business's human again",
        "broker/access.py",
        (
            (
                "if thread.owner != policy.owner(actor):",
                "if thread.owner != thread.project.business.human:",
            ),
        ),
        suspects=("tests/broker/test_scenarios.py",),
    ),
    Mutant(
        "M2",
        "the tester's thread list is the human's again",
        "broker/selectors.py",
        (
            (
                "owner=policy.owner(actor),\n            archived_at__isnull=not archived,",
                "owner=F('project__business__human'),\n            archived_at__isnull=not archived,",
            ),
        ),
        suspects=("tests/broker/test_reads.py",),
    ),
    Mutant(
        "M3",
        "the tester's turns are stored as `human-cli`",
        "broker/actors.py",
        (("role=TESTER, run=TESTER_RUN)", "role=TESTER, run=HUMAN_RUN)"),),
        suspects=("tests/broker/test_scenarios.py",),
    ),
    Mutant(
        "M4",
        "the tester's turn writes a `human.input` event",
        "broker/actions/threads.py",
        (
            (
                "    if actor.is_human:\n        request = do_record_event",
                "    if True:\n        request = do_record_event",
            ),
        ),
        suspects=("tests/broker/test_scenarios.py",),
    ),
    Mutant(
        "M5",
        "R9's substitution removed",
        "broker/policy.py",
        (("if thread_owner == TESTER and address == TESTER:", "if False:"),),
        suspects=("tests/broker/test_scenarios.py",),
    ),
    Mutant(
        "M6",
        "R11's guard removed",
        "broker/policy.py",
        (("if thread_owner == TESTER and recipient == HUMAN:", "if False:"),),
        suspects=("tests/broker/test_scenarios.py",),
    ),
    Mutant(
        "M7",
        "the stop matches no owner",
        "broker/actions/claims.py",
        (("filter(thread__owner=policy.owner(actor))", "filter(thread__owner=None)"),),
        suspects=("tests/broker/test_scenarios.py",),
    ),
    Mutant(
        "M8",
        "the boot check for a human named `tester` removed",
        "broker/policy.py",
        (("if human and human != TESTER:", "if human:"),),
        suspects=("tests/broker/test_business_file.py",),
    ),
    Mutant(
        "M9",
        "the human listener's refusal of X-Mosaic-Tester removed",
        "human/listener.py",
        (
            (
                'if scope["type"] in ("http", "websocket") and any(\n            _normalised(name) == TESTER_HEADER',
                "if False and any(\n            _normalised(name) == TESTER_HEADER",
            ),
        ),
        suspects=("tests/human/test_listener.py",),
    ),
    Mutant(
        "M10",
        "the tester listener's Origin check removed",
        "tester/gates.py",
        (
            (
                'return not is_write(request) or request.headers.get("Origin") == expected',
                "return True",
            ),
        ),
        suspects=("tests/tester/test_listener.py",),
    ),
    Mutant(
        "M11",
        "the tester listener's chat built from the human's caller",
        "tester/urls.py",
        (
            (
                "*api_routes(authentication=TESTER_AUTHENTICATION,",
                "*api_routes(authentication=HUMAN_AUTHENTICATION,",
            ),
            (
                "from chat.routes import api_routes\n",
                "from human.gates import HUMAN_AUTHENTICATION\nfrom chat.routes import api_routes\n",
            ),
        ),
        suspects=("tests/tester/test_listener.py",),
    ),
    Mutant(
        "M12",
        "the tester fence admits every write",
        "tester/gates.py",
        (
            (
                "return method in SAFE_METHODS or (method, url_name) in TESTER_WRITES",
                "return True",
            ),
        ),
        suspects=("tests/tester/test_fence.py", "tests/tester/test_middleware.py"),
    ),
    Mutant(
        "M13",
        "the tester composer disabled (back to the human's send switch)",
        "static/console/page.js",
        (
            (
                'const canSend = listener === "tester" || sendEnabled;',
                "const canSend = sendEnabled;",
            ),
        ),
        suspects=("tests/console",),
    ),
    Mutant(
        "M14",
        "open stores the human",
        "broker/actions/threads.py",
        (
            (
                "ThreadOpen.objects.create(thread=thread, by=policy.owner(actor))",
                "ThreadOpen.objects.create(thread=thread,"
                " by=Business.objects.get(pk=actor.business_id).human)",
            ),
        ),
        suspects=("tests/broker/test_scenarios.py",),
    ),
    Mutant(
        "M15",
        "the tester-data purge takes the human's threads too",
        "broker/actions/tester_purge.py",
        (("project__business_id=business_id, owner=TESTER,", "project__business_id=business_id,"),),
        suspects=("tests/broker/test_tester_purge.py",),
    ),
    Mutant(
        "M16",
        "the purge's delete guard lets a permit delete the human's rows",
        "broker/guards.py",
        (
            ("t.id = OLD.thread_id AND t.owner = '{TESTER}'", "t.id = OLD.thread_id"),
            ("id = OLD.thread_id AND owner = '{TESTER}'", "id = OLD.thread_id"),
        ),
        suspects=("tests/broker/test_tester_purge.py",),
    ),
    Mutant(
        "M17",
        "a tool call runs as the human instead of the run that holds the claim",
        "broker/steps.py",
        (
            (
                "task = actions.create_task(\n            actor, claim_id=claim.pk",
                "task = actions.create_task(\n            Actor.human(business_id=actor.business_id, "
                "username=claim.thread.owner), claim_id=claim.pk",
            ),
        ),
        suspects=("tests/broker/test_steps.py",),
    ),
    Mutant(
        "M18",
        "a tester's create_task is let through (R15 left to the database alone)",
        "broker/actions/tasks.py",
        (
            (
                'if request is None or request.body.get("thread") != claim.thread_id:',
                'if request is not None and request.body.get("thread") != claim.thread_id:',
            ),
        ),
        suspects=("tests/broker/test_steps.py",),
    ),
    Mutant(
        "M19",
        "send_message's `to` offers more than the role's send_to",
        "broker/tools.py",
        (
            (
                "send_message_tool(sorted(lists.send_to))",
                "send_message_tool(sorted(lists.send_to | lists.receive_from))",
            ),
        ),
        suspects=("tests/broker/test_steps.py",),
    ),
    Mutant(
        "M20",
        "a human thread's step is labelled to the tester, so the tester's trail shows it",
        "broker/steps.py",
        (("to_role=TESTER if claim.thread.owner == TESTER else HUMAN", "to_role=TESTER"),),
        suspects=("tests/broker/test_steps.py",),
    ),
    Mutant(
        "M21",
        "a consultation may consult again (no depth bound)",
        "broker/policy.py",
        (("    return refusals.CONSULT_TOO_DEEP", "    return None"),),
        suspects=("tests/broker/test_consult.py",),
    ),
    Mutant(
        "M22",
        "a stop of the asking instance leaves the consulted run working",
        "broker/actions/claims.py",
        (
            (
                "turns = turns.filter(Q(to_role=instance) | Q(from_role=instance))",
                "turns = turns.filter(to_role=instance)",
            ),
        ),
        suspects=("tests/broker/test_consult.py",),
    ),
    Mutant(
        "M23",
        "the tester's OpenAI-compatible endpoint takes any bearer token for its key",
        "tester/openai/gates.py",
        (
            (
                "return hmac.compare_digest(token.strip().encode(), key.encode())",
                "return True",
            ),
        ),
        suspects=("tests/tester/test_openai_listener.py",),
    ),
    Mutant(
        "M24",
        "a conversation goes on in the tester's thread whatever history the request sends",
        "broker/actions/conversations.py",
        (
            (
                "if history_of(candidate, role=actor.role) == wanted:",
                "if True:",
            ),
        ),
        suspects=("tests/broker/test_conversations.py",),
    ),
)


def checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def apply(mutant: Mutant, source: str) -> str:
    for original, mutated in mutant.edits:
        found = source.count(original)
        if found != 1:
            raise SystemExit(f"{mutant.id} is stale: {original!r} occurs {found} times")
        source = source.replace(original, mutated)
    return source


def run_suite(copy: Path, paths: tuple[str, ...] = ()) -> tuple[int, str]:
    """The exit status of the suite (or of `paths` in it) and the first test it failed on."""
    # A skipped test must not pass for a kill: MOSAIC_NO_SKIPS would turn skips into a failure.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("MOSAIC_NO_SKIPS", None)
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider"]
    # The suspects alone, in one process; the whole suite on the workers `make suite` uses.
    command += list(paths) or ["-n", os.environ.get("TEST_WORKERS", "2")]
    done = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)
    failed = [
        line.split()[1]
        for line in done.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR "))
    ]
    return done.returncode, failed[0] if failed else ""


def project_copy(scratch: Path, name: str) -> Path:
    """A copy of the project under `scratch`, the peers' virtualenvs linked."""
    copy = scratch / name
    shutil.copytree(ROOT, copy, ignore=COPY_IGNORE)
    for linked in LINKED:
        if (ROOT / linked).exists():
            (copy / linked).symlink_to(ROOT / linked)
    return copy


def judge(mutant: Mutant, copy: Path) -> str:
    """Apply `mutant` to `copy`, run its suspects (then, if they pass, the whole suite), restore
    the file, and say how it ended: `killed by TEST`, `survived` or `error (pytest exit N)`."""
    target = copy / mutant.path
    original = target.read_text()
    before = checksum(target)
    target.write_text(apply(mutant, original))
    try:
        status, first_failure = run_suite(copy, mutant.suspects)
        if status == 0:
            status, first_failure = run_suite(copy)
    finally:
        target.write_text(original)
    if checksum(target) != before:
        raise SystemExit(f"{mutant.id}: {mutant.path} was not restored")
    # Killed means a test failed: pytest exit 1 naming a failed test. Anything else (a
    # collection error, an interrupted run) is an error, not a kill.
    if status == 0:
        return "survived"
    if status == 1 and first_failure:
        return f"killed by {first_failure}"
    return f"error (pytest exit {status})"


def main(wanted: list[str]) -> int:
    """Judge the mutants `wanted` (every one when none is named), as many at once as
    TEST_WORKERS (2), each worker on a copy of its own; one line per mutant as it ends."""
    chosen = [m for m in MUTANTS if not wanted or m.id in wanted]
    workers = max(1, min(len(chosen), int(os.environ.get("TEST_WORKERS", "2") or 1)))
    pending: queue.SimpleQueue[Mutant] = queue.SimpleQueue()
    for mutant in chosen:
        pending.put(mutant)
    verdicts: dict[str, str] = {}

    def work(copy: Path) -> None:
        while True:
            try:
                mutant = pending.get_nowait()
            except queue.Empty:
                return
            verdicts[mutant.id] = judge(mutant, copy)
            print(f"{mutant.id} {mutant.what} {verdicts[mutant.id]}", flush=True)

    with tempfile.TemporaryDirectory(prefix="mosaic-mutants-") as scratch:
        copies = [project_copy(Path(scratch), f"project-{n}") for n in range(workers)]
        with ThreadPoolExecutor(workers) as pool:
            for done in [pool.submit(work, copy) for copy in copies]:
                done.result()
    survivors = sum(not verdict.startswith("killed") for verdict in verdicts.values())
    return 1 if survivors or len(verdicts) != len(chosen) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
