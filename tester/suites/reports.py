"""How a run is told: a line per case and a summary, JSON lines, JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tester.suites.runner import ERROR, FAILED, PASSED, CaseResult, Run

SHOWN = 200


def shown(text: str, limit: int = SHOWN) -> str:
    """`text` on one line, shortened to `limit` characters, in quotation marks."""
    line = " ".join(text.split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    return f"“{line}”"


def line(result: CaseResult) -> str:
    """One line: pass, or fail with the first failed expectation and the actual reply."""
    if result.status == PASSED:
        turns = len(result.case.turns)
        return f"PASS  {result.title} ({turns} turn{'s' if turns != 1 else ''})"
    if result.failure is None:
        return f"ERROR {result.title}: {result.refusal}"
    return (
        f"FAIL  {result.title}: turn {result.turn} {shown(result.sent or '', 60)}: "
        f"expected {result.failure.expected}; got {shown(result.failure.actual)}"
    )


def summary(run: Run, seconds: float) -> str:
    parts = [f"{run.passed} passed", f"{run.failed} failed"]
    if run.not_run:
        parts.append(f"{run.not_run} not run")
    return f"{', '.join(parts)} in {seconds:.1f} s"


def as_json(result: CaseResult) -> dict[str, Any]:
    """One case as one JSON object (`--json`)."""
    return {
        "suite": result.suite.name,
        "case": result.case.name,
        "file": result.suite.file,
        "status": result.status,
        "thread": result.thread,
        "turn": result.turn,
        "sent": result.sent,
        "expected": result.failure.expected if result.failure else None,
        "actual": result.failure.actual if result.failure else None,
        "error": result.refusal.code if result.refusal else None,
        "detail": result.refusal.detail if result.refusal else None,
        "seconds": round(result.seconds, 3),
    }


def json_line(result: CaseResult) -> str:
    return json.dumps(as_json(result), ensure_ascii=False)


def junit(results: Sequence[CaseResult]) -> ElementTree.ElementTree:
    """JUnit XML: one `testsuite` per suite, one `testcase` per case, a `failure` with what
    was expected and what came (or an `error` with the listener's refusal)."""
    root = ElementTree.Element("testsuites", name="testassistant")
    suites: dict[str, ElementTree.Element] = {}
    for result in results:
        key = f"{result.suite.file}\0{result.suite.name}"
        if key not in suites:
            suites[key] = ElementTree.SubElement(
                root, "testsuite", name=result.suite.name, file=result.suite.file
            )
        case = ElementTree.SubElement(
            suites[key],
            "testcase",
            classname=result.suite.name,
            name=result.case.name,
            file=result.suite.file,
            line=str(result.case.line),
            time=f"{result.seconds:.3f}",
        )
        if result.status == FAILED and result.failure is not None:
            failure = ElementTree.SubElement(
                case,
                "failure",
                type="expectation",
                message=f"turn {result.turn}: expected {result.failure.expected}",
            )
            failure.text = (
                f"turn {result.turn}: sent {result.sent}\n"
                f"expected: {result.failure.expected}\n"
                f"actual: {result.failure.actual}\n"
            )
        elif result.status == ERROR and result.refusal is not None:
            error = ElementTree.SubElement(
                case, "error", type=result.refusal.code, message=result.refusal.detail
            )
            error.text = str(result.refusal)
    for element in [root, *suites.values()]:
        counted = [
            r
            for r in results
            if element is root or suites[f"{r.suite.file}\0{r.suite.name}"] is element
        ]
        element.set("tests", str(len(counted)))
        element.set("failures", str(sum(r.status == FAILED for r in counted)))
        element.set("errors", str(sum(r.status == ERROR for r in counted)))
        element.set("time", f"{sum(r.seconds for r in counted):.3f}")
    ElementTree.indent(root)
    return ElementTree.ElementTree(root)


def write_junit(results: Sequence[CaseResult], path: str | Path) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    junit(results).write(target, encoding="utf-8", xml_declaration=True)
