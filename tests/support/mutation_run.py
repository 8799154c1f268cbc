"""`make mutation`: mutmut over the broker's policy and access modules and the listeners' gates
and ASGI guards (docs/security.md, "Mutation testing"; configuration in pyproject.toml).

mutmut itself never edits a source file: it writes its mutated copy to `mutants/`. This script
goes one step further and runs it in a scratch copy of the project, so neither the working tree
nor its `mutants/` directory is touched, and every run starts afresh (no cached verdicts).

The run fails unless every mutant is killed or is equivalent: one of EQUIVALENT below, each with
the reason no test can tell it apart from the product, or a mutant that only rewords a refusal's
sentence (`rewords_a_refusal`). An entry of EQUIVALENT that no longer matches a surviving mutant
fails the run too, so the list stays true.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DETECTED = {"killed", "timeout"}
COPY_IGNORE = shutil.ignore_patterns(
    ".venv*",  # the dev set and the peers' (LiteLLM, promptfoo): the run uses none of them
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
SQL_CASE = "SQL keywords and unquoted names are the same in any case"
CLAIM_INSTANCE_JOIN = (
    "a join kept for speed: without it a claim's instance is read by a query of its own, the "
    "same row; no statement-count test pins that read"
)
STREAM_LOCK = (
    "the stream lock is PostgreSQL's: SQLite, where this runs, never takes it; the PostgreSQL "
    "pass covers it (test_a_turn_on_postgresql_waits_for_its_business_stream_lock)"
)
STREAMS_WITH_LOCK = (
    "`take_streams` acts only with `lock`, whose default is off: its own default is never acted on"
)
SHARED_STREAM_KEY = (
    "the stream lock is PostgreSQL's (SQLite never asks its key); there, a key shared by more "
    "businesses serialises more turns and orders none less: a cost, not a fault"
)
CONVERTER_ARGS = "these fields' converters (datetimes, JSON) read no expression or connection"
SAME_LENGTHS = "the columns and their values come from one column list: always the same length"
ONE_DATABASE = "one database: nothing reads a loaded instance's database alias"
DEFAULT_UNREAD = "every caller passes the argument: the default is never read"
NOT_FOUND_SENTENCE = (
    "the 404 handler answers its own sentence; the exception's message is never shown"
)
NO_EMPTY_METHOD = "Django's request.method is never empty: the fallback is never read"
CSRF_ARGS = "CsrfViewMiddleware.process_view reads neither the view's args nor its kwargs"
ASGI_HEADERS = "`headers` is a required key of ASGI scopes: the default is never used"
ASGI_BODY = "`body` of http.response.body defaults to b'' in ASGI: the same empty answer"
SOCKET_DETAIL = "a WebSocket close carries the code and reason only, never the detail"
FALSY = "`False` and `None` are both false where it is read (`or`)"
NO_EMPTY_NAME = "no server delivers a header with an empty name, so '' is never looked up"

FIRST_PIECE = "only the piece before the first `;` is read, however often the rest is split"
NO_CLIENT = "a scope without `client` is no configured proxy's address, whatever stands in for it"
CLIENT_PORT = "the port of the client address is never read, only the host"
NO_CLIENT = "a scope without a client is refused: neither stand-in host is a loopback address"
ASGI_PATH = "`path` is a required key of an ASGI HTTP scope: the default is never used"
NO_HOST = "an absent or repeated Host matches neither allowed host, whatever stands in for it"
SSL_REDIRECT = (
    "SecurityMiddleware reads SECURE_SSL_REDIRECT for its truth: `None` is off as `False`"
)
SOCKET_MARK = "nothing reads the listener mark of a WebSocket scope: its routes bind their listener"
UNUSED_RESPONSE = "process_request and process_view never call the middleware's get_response"
SERVER_HOST = "the host part of the server address is never read, only the port"
NOT_MORE_BODY = "`more_body` is read under `not`: an absent key's `None` is false as `False`"
NO_ORIGIN = (
    "an absent or repeated Origin is no `scheme://host:port` origin: no allowed list holds it,"
    " whatever stands in for it"
)
WEBSOCKET_ONLY_DETAIL = (
    "the guard refuses WebSockets only, whose close carries the code and reason, never the detail"
)

# A call that refuses, and the position of its `detail` argument (which may also be named).
REFUSERS = {"Refusal": 1, "refuse": 3}
# `module.x_function__mutmut_N` or `module.xǁClassǁmethod__mutmut_N`
MUTANT_NAME = re.compile(
    r"^(?P<module>[A-Za-z0-9_.]+)\.x(?:_(?P<function>[A-Za-z0-9_]+?)"
    r"|ǁ(?P<cls>[A-Za-z0-9_]+)ǁ(?P<method>[A-Za-z0-9_]+?))__mutmut_\d+$"
)

# mutant name -> (a fragment of its changed line, why no test can kill it); mutants that only
# reword a refusal's sentence are recognised by `rewords_a_refusal` and are not listed here.
EQUIVALENT: dict[str, tuple[str, str]] = {
    # broker/access.py
    "broker.access.x_access_claim__mutmut_15": ('"thread__instance", )', CLAIM_INSTANCE_JOIN),
    "broker.access.x_access_claim__mutmut_16": ("of=None", SQLITE_LOCKS),
    "broker.access.x_access_claim__mutmut_17": ("XXselfXX", SQLITE_LOCKS),
    "broker.access.x_access_claim__mutmut_18": ('"SELF"', SQLITE_LOCKS),
    "broker.access.x_access_thread__mutmut_1": ("lock: bool = True", SQLITE_LOCKS),
    "broker.access.x_access_thread__mutmut_2": ("take_streams: bool = True", STREAMS_WITH_LOCK),
    "broker.access.x_access_thread__mutmut_3": ("take_streams = None", STREAM_LOCK),
    "broker.access.x_access_thread__mutmut_7": ('"XXpostgresqlXX"', STREAM_LOCK),
    "broker.access.x_access_thread__mutmut_8": ('"POSTGRESQL"', STREAM_LOCK),
    "broker.access.x_access_thread__mutmut_10": ("(take_streams) and False", STREAM_LOCK),
    "broker.access.x_access_thread__mutmut_12": ("stream_lock_key(None)", STREAM_LOCK),
    "broker.access.x_access_thread__mutmut_17": ("_thread_read(lock=None,", SQLITE_LOCKS),
    "broker.access.x_access_thread__mutmut_18": ("take_streams=None)", STREAM_LOCK),
    "broker.access.x_access_thread__mutmut_33": ("(take_streams) and False", STREAM_LOCK),
    "broker.access.x_access_thread__mutmut_35": ("row[2:]", STREAM_LOCK),
    "broker.access.x__thread_read__mutmut_17": ("(take_streams) and False", STREAM_LOCK),
    "broker.access.x__thread_read__mutmut_41": ('sql = " FOR NO KEY UPDATE OF t"', SQLITE_LOCKS),
    "broker.access.x__thread_read__mutmut_42": ('sql -= " FOR NO KEY UPDATE OF t"', SQLITE_LOCKS),
    "broker.access.x__thread_read__mutmut_43": ('"XX FOR NO KEY UPDATE OF tXX"', SQLITE_LOCKS),
    "broker.access.x__thread_read__mutmut_44": ('" for no key update of t"', SQLITE_LOCKS),
    "broker.access.x__thread_read__mutmut_45": ('" FOR NO KEY UPDATE OF T"', SQLITE_LOCKS),
    "broker.access.x__thread_read__mutmut_20": ('"B.TESTER_ENABLED"', SQL_CASE),
    "broker.access.x__thread_read__mutmut_24": ('" where c.thread_id', SQL_CASE),
    "broker.access.x__thread_read__mutmut_25": ('" WHERE C.THREAD_ID', SQL_CASE),
    "broker.access.x__thread_read__mutmut_38": ('" where t.id', SQL_CASE),
    "broker.access.x_access_human_actor__mutmut_9": ('"HUMAN"', SQL_CASE),
    "broker.access.x_access_tester_actor__mutmut_7": ('"SLUG"', SQL_CASE),
    "broker.access.x_stream_lock_key__mutmut_1": ("business_id | 0x7FFFFFFF", SHARED_STREAM_KEY),
    "broker.access.x_stream_lock_key__mutmut_2": ("business_id & 2147483648", SHARED_STREAM_KEY),
    "broker.access.x__converted__mutmut_7": ("convert(value, None, db)", CONVERTER_ARGS),
    "broker.access.x__converted__mutmut_8": (
        "convert(value, field.cached_col, None)",
        CONVERTER_ARGS,
    ),
    "broker.access.x__loaded__mutmut_12": ("strict=None", SAME_LENGTHS),
    "broker.access.x__loaded__mutmut_15": ("zip(columns, values, )", SAME_LENGTHS),
    "broker.access.x__loaded__mutmut_16": ("strict=False", SAME_LENGTHS),
    "broker.access.x__loaded__mutmut_17": ("from_db(None,", ONE_DATABASE),
    "broker.access.x_access_verb__mutmut_1": ("switch: bool = False", DEFAULT_UNREAD),
    # chat/gates.py, human/gates.py
    "chat.gates.xǁJsonBodyǁhas_permission__mutmut_6": ('split(";", )', FIRST_PIECE),
    "chat.gates.xǁJsonBodyǁhas_permission__mutmut_9": ('split(";", 2)', FIRST_PIECE),
    "chat.gates.x_proxy_username__mutmut_17": ('("XXXX", 0)', NO_CLIENT),
    "chat.gates.x_proxy_username__mutmut_18": ('("", 1)', CLIENT_PORT),
    "chat.gates.x_proxy_username__mutmut_23": (
        '"headers", None)',
        ASGI_HEADERS,
    ),
    "chat.gates.x_proxy_username__mutmut_25": (
        'get("headers", )',
        ASGI_HEADERS,
    ),
    "chat.gates.x_proxy_username__mutmut_50": ('"LATIN-1"', CODEC_NAME),
    "chat.gates.xǁSameOriginFetchǁhas_permission__mutmut_6": (
        'get("sec-fetch-site")',
        CASE_INSENSITIVE_HEADERS,
    ),
    "chat.gates.xǁSameOriginFetchǁhas_permission__mutmut_7": (
        'get("SEC-FETCH-SITE")',
        CASE_INSENSITIVE_HEADERS,
    ),
    "human.gates.xǁTrustedHumanOriginǁhas_permission__mutmut_4": (
        'get("origin")',
        CASE_INSENSITIVE_HEADERS,
    ),
    "human.gates.xǁTrustedHumanOriginǁhas_permission__mutmut_5": (
        'get("ORIGIN")',
        CASE_INSENSITIVE_HEADERS,
    ),
    "human.gates.xǁConsoleSendEnabledǁhas_permission__mutmut_4": (
        '"allowed_without_send", None',
        FALSY,
    ),
    "chat.gates.x_proxy_username__mutmut_5": ('"LATIN-1"', CODEC_NAME),
    "human.gates.x_enforce_csrf__mutmut_5": (
        "lambda _request: 0",
        UNUSED_RESPONSE,
    ),
    "human.gates.x_enforce_csrf__mutmut_9": (
        "None, None, {}",
        CSRF_ARGS,
    ),
    "human.gates.x_enforce_csrf__mutmut_10": ("(), None)", CSRF_ARGS),
    # tester/gates.py
    "tester.gates.xǁTesterFenceǁhas_permission__mutmut_7": ('"XXXX"', NO_EMPTY_METHOD),
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_5": ('{"XXXX"}', NO_EMPTY_NAME),
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_19": ('"LATIN-1"', CODEC_NAME),
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_21": (
        '"headers", None)',
        ASGI_HEADERS,
    ),
    "tester.gates.xǁNoProxyUserHeaderǁhas_permission__mutmut_23": (
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
    # the listeners' ASGI guards: mosaic/edge/, human/listener.py, tester/listener.py
    "mosaic.edge.listener.x_static_files__mutmut_2": ("Http404(None)", NOT_FOUND_SENTENCE),
    "mosaic.edge.listener.x_static_files__mutmut_3": ('"XXNo such file.XX"', NOT_FOUND_SENTENCE),
    "mosaic.edge.listener.x_static_files__mutmut_4": ('"no such file."', NOT_FOUND_SENTENCE),
    "mosaic.edge.listener.x_static_files__mutmut_5": ('"NO SUCH FILE."', NOT_FOUND_SENTENCE),
    "tester.listener.x__redirect__mutmut_21": ('"XXbodyXX"', ASGI_BODY),
    "tester.listener.x__redirect__mutmut_22": ('"BODY"', ASGI_BODY),
    "mosaic.edge.ports.x_by_port__mutmut_13": ('("XXXX", None)', SERVER_HOST),
    "mosaic.edge.sockets.x__no_such_socket__mutmut_4": ("NOT_FOUND, None)", SOCKET_DETAIL),
    "mosaic.edge.listener.x_build_listener__mutmut_16": (
        "named(None, websocket_origin_only",
        SOCKET_MARK,
    ),
    "mosaic.edge.listener.x_capped_body__mutmut_14": ('"headers", None)', ASGI_HEADERS),
    "mosaic.edge.listener.x_capped_body__mutmut_16": ('get("headers", )', ASGI_HEADERS),
    "mosaic.edge.listener.x_capped_body__mutmut_61": ('"more_body", None)', NOT_MORE_BODY),
    "mosaic.edge.listener.x_capped_body__mutmut_63": ('get("more_body", )', NOT_MORE_BODY),
    "mosaic.edge.listener.x_plain_http_handler__mutmut_1": (
        "SECURE_SSL_REDIRECT=None",
        SSL_REDIRECT,
    ),
    "human.listener.x_refuse_tester_header__mutmut_13": ('"headers", None)', ASGI_HEADERS),
    "human.listener.x_refuse_tester_header__mutmut_15": ('get("headers", )', ASGI_HEADERS),
    "tester.listener.x_tester_host_only__mutmut_20": ('("XXXX", 0)', NO_CLIENT),
    "tester.listener.x_tester_host_only__mutmut_21": ('("", 1)', CLIENT_PORT),
    "tester.listener.x_tester_host_only__mutmut_24": ('"headers", None)', ASGI_HEADERS),
    "tester.listener.x_tester_host_only__mutmut_26": ('get("headers", )', ASGI_HEADERS),
    "tester.listener.x_tester_host_only__mutmut_39": ('"LATIN-1"', CODEC_NAME),
    "tester.listener.x_tester_host_only__mutmut_42": ('else "XXXX"', NO_HOST),
    "tester.listener.x_tester_host_only__mutmut_81": ("'path', None)", ASGI_PATH),
    "tester.listener.x_tester_host_only__mutmut_83": ("get('path', )", ASGI_PATH),
    "tester.listener.x_tester_host_only__mutmut_86": ("'XX/XX')", ASGI_PATH),
    "mosaic.edge.sockets.x_websocket_origin_only__mutmut_8": ('"headers", None)', ASGI_HEADERS),
    "mosaic.edge.sockets.x_websocket_origin_only__mutmut_10": ('get("headers", )', ASGI_HEADERS),
    "mosaic.edge.sockets.x_websocket_origin_only__mutmut_23": ('"LATIN-1"', CODEC_NAME),
    "mosaic.edge.sockets.x_websocket_origin_only__mutmut_26": ('else "XXXX"', NO_ORIGIN),
    "mosaic.edge.sockets.x_websocket_origin_only__mutmut_31": (
        "ORIGIN_REFUSED, None)",
        WEBSOCKET_ONLY_DETAIL,
    ),
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


def diff_of(copy: Path, name: str) -> str:
    return run([sys.executable, "-m", "mutmut", "show", name], copy).stdout


def changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """The removed and the added lines of a mutant's diff, stripped."""
    body = [line for line in diff.splitlines() if not line.startswith(("---", "+++"))]
    removed = [line[1:].strip() for line in body if line.startswith("-")]
    added = [line[1:].strip() for line in body if line.startswith("+")]
    return removed, added


def change_of(diff: str) -> str:
    removed, added = changed_lines(diff)
    return " => ".join(line for line in removed + added if line)


def _tokens(line: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(line).readline))
    except (tokenize.TokenError, SyntaxError):
        return None


def _string_value(literal: str) -> str | None:
    """The value of a plain string literal (no f-string, no bytes), else None."""
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, str) else None


def _function_of(copy: Path, name: str) -> ast.AST | None:
    """The unmutated function a mutant belongs to, parsed from the copy's source."""
    match = MUTANT_NAME.match(name)
    if match is None:
        return None
    source = copy / (match["module"].replace(".", "/") + ".py")
    if not source.is_file():
        return None
    scope: list[ast.stmt] = ast.parse(source.read_text()).body
    if match["cls"]:
        classes = [n for n in scope if isinstance(n, ast.ClassDef) and n.name == match["cls"]]
        if len(classes) != 1:
            return None
        scope = classes[0].body
    wanted = match["method"] or match["function"]
    found = [
        node
        for node in scope
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == wanted
    ]
    return found[0] if len(found) == 1 else None


def _refusal_details(function: ast.AST) -> set[int]:
    """The ids of the string constants passed as the detail of a refusal in `function`."""
    details: set[int] = set()
    for call in ast.walk(function):
        if not isinstance(call, ast.Call):
            continue
        callee = call.func
        called = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", None)
        if called not in REFUSERS:
            continue
        position = REFUSERS[called]
        named = [k.value for k in call.keywords if k.arg == "detail"]
        detail = call.args[position] if len(call.args) > position else (named or [None])[0]
        if isinstance(detail, ast.Constant) and isinstance(detail.value, str):
            details.add(id(detail))
    return details


def rewords_a_refusal(copy: Path, name: str, diff: str) -> bool:
    """True when the mutant only rewords the sentence of a refusal, and still gives one.

    Exactly one line changes; removed and added lines are the same tokens but for one plain
    string literal; in the unmutated function every occurrence of the old string is the detail
    argument of a `Refusal(...)` or `refuse(...)` call; and the new literal is a non-empty
    string. A refusal whose sentence becomes None, empty or goes missing is not matched.
    """
    removed, added = changed_lines(diff)
    if len(removed) != 1 or len(added) != 1:
        return False
    before, after = _tokens(removed[0]), _tokens(added[0])
    if before is None or after is None or len(before) != len(after):
        return False
    differing = []
    for old, new in zip(before, after, strict=True):
        if old.type != new.type:
            return False
        if old.string != new.string:
            if old.type != tokenize.STRING:
                return False
            differing.append((old.string, new.string))
    if len(differing) != 1:
        return False
    old_value, new_value = (_string_value(literal) for literal in differing[0])
    if old_value is None or new_value is None or not new_value.strip():
        return False
    function = _function_of(copy, name)
    if function is None:
        return False
    details = _refusal_details(function)
    occurrences = [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Constant) and node.value == old_value
    ]
    return bool(occurrences) and all(id(node) in details for node in occurrences)


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
        # A mutant that makes a test hang past mutmut's limit was told apart from the product,
        # as surely as one that fails it (the usual reading: a timeout is a kill).
        killed = sorted(n for n, s in found.items() if s in DETECTED)
        others = sorted(n for n, s in found.items() if s not in DETECTED)
        listed, reworded, unexplained = [], [], []
        for name in others:
            diff = diff_of(copy, name)
            change = change_of(diff)
            known = EQUIVALENT.get(name)
            if known is not None and known[0] in change:
                listed.append(f"{name}: {known[1]}")
            elif found[name] == "survived" and rewords_a_refusal(copy, name, diff):
                reworded.append(f"{name}: {SENTENCE}: {change}")
            else:
                unexplained.append(f"{name}: {found[name]}: {change}")
        equivalent = listed + reworded
        stale = sorted(set(EQUIVALENT) - {line.split(":", 1)[0] for line in listed})
        minutes = (time.monotonic() - started) / 60
        print(
            f"mutation: {len(found)} mutants, {len(killed)} killed, "
            f"{len(equivalent)} equivalent, {len(unexplained)} not killed, "
            f"{len(stale)} stale equivalents; {minutes:.1f} min"
        )
        for line in equivalent:
            print(f"  EQUIVALENT {line}")
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
