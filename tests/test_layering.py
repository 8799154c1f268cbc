"""The layout shows the architecture: the domain core never imports its transports."""

from __future__ import annotations

import ast
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
