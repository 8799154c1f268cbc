"""`make mutation`: mutmut over the broker's policy and access modules and the listeners' gates
and ASGI guards (docs/security.md, "Mutation testing"; configuration in pyproject.toml).

mutmut itself never edits a source file: it writes its mutated copy to `mutants/`. This script
goes one step further and runs it in a scratch copy of the project, so neither the working tree
nor its `mutants/` directory is touched, and every run starts afresh (no cached verdicts).

The run fails unless every mutant is killed or is one of EQUIVALENT below, each with the reason
no test can tell it apart from the product; an entry that no longer matches a surviving mutant
fails the run too, so the list stays true.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPY_IGNORE = shutil.ignore_patterns(
    ".venv",
    ".git",
    "__pycache__",
    "*.sqlite3*",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "staticfiles",
    "mutants",
)

SENTENCE = "changes only the sentence of a refusal; clients read the code (SPEC §6)"
CASE_INSENSITIVE_HEADERS = "request.headers looks names up case-insensitively"
CODEC_NAME = "codec names are case-insensitive: the same codec"
SQLITE_LOCKS = "row locks do not exist on SQLite, where this runs; the PostgreSQL pass covers them"
CSRF_ARGS = "CsrfViewMiddleware.process_view reads neither the view's args nor its kwargs"
ASGI_HEADERS = "`headers` is a required key of an ASGI HTTP scope: the default is never used"
ASGI_BODY = "`body` of http.response.body defaults to b'' in ASGI: the same empty answer"
SOCKET_DETAIL = "a WebSocket close carries the code and reason only, never the detail"
FALSY = "`False` and `None` are both false where it is read (`or`)"
NO_EMPTY_NAME = "no server delivers a header with an empty name, so '' is never looked up"

UNUSED_RESPONSE = "process_request and process_view never call the middleware's get_response"
SERVER_HOST = "the host part of the server address is never read, only the port"

# mutant name -> (a fragment of its changed line, why no test can kill it)
EQUIVALENT: dict[str, tuple[str, str]] = {
    # broker/access.py
    "broker.access.x_access_claim__mutmut_14": ("of=None", SQLITE_LOCKS),
    "broker.access.x_access_claim__mutmut_15": ("XXselfXX", SQLITE_LOCKS),
    "broker.access.x_access_claim__mutmut_16": ('"SELF"', SQLITE_LOCKS),
    "broker.access.x_access_claim__mutmut_26": ("XXNo such claim", SENTENCE),
    "broker.access.x_access_claim__mutmut_27": ("no such claim", SENTENCE),
    "broker.access.x_access_claim__mutmut_28": ("NO SUCH CLAIM", SENTENCE),
    "broker.access.x_access_claim__mutmut_39": ("XXThe claim's lease", SENTENCE),
    "broker.access.x_access_claim__mutmut_40": ("the claim's lease", SENTENCE),
    "broker.access.x_access_claim__mutmut_41": ("THE CLAIM'S LEASE", SENTENCE),
    "broker.access.x_access_message__mutmut_11": ("XXNo such message", SENTENCE),
    "broker.access.x_access_message__mutmut_12": ("no such message", SENTENCE),
    "broker.access.x_access_message__mutmut_13": ("NO SUCH MESSAGE", SENTENCE),
    # chat/gates.py
    "chat.gates.xǁConsoleSendEnabledǁhas_permission__mutmut_4": (
        '"allowed_without_send", None',
        FALSY,
    ),
    "chat.gates.xǁProxyUserAuthenticationǁauthenticate__mutmut_5": ('"LATIN-1"', CODEC_NAME),
    "chat.gates.xǁHumanSessionAuthenticationǁauthenticate__mutmut_17": (
        "lambda _request: 0",
        UNUSED_RESPONSE,
    ),
    "chat.gates.xǁHumanSessionAuthenticationǁauthenticate__mutmut_21": (
        "None, None, {}",
        CSRF_ARGS,
    ),
    "chat.gates.xǁHumanSessionAuthenticationǁauthenticate__mutmut_22": ("(), None)", CSRF_ARGS),
    # tester/gates.py
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_4": ('{"XXXX"}', NO_EMPTY_NAME),
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_18": ('"LATIN-1"', CODEC_NAME),
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_20": (
        '"headers", None)',
        ASGI_HEADERS,
    ),
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_22": (
        'get("headers", )',
        ASGI_HEADERS,
    ),
    "tester.gates.xǁTesterOriginǁhas_permission__mutmut_7": (
        'get("origin")',
        CASE_INSENSITIVE_HEADERS,
    ),
    "tester.gates.xǁTesterOriginǁhas_permission__mutmut_8": (
        'get("ORIGIN")',
        CASE_INSENSITIVE_HEADERS,
    ),
    # mosaic/listeners.py
    "mosaic.listeners.x__redirect__mutmut_21": ('"XXbodyXX"', ASGI_BODY),
    "mosaic.listeners.x__redirect__mutmut_22": ('"BODY"', ASGI_BODY),
    "mosaic.listeners.x_by_port__mutmut_6": ('("XXXX", None)', SERVER_HOST),
    "mosaic.listeners.x__no_such_socket__mutmut_4": ("NOT_FOUND, None)", SOCKET_DETAIL),
    "mosaic.listeners.x__no_such_socket__mutmut_9": ("XXNo such WebSocket", SOCKET_DETAIL),
    "mosaic.listeners.x__no_such_socket__mutmut_10": ("no such websocket", SOCKET_DETAIL),
    "mosaic.listeners.x__no_such_socket__mutmut_11": ("NO SUCH WEBSOCKET", SOCKET_DETAIL),
}


def run(argv: list[str], cwd: Path, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}
    if log is None:
        return subprocess.run(argv, cwd=cwd, env=env, text=True, capture_output=True, check=False)
    with log.open("w") as out:
        return subprocess.run(
            argv, cwd=cwd, env=env, text=True, stdout=out, stderr=out, check=False
        )


def statuses(copy: Path) -> dict[str, str]:
    listed = run([sys.executable, "-m", "mutmut", "results", "--all", "true"], copy)
    found = re.findall(r"^\s*(\S+): (.+)$", listed.stdout, flags=re.MULTILINE)
    return {name: status.strip() for name, status in found}


def change_of(copy: Path, name: str) -> str:
    shown = run([sys.executable, "-m", "mutmut", "show", name], copy).stdout
    lines = [line[1:].strip() for line in shown.splitlines() if line[:1] in "-+"]
    return " => ".join(line for line in lines if line and not line.startswith(("--", "++")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    parser.add_argument(
        "--verdicts-of", type=Path, help="only judge the results of a kept copy, run nothing"
    )
    args = parser.parse_args()

    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="mosaic-mutation-"))
    copy = args.verdicts_of or scratch / "project"
    try:
        log = scratch / "mutmut.log"
        if args.verdicts_of is None:
            shutil.copytree(ROOT, copy, ignore=COPY_IGNORE)
            print(f"mutation: mutmut runs in {copy} (log: {log})", flush=True)
            run(
                [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.max_children)],
                copy,
                log,
            )
        found = statuses(copy)
        if not found:
            if log.exists():
                print(log.read_text(errors="replace")[-4000:])
            print("mutation: mutmut reported no mutants")
            return 1
        killed = sorted(n for n, s in found.items() if s == "killed")
        others = sorted(n for n, s in found.items() if s != "killed")
        equivalent, unexplained = [], []
        for name in others:
            change = change_of(copy, name)
            known = EQUIVALENT.get(name)
            if known is not None and known[0] in change:
                equivalent.append(name)
            else:
                unexplained.append(f"{name}: {found[name]}: {change}")
        stale = sorted(set(EQUIVALENT) - set(equivalent))
        minutes = (time.monotonic() - started) / 60
        print(
            f"mutation: {len(found)} mutants, {len(killed)} killed, "
            f"{len(equivalent)} equivalent, {len(unexplained)} not killed, "
            f"{len(stale)} stale equivalents; {minutes:.1f} min"
        )
        for line in unexplained:
            print(f"  NOT KILLED {line}")
        for name in stale:
            print(f"  STALE EQUIVALENT {name} (killed, renamed or gone: update the list)")
        if args.keep:
            print(f"mutation: scratch copy kept in {copy}")
        return 1 if unexplained or stale else 0
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
