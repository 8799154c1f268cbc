"""The `--html` page read as its reader meets it (html.parser): every element's tag, and the
comparison's groups and cases in order, each case's name and texts by side (`before`, the
baseline's; `now`, this test run's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class ComparedCase:
    change: str
    name: str = ""
    texts: dict[str, list[str]] = field(default_factory=lambda: {"before": [], "now": []})


class Outline(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.groups: list[str] = []
        self.cases: list[ComparedCase] = []
        self._sides: list[str | None] = []
        self._in_name = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        change = found.get("data-change")
        self.tags.append(tag)
        if tag == "section" and "group" in classes and change:
            self.groups.append(change)
        elif tag in ("section", "tr") and change:
            self.cases.append(ComparedCase(change))
        if tag == "span" and "name" in classes:
            self._in_name = True
        if tag == "div":
            side = found.get("data-side") or (self._sides[-1] if self._sides else None)
            self._sides.append(side)

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._sides:
            self._sides.pop()
        if tag == "span":
            self._in_name = False

    def handle_data(self, data: str) -> None:
        if not self.cases:
            return
        case = self.cases[-1]
        side = self._sides[-1] if self._sides else None
        if self._in_name:
            case.name += data
        elif side in case.texts and data.strip():
            case.texts[side].append(data)

    def texts(self, side: str) -> list[str]:
        return [text for case in self.cases for text in case.texts[side]]


def outline(page: str) -> Outline:
    parsed = Outline()
    parsed.feed(page)
    parsed.close()
    return parsed
