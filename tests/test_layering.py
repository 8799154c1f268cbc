"""The layout shows the architecture: the domain core never imports its transports."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import broker

TRANSPORTS = {"chat", "tester", "mosaic"}


def test_broker_imports_no_transport() -> None:
    """STYLE §1: `chat/` and `tester/` import `broker`; `broker` imports neither."""
    offenders = []
    for path in Path(broker.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in TRANSPORTS]
    assert offenders == []


def names_a_module(text: str, root: Path) -> bool:
    """Whether `text` names a module of the project (`mosaic.asgi`, `mosaic.asgi:application`),
    as an import string would; a logger's name (`mosaic.security`) names none."""
    dotted = text.split(":", 1)[0]
    # A dotted path: a lone package name is also a word (the `tester` role).
    if "." not in dotted or not dotted.replace(".", "").replace("_", "").isalnum():
        return False
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_broker_names_no_transport_module_in_strings() -> None:
    """STYLE §19: the domain core loads no transport by import string either (`serve`, which
    names the site's ASGI application, is the site's command)."""
    root = Path(broker.__file__).parent.parent
    offenders = [
        f"{path.name}: {node.value}"
        for path in Path(broker.__file__).parent.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.split(".")[0] in TRANSPORTS
        and names_a_module(node.value, root)
    ]
    assert offenders == []


def imported_packages(path: Path) -> list[str]:
    """The top-level packages `path` imports, relative imports left out."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module.split(".")[0])
    return names


def test_conversation_tests_import_neither_broker_nor_chat() -> None:
    """`testassistant`, its suites and the pytest plugin speak to the tester listener
    only, over HTTP and WebSocket; importing the broker would let them prove what the broker
    does rather than what the listener serves."""
    tester = Path(broker.__file__).parent.parent / "tester"
    paths = [
        *sorted((tester / "suites").rglob("*.py")),
        tester / "management" / "commands" / "testassistant.py",
    ]
    offenders = [
        f"{path.relative_to(tester.parent)}: {name}"
        for path in paths
        for name in imported_packages(path)
        if name in {"broker", "chat"}
    ]
    assert offenders == []
    assert len(paths) >= 10


def test_client_package_imports_only_the_standard_library_and_its_dependencies() -> None:
    """`tester/suites` is installed alone as `mosaic_test` (pyproject.toml), into an
    environment without Django or this project: its modules import each other relatively, and
    otherwise only the standard library, its declared dependencies and pytest (the plugin)."""
    suites = Path(broker.__file__).parent.parent / "tester" / "suites"
    allowed = set(sys.stdlib_module_names) | {"websockets", "jsonschema", "pytest"}
    offenders = [
        f"{path.name}: {name}"
        for path in sorted(suites.rglob("*.py"))
        for name in imported_packages(path)
        if name not in allowed
    ]
    assert offenders == []
