"""The contract's ids resolve: every rule id and `SPEC §` section that code or tests cite has
its anchor in `docs/spec.md`, every mutant of `tests/support/mutants.py` has its row there, and
every file the contract names exists.

A citation is a rule id as a whole word — `R`, `L`, `T`, `W`, `B` or `M` and a number without a
leading zero (`R12`, `L3`, `M17`) — or a section, `§N` or `§N.M`. A section counts as the
contract's unless the nearest label before it is `STYLE`, the house style's own numbering.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.support.mutants import MUTANTS, apply

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "docs" / "spec.md"

# Where the product and its tests are written: Python in these packages, and the Console's
# own scripts (`static/`, without the third-party libraries vendored there).
PYTHON_PACKAGES = ("broker", "runner", "chat", "human", "tester", "mosaic", "tests", "bench")
SCRIPT_DIRECTORIES = ("static",)
VENDORED = "vendor"
# This file writes citations without targets on purpose, to prove they are reported.
THIS_FILE = Path(__file__).resolve()

# Not preceded by a word character, `%` (a percent-encoded byte such as `%B2` is no rule) or
# `.` (`mosaic.W001` is a system check id); no leading zero, so `W001` and `B0` never match.
RULE_ID = re.compile(r"(?<![\w%.])([RLTWBM][1-9][0-9]*)(?!\w)")
SECTION = re.compile(r"§\s?([0-9]+(?:\.[0-9]+)?)")
LABEL = re.compile(r"\b(SPEC|STYLE)\b")
# How far back a section looks for its label: far enough for `SPEC §6 `unavailable`, §9`.
LABEL_REACH = 80

ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
NUMBERED_HEADING = re.compile(r"^#{1,6}\s+([0-9]+(?:\.[0-9]+)*)\.?\s", re.MULTILINE)
TOP_DIRECTORIES = "broker|runner|chat|human|tester|mosaic|tests|bench|static|templates|docs"
NAMED_FILE = re.compile(rf"`((?:{TOP_DIRECTORIES})/[\w./-]+\.(?:py|js|md|toml|html))`")


@dataclass(frozen=True)
class Citation:
    """A rule id or section cited at `where` (`path:line`), and the anchor it needs."""

    text: str
    anchor: str
    where: str


def rule_anchor(rule_id: str) -> str:
    """`R12` is found at `<a id="r12">`."""
    return rule_id.lower()


def section_anchor(number: str) -> str:
    """`§7.2` is found at `<a id="s7-2">` (or a heading numbered `7.2`)."""
    return "s" + number.replace(".", "-")


def citations(text: str, *, path: str = "<text>") -> list[Citation]:
    """Every rule id and contract section cited in `text`."""
    found = []
    for match in RULE_ID.finditer(text):
        found.append(
            Citation(match.group(1), rule_anchor(match.group(1)), _where(text, path, match))
        )
    for match in SECTION.finditer(text):
        before = text[max(0, match.start() - LABEL_REACH) : match.start()]
        labels = LABEL.findall(before)
        if labels and labels[-1] == "STYLE":
            continue
        number = match.group(1)
        found.append(Citation(f"§{number}", section_anchor(number), _where(text, path, match)))
    return found


def _where(text: str, path: str, match: re.Match[str]) -> str:
    return f"{path}:{text.count(chr(10), 0, match.start()) + 1}"


def targets(spec_text: str) -> set[str]:
    """The anchors of the contract: its `<a id>`s, and each numbered heading as a section."""
    anchors = set(ANCHOR.findall(spec_text))
    anchors.update(section_anchor(number) for number in NUMBERED_HEADING.findall(spec_text))
    return anchors


def missing_targets(found: Iterable[Citation], anchors: set[str]) -> list[str]:
    """`where: citation` for each citation whose anchor the contract lacks."""
    return sorted(f"{c.where}: {c.text}" for c in found if c.anchor not in anchors)


def cited_files() -> list[Path]:
    files = [
        path
        for package in PYTHON_PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    ]
    files += [
        path
        for directory in SCRIPT_DIRECTORIES
        for path in (ROOT / directory).rglob("*.js")
        if VENDORED not in path.relative_to(ROOT).parts
    ]
    return sorted(path for path in files if path.resolve() != THIS_FILE)


def code_citations() -> list[Citation]:
    return [
        citation
        for path in cited_files()
        for citation in citations(
            path.read_text(encoding="utf-8"), path=str(path.relative_to(ROOT))
        )
    ]


def spec_text() -> str:
    return SPEC.read_text(encoding="utf-8")


def test_every_cited_rule_and_section_has_its_anchor_in_the_spec() -> None:
    found = code_citations()
    # The scan reads the whole tree: a handful of citations would mean it read almost nothing.
    assert len(found) > 200
    assert missing_targets(found, targets(spec_text())) == []


def test_a_citation_without_a_target_is_reported() -> None:
    anchors = targets(
        '<a id="r1"></a>**R1 owner check.**\n## 6. HTTP\n<a id="s7-2"></a>\n### 7.1 Turns\n'
    )
    # A listener the spec lacks, in two pieces so that the whole tree's scan does not cite it.
    unknown = "L" + "10"
    text = (
        "R1 and SPEC §6, §7.1 and §7.2 are here (R1–R3 is not).\n"
        f"{unknown} is not, nor SPEC §12.4, nor §9 on its own; STYLE §23 is not the contract's.\n"
        "%C2%B2, mosaic.W001 and W004 cite nothing.\n"
    )
    assert missing_targets(citations(text), anchors) == [
        "<text>:1: R3",
        f"<text>:2: {unknown}",
        "<text>:2: §12.4",
        "<text>:2: §9",
    ]


def test_every_mutant_has_its_row_in_the_spec() -> None:
    anchors = targets(spec_text())
    assert [m.id for m in MUTANTS if rule_anchor(m.id) not in anchors] == []


def test_every_mutant_still_applies_to_the_line_it_names() -> None:
    """Each of SPEC §10's mutants finds its line once, so a change that moves or rewrites that
    line turns this suite red at once, not only `make mutants` (which refuses a stale mutant)."""
    for mutant in MUTANTS:
        source = (ROOT / mutant.path).read_text(encoding="utf-8")
        assert apply(mutant, source) != source, mutant.id


def test_every_file_the_spec_names_exists() -> None:
    named = set(NAMED_FILE.findall(spec_text()))
    assert named, "the contract names the modules and tests of its rules"
    assert sorted(path for path in named if not (ROOT / path).exists()) == []
